"""Unit-test settings: the demo project with an in-memory database and a private cache."""

from project.settings import *  # noqa: F403

DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "mcp-expose-tests"}}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING = {"version": 1, "disable_existing_loggers": False}
# The checks for these are tested explicitly; silence the warning the private cache would raise everywhere else.
SILENCED_SYSTEM_CHECKS = ["mcp_expose.W001"]

# A small loan budget per user, so that DRF throttling can be seen applying to MCP calls.
REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"loans": "8/min"}}  # noqa: F405
