"""Several server processes as in production: PostgreSQL for rows, Redis for the cache and the channel layer.

The test run chooses the database and a key prefix per run through environment variables, and the fault tests
a short credential cache (MCP_SCALE_CREDENTIAL_CACHE, in seconds), to see a database outage outlast it.
"""

import os

from tests.settings_live import *  # noqa: F403
from tests.settings_live import MCP_EXPOSE

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("MCP_SCALE_DB", "mcp_scale"),
        "USER": os.environ.get("MCP_SCALE_PG_USER", "mcp"),
        "PASSWORD": os.environ.get("MCP_SCALE_PG_PASSWORD", "mcp"),
        "HOST": os.environ.get("MCP_SCALE_PG_HOST", "127.0.0.1"),
        "PORT": os.environ.get("MCP_SCALE_PG_PORT", "5432"),
        "CONN_MAX_AGE": 60,
        "CONN_HEALTH_CHECKS": True,
    }
}
REDIS_URL = os.environ.get("MCP_SCALE_REDIS", "redis://127.0.0.1:6379/0")
PREFIX = os.environ.get("MCP_SCALE_PREFIX", "mcp-scale")
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL, "KEY_PREFIX": PREFIX}
}
# redis-py 8 reads with a 5 s socket timeout by default, the same as channels_redis's blocking pop: a longer
# one lets the pop end by itself (docs/how-to/scale.md says the same).
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 15}], "prefix": PREFIX},
    }
}

if "MCP_SCALE_CREDENTIAL_CACHE" in os.environ:
    MCP_EXPOSE = {**MCP_EXPOSE, "CREDENTIAL_CACHE_SECONDS": int(os.environ["MCP_SCALE_CREDENTIAL_CACHE"])}
