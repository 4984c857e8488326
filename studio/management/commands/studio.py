"""``python manage.py studio``: everything needed to go from a fresh checkout to a running Studio.

Migrates the database, creates a first user when there is none (the generated password is
printed once and kept in ``<data dir>/initial-login.txt``, readable by the owner only),
registers the offline demo model, then serves: daphne for ``studio.server:application`` plus
``STUDIO_WORKERS`` session-host workers, supervised (``studio.host.supervisor``); with
``--workers 0`` (or in scale mode, whose workers an operator runs) it replaces itself with
daphne. Idempotent: a second run changes nothing and just serves.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from studio import daphne_main, event_loop, heap
from studio.host.supervisor import supervise, worker_count
from studio.models import Provider, RegisteredModel

DEMO_MODEL_NAME = "Offline demo model"


def ensure_demo_model() -> bool:
    """Register the offline demo model once; True if it was created now."""
    if RegisteredModel.objects.filter(provider=Provider.DEMO).exists():
        return False
    RegisteredModel.objects.create(name=DEMO_MODEL_NAME, provider=Provider.DEMO, model_id="demo")
    return True


def ensure_first_user(data_dir: Path, username: str = "admin") -> tuple[str, str] | None:
    """Create a superuser when the database has no user at all; return (username, password)."""
    user_model = get_user_model()
    if user_model.objects.exists():
        return None
    password = secrets.token_urlsafe(12)
    user_model.objects.create_superuser(username=username, email="", password=password)
    data_dir.mkdir(parents=True, exist_ok=True)
    login_file = data_dir / "initial-login.txt"
    login_file.write_text(f"username: {username}\npassword: {password}\n")
    login_file.chmod(0o600)
    return username, password


def sandbox_status() -> str:
    """One line on where the tools of people who are not staff run on this machine."""
    from studio.confinement import check_sandbox

    problem = check_sandbox()
    if problem is None:
        return "Sandbox: bubblewrap works here; the tools of people who are not staff run in it."
    return (
        f"No sandbox ({problem}): sessions of people who are not staff run without bash, write and edit "
        "(install bubblewrap: apt-get install bubblewrap, then restart)."
    )


class Command(BaseCommand):
    help = "Prepare Studio (migrate, first user, demo model) and serve it with daphne."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="Interface to bind (default 127.0.0.1).")
        parser.add_argument("--port", type=int, default=8000, help="Port (default 8000).")
        parser.add_argument("--no-serve", action="store_true", help="Prepare only; do not start daphne.")
        parser.add_argument(
            "--dev", action="store_true", help="Development mode: Django's DEBUG on (never on a shared host)."
        )
        parser.add_argument(
            "--workers",
            default=None,
            help="Session-host worker processes beside daphne (default STUDIO_WORKERS, 0: the host inside "
            "daphne; auto = one per core).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:  # the served processes read them: refuse a bad value before changing anything
            heap.young_threshold(settings.STUDIO_GC_YOUNG_THRESHOLD)
            event_loop.chosen()
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from exc
        data_dir = Path(settings.STUDIO_DATA_DIR)
        data_dir.mkdir(parents=True, exist_ok=True)
        call_command("migrate", interactive=False, verbosity=0)
        created = ensure_first_user(data_dir)
        if ensure_demo_model():
            self.stdout.write("Registered the offline demo model (no API key needed).")
        url = f"http://{options['host']}:{options['port']}/"
        if created:
            username, password = created
            self.stdout.write(self.style.SUCCESS("Created your first user."))
            self.stdout.write(f"  Log in at {url} as {username} / {password}")
            self.stdout.write(f"  (saved in {data_dir / 'initial-login.txt'}; change it in the admin)")
        elif (data_dir / "initial-login.txt").exists():
            self.stdout.write(f"Log in at {url} (first login saved in {data_dir / 'initial-login.txt'}).")
        else:
            self.stdout.write(f"Log in at {url}")
        self.stdout.write(sandbox_status())
        if options["no_serve"]:
            return
        self.stdout.write(f"Serving Studio on {url} (Ctrl+C to stop)")
        sys.stdout.flush()
        argv = daphne_main.command(options["port"], host=options["host"])  # daphne on Studio's event loop
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
        if options["dev"]:
            os.environ["DJANGO_DEBUG"] = "1"
            self.stdout.write(self.style.WARNING("Development mode: DEBUG is on (error pages list every URL)."))
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(settings.BASE_DIR), os.environ.get("PYTHONPATH")]))
        workers = worker_count(options["workers"] if options["workers"] is not None else settings.STUDIO_WORKERS)
        if workers and not settings.STUDIO_REDIS_URL and settings.STUDIO_HOST_MODE == "inprocess":
            self.stdout.write(f"Session hosts: {workers} worker process(es) beside daphne")
            sys.stdout.flush()
            sys.exit(supervise(argv, workers, data_dir))
        os.execv(sys.executable, argv)
