"""Set up and serve the demo: migrate, seed, an admin user, an API key, then uvicorn."""

from __future__ import annotations

import secrets
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from mcp_expose.core.conf import get_settings
from mcp_expose.models import ApiKey

from ...helpdesk_setup import start_helpdesk
from ...seed import seed_library

DEMO_KEY_NAME = "demo"
SCRIPT_CLIENT_NAME = "Demo scripts"
DEMO_SCOPES = "library:read library:write"


class Command(BaseCommand):
    help = "Prepare the demo database and serve the demo (MCP at /mcp, admin at /admin/). Safe to run again."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--addrport", default="127.0.0.1:8000", help="HOST:PORT to serve on.")
        parser.add_argument(
            "--noinput",
            "--no-input",
            action="store_false",
            dest="interactive",
            help="Never prompt (the admin password defaults to 'admin'). Implied when standard "
            "input is not a terminal.",
        )
        parser.add_argument(
            "--no-serve",
            action="store_false",
            dest="serve",
            help="Prepare everything and print the details, but do not start the server.",
        )
        parser.add_argument(
            "--upstream-port",
            type=int,
            default=None,
            help="Port of the demo's upstream MCP server, the helpdesk (default: the demo's port + 1).",
        )
        parser.add_argument(
            "--debug",
            action="store_true",
            help="Serve with Django's DEBUG on: error pages with tracebacks and settings. Only on "
            "a machine nobody else can reach.",
        )

    def handle(
        self,
        *args: Any,
        addrport: str,
        interactive: bool,
        serve: bool,
        debug: bool,
        upstream_port: int | None = None,
        **options: Any,
    ) -> None:
        host, port = _split_addrport(addrport)
        # Without a terminal (a script, a pipe, CI) nobody can answer, so the defaults apply as with --noinput.
        interactive = interactive and sys.stdin.isatty()
        self._data_dir().mkdir(parents=True, exist_ok=True)
        call_command("migrate", interactive=False, verbosity=0)
        created = seed_library()
        admin_password = self._ensure_user("admin", superuser=True, interactive=interactive)
        reader_password = self._ensure_user("reader", superuser=False, interactive=False)
        secret = self._demo_key()
        client_id, client_secret = self._script_client()

        base = f"http://{host}:{port}"
        self.stdout.write(self.style.SUCCESS("The demo is ready."))
        if created:
            self.stdout.write(f"  Seeded {created} books.")
        self.stdout.write(f"  MCP endpoint:  {base}{get_settings().PATH}")
        self.stdout.write(f"  Admin:         {base}/admin/")
        if admin_password:
            self.stdout.write(f"  Admin login:   admin / {admin_password}")
        if reader_password:
            self.stdout.write(f"  Reader login:  reader / {reader_password}")
        self.stdout.write(f"  API key:       {secret}")
        self.stdout.write("  OAuth client for scripts (client credentials, acts as admin):")
        self.stdout.write(f"                 client_id={client_id}")
        self.stdout.write(f"                 client_secret={client_secret}")
        self.stdout.write(
            f"                 curl -u '{client_id}:{client_secret}' -d grant_type=client_credentials "
            f"-d scope='library:write' -d resource={base}{get_settings().PATH} {base}/o/token/"
        )
        self.stdout.write(f"  Connect page:  {base}/mcp/connect/ (MCP Inspector, Claude, VS Code, Cursor)")
        self.stdout.write("  Try:           python manage.py mcp_tools --user admin")
        if serve:
            helpdesk = start_helpdesk(host, upstream_port or port + 1, self._data_dir(), self.stdout)
            worker = self._start_task_worker()
            # uvicorn hands a SIGTERM back to the process once it has shut down: exit through `finally`, so
            # the helpdesk stops with the demo.
            signal.signal(signal.SIGTERM, _exit_on_signal)
            try:
                self._serve(host, port, debug=debug)
            finally:
                for process in (helpdesk, worker):
                    if process is not None:
                        process.terminate()
                        process.wait(timeout=10)

    def _ensure_user(self, username: str, *, superuser: bool, interactive: bool) -> str | None:
        """Create the user if missing; returns the password only when it was just set."""
        user_model = get_user_model()
        if user_model._default_manager.filter(username=username).exists():
            return None
        password = username
        if interactive:
            entered = input(f"Password for the demo user '{username}' [{username}]: ").strip()
            password = entered or password
        if superuser:
            user_model._default_manager.create_superuser(username, f"{username}@example.com", password)
        else:
            user_model._default_manager.create_user(username, f"{username}@example.com", password)
        return password

    def _demo_key(self) -> str:
        """The demo API key, kept in the data directory so every run can print it again."""
        key_file = self._data_dir() / "demo-api-key.txt"
        stored = key_file.read_text().strip() if key_file.exists() else ""
        for key in ApiKey.objects.filter(name=DEMO_KEY_NAME, revoked_at__isnull=True):
            if stored and key.matches(stored) and key.is_usable:
                return stored
            key.revoke()
        admin = get_user_model()._default_manager.get(username="admin")
        _, secret = ApiKey.create_key(user=admin, name=DEMO_KEY_NAME, scopes=DEMO_SCOPES)
        key_file.write_text(secret + "\n")
        key_file.chmod(0o600)
        return secret

    def _script_client(self) -> tuple[str, str]:
        """A confidential OAuth client for scripts, its secret kept beside the database like the API key."""
        from oauth2_provider.models import get_application_model

        application_model = get_application_model()
        secret_file = self._data_dir() / "demo-oauth-client.txt"
        stored = secret_file.read_text().split() if secret_file.exists() else []
        if len(stored) == 2 and application_model.objects.filter(client_id=stored[0]).exists():
            return stored[0], stored[1]
        application_model.objects.filter(name=SCRIPT_CLIENT_NAME).delete()
        client_secret = secrets.token_urlsafe(32)
        application = application_model.objects.create(
            name=SCRIPT_CLIENT_NAME,
            user=get_user_model()._default_manager.get(username="admin"),
            client_type=application_model.CLIENT_CONFIDENTIAL,
            authorization_grant_type=application_model.GRANT_CLIENT_CREDENTIALS,
            client_secret=client_secret,
        )
        secret_file.write_text(f"{application.client_id} {client_secret}\n")
        secret_file.chmod(0o600)
        return application.client_id, client_secret

    def _start_task_worker(self) -> subprocess.Popen[bytes]:
        """The worker that runs MCP tasks (the database queue's `db_worker`), beside the server."""
        with open(self._data_dir() / "worker.log", "wb") as log:  # the process keeps its own copy
            worker = subprocess.Popen(
                [
                    sys.executable,
                    str(Path(settings.BASE_DIR) / "manage.py"),
                    "db_worker",
                    "--no-reload",
                    "--no-startup-delay",
                    "--interval",
                    "0.2",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.stdout.write(f"  Task worker:   manage.py db_worker (log: {self._data_dir() / 'worker.log'})")
        return worker

    @staticmethod
    def _data_dir() -> Path:
        """Where the demo keeps its files: DATA_DIR (DEMO_DATA_DIR), whatever the database engine."""
        return Path(getattr(settings, "DATA_DIR", None) or Path(str(settings.DATABASES["default"]["NAME"])).parent)

    def _serve(self, host: str, port: int, *, debug: bool) -> None:
        try:
            import uvicorn
        except ImportError:
            raise CommandError("Serving needs uvicorn: pip install 'django-mcp-expose[demo]'.") from None
        if debug:
            # Before the first request: Django reads DEBUG per request, and uvicorn serves this very process.
            settings.DEBUG = True
        self.stdout.write(f"  DEBUG:         {'on (--debug)' if settings.DEBUG else 'off (--debug turns it on)'}")
        uvicorn.run("project.asgi:application", host=host, port=port, lifespan="on", log_level="info")


def _exit_on_signal(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def _split_addrport(addrport: str) -> tuple[str, int]:
    host, _, port = addrport.rpartition(":")
    if not host or not port.isdigit():
        raise CommandError(f"--addrport must be HOST:PORT, got {addrport!r}.")
    return host.strip("[]"), int(port)
