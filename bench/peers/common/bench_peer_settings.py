"""The Django settings every Django peer shares (standard library only), for its settings.py:

    globals().update(bench_peer_settings.django_settings())

startproject's middleware kept (the endpoint is an ordinary view behind it), DEBUG off, SQLite in
$BENCH_PEER_DATA, warnings-only logging. Each peer's settings.py adds INSTALLED_APPS, ROOT_URLCONF,
ASGI_APPLICATION and its library's settings.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

# django-stateless-mcp's request_state_security() refuses a SECRET_KEY under 32 bytes.
SECRET_KEY = "bench-peer-only-not-a-secret-0123456789abcdef"

CORE_APPS = ["django.contrib.auth", "django.contrib.contenttypes", "django.contrib.sessions"]


def django_settings() -> dict[str, Any]:
    """The shared settings, with BENCH_PEER_DATA (default ./data under cwd, the peer's app_dir) created."""
    data = Path(os.environ.get("BENCH_PEER_DATA", Path.cwd() / "data"))
    data.mkdir(parents=True, exist_ok=True)
    return {
        "DATA": data,
        "SECRET_KEY": SECRET_KEY,
        "DEBUG": False,
        "ALLOWED_HOSTS": ["127.0.0.1", "localhost"],
        "MIDDLEWARE": [
            "django.middleware.security.SecurityMiddleware",
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.common.CommonMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
            "django.middleware.clickjacking.XFrameOptionsMiddleware",
        ],
        "DATABASES": {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(data / "db.sqlite3")}},
        "USE_TZ": True,
        "DEFAULT_AUTO_FIELD": "django.db.models.BigAutoField",
        # Warnings and errors only, like uvicorn's --log-level warning. The root handler also keeps the mcp
        # SDK's logging.basicConfig(level=INFO) (run when its server is built) from logging lines on every request.
        "LOGGING": {
            "version": 1,
            "disable_existing_loggers": False,
            "handlers": {"console": {"class": "logging.StreamHandler"}},
            "root": {"handlers": ["console"], "level": "WARNING"},
        },
    }
