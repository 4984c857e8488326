"""The Studio app: checks the feature settings when Django starts."""

from __future__ import annotations

from django.apps import AppConfig


class StudioConfig(AppConfig):
    name = "studio"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """A bad ``STUDIO_CODE_MODE``, ``STUDIO_CATALOGS``, ``STUDIO_ENVIRONMENT``,
        ``STUDIO_OTLP_*``, ``STUDIO_SANDBOX*``, ``STUDIO_SHARED_WORKDIRS`` or
        ``STUDIO_CREDENTIALS_KEY`` stops every process that loads Django (daphne, workers,
        manage.py) with ``ImproperlyConfigured`` naming it, before any session opens. A machine
        without a sandbox is not an error: confined sessions then run without a shell."""
        from studio.confinement import configured_sandbox
        from studio.credentials import check_credentials_key
        from studio.runtime_options import check_settings
        from studio.workspaces import check_shared_workdirs

        check_settings()
        configured_sandbox()
        check_shared_workdirs()
        check_credentials_key()
