"""Unit-test settings: the demo project with an in-memory database and a private cache."""

from project.settings import *  # noqa: F403

DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "mcp-expose-tests"}}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING = {"version": 1, "disable_existing_loggers": False}
# The checks for these are tested explicitly; silence the warning the private cache would raise everywhere else.
SILENCED_SYSTEM_CHECKS = ["mcp_expose.W001"]
