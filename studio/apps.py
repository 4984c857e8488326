"""The Studio app: checks the feature settings when Django starts."""

from __future__ import annotations

from django.apps import AppConfig


class StudioConfig(AppConfig):
    name = "studio"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """A bad ``STUDIO_CODE_MODE``, ``STUDIO_CATALOGS``, ``STUDIO_ENVIRONMENT`` or
        ``STUDIO_OTLP_*`` stops every process that loads Django (daphne, workers, manage.py)
        with ``ImproperlyConfigured`` naming it, before any session opens."""
        from studio.runtime_options import check_settings

        check_settings()
