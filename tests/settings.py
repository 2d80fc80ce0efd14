"""Unit-test settings: the demo project with an in-memory database and a private cache."""

import os
import tempfile
from pathlib import Path

from project.settings import *  # noqa: F403

# A file, not ":memory:": tools run in worker threads, and an in-memory SQLite database cannot close
# those threads' connections (Python 3.13 then warns about every one of them).
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": Path(tempfile.gettempdir()) / "mcp-expose-unit.sqlite3",
        "TEST": {"NAME": str(Path(tempfile.gettempdir()) / f"mcp-expose-unit-test-{os.getpid()}.sqlite3")},
        "OPTIONS": {"timeout": 20},
    }
}
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "mcp-expose-tests"}}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING = {"version": 1, "disable_existing_loggers": False}
# The checks for these are tested explicitly; silence the warning the private cache would raise everywhere else.
SILENCED_SYSTEM_CHECKS = ["mcp_expose.W001"]

# A small loan budget per user, so that DRF throttling can be seen applying to MCP calls.
REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"loans": "8/min"}}  # noqa: F405

# View patterns the parity tests call over HTTP and through MCP (tests/test_view_parity.py); no models, no tools.
# DRF's Token, for the tasks of callers accepted by TokenAuthentication (tests/test_task_revocation.py).
# The same for Django Ninja operations (tests/test_ninja_parity.py).
INSTALLED_APPS = [*INSTALLED_APPS, "tests.apps.parity", "tests.apps.ninja_parity", "rest_framework.authtoken"]  # noqa: F405

# The library's default, not the demo's: tests that reach a loopback upstream turn it on where they mean it.
# The dotted names that deployments may keep (WIRE_NAMES = "dotted"): every in-process test then shows that
# setting at work, while the demo's own settings, its live tests and tests/test_names.py serve the portable default.
MCP_EXPOSE = {**MCP_EXPOSE, "UPSTREAM_ALLOW_LOOPBACK": False, "SERVER_CARD": None, "WIRE_NAMES": "dotted"}  # noqa: F405
