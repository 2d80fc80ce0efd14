"""Settings for the demo project: one process, SQLite, a file cache every worker shares.

Paths can be moved with environment variables so that tests can run several
isolated copies side by side:

- DEMO_DATA_DIR: where the SQLite database and the file cache live (default: ./var).
- DJANGO_SECRET_KEY, DJANGO_ALLOWED_HOSTS (comma-separated).
- DJANGO_DEBUG=1: Django's debug pages (off by default, as in production; `manage.py demo --debug` too).
"""

import importlib.util
import os
from pathlib import Path

from mcp_expose.oauth.settings import oauth2_provider_settings

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("DEMO_DATA_DIR", BASE_DIR / "var"))

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "demo-only-secret-key-change-me-in-any-real-deployment")
DEBUG = os.environ.get("DJANGO_DEBUG", "0") == "1"
ALLOWED_HOSTS = [h for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",") if h]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    # Before oauth2_provider, so that its consent page template is ours.
    "mcp_expose",
    "oauth2_provider",
    # MCP tasks run on Django's Tasks framework, on the database queue (`manage.py db_worker` runs them).
    "django_tasks_db",
    "project.library",
]
if not importlib.util.find_spec("django.tasks"):  # Django 5.2: the backport of Django 6.0's Tasks framework
    INSTALLED_APPS.insert(INSTALLED_APPS.index("django_tasks_db"), "django_tasks")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "project.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

ASGI_APPLICATION = "project.asgi.application"
WSGI_APPLICATION = "project.wsgi.application"

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": DATA_DIR / "demo.sqlite3",
        "OPTIONS": {
            # Several server processes share the file: wait for locks instead of failing at once.
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
        # Persistent connections: every MCP call touches the database (credentials, the usage row), and
        # opening a connection costs more than the work itself.
        "CONN_MAX_AGE": 600,
        "CONN_HEALTH_CHECKS": True,
    }
}

# Long tools run as MCP tasks on the database queue; `manage.py demo` starts its worker beside the server.
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}}
if os.environ.get("DEMO_TASKS") == "celery":
    # Or on Celery, with Redis as the broker (Django 6.0+: django-tasks-celery); the worker is
    # `celery -A project worker` (project/celery.py). DEMO_CELERY_BROKER moves the broker.
    TASKS = {
        "default": {
            "BACKEND": "django_tasks_celery.CeleryBackend",
            "QUEUES": ["default"],
            "OPTIONS": {"CELERY_APP": "project.celery.app"},
        }
    }
    CELERY_BROKER_URL = os.environ.get("DEMO_CELERY_BROKER", "redis://127.0.0.1:6379/0")
    CELERY_RESULT_BACKEND = CELERY_BROKER_URL
    CELERY_RESULT_EXTENDED = True
    CELERY_TASK_IGNORE_RESULT = True  # the MCP task's row keeps its result

# Every process tells its open subscriptions/listen streams about catalog changes by watching the catalog
# revision; the channel layer only makes that sooner. In memory here; with several processes, channels_redis's
# RedisChannelLayer tells the others at once.
CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# Every server process must see the same catalog revision stamp, so the demo uses a file cache.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
        "LOCATION": DATA_DIR / "cache",
    }
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LOGIN_URL = "login"

MCP_EXPOSE = {
    "SERVER_NAME": "library-demo",
    "RESOURCE_NAME": "Library demo",
    # Every OAuth token needs "mcp"; the library scopes imply it, and writing implies reading.
    "BASE_SCOPE": "mcp",
    "SCOPE_HIERARCHY": {"library:write": ["library:read"], "library:read": ["mcp"]},
    "SERVER_TITLE": "Library demo",
    "INSTRUCTIONS": "Tools for a small lending library: search the catalogue, look up books, borrow and return.",
    # The MCP Inspector runs in a browser on localhost.
    "ALLOWED_ORIGINS": ["http://localhost:*", "http://127.0.0.1:*"],
    # The demo's upstream MCP server runs beside it on loopback (plain HTTP); a deployment leaves this off.
    "UPSTREAM_ALLOW_LOOPBACK": True,
    # A server card (SEP-2127) at /.well-known/mcp/server-card.
    "SERVER_CARD": {"name": "io.github.django-mcp-expose/library-demo"},
    # A second endpoint for partners: only the read-only tools, its own OAuth resource (tokens for /mcp are
    # refused there, and the other way round), its own name. Its toolset can be changed in the admin.
    "ENDPOINTS": {
        "public": {
            "PATH": "/mcp/public",
            "SERVER_NAME": "library-public",
            "SERVER_TITLE": "Library demo (read-only)",
            "RESOURCE_NAME": "Library demo, read-only",
            "INSTRUCTIONS": "Read-only tools for a small lending library: search the catalogue and look up books.",
            "TOOLSET": {"ALL": True, "READ_ONLY": True},
        },
    },
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "oauth2_provider.contrib.rest_framework.OAuth2Authentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_THROTTLE_RATES": {"loans": os.environ.get("DEMO_LOAN_RATE", "30/min")},
}

# django-oauth-toolkit is the authorization server, mounted at /o/.
OAUTH2_PROVIDER = oauth2_provider_settings(
    scopes={
        "mcp": "Use this server's basic MCP tools",
        "library:read": "Search the library and see your loans",
        "library:write": "Borrow and return books in your name",
    },
    default_scopes=["mcp"],
)

# uvicorn's access log as uvicorn configures it, with query strings left out of every request line: a credential
# sent in a URL is revoked, and must not survive in the log either. Its level is still uvicorn's --log-level.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"strip_query_strings": {"()": "mcp_expose.access_log.StripQueryStrings"}},
    "formatters": {
        "access": {
            "()": "uvicorn.logging.AccessFormatter",
            "fmt": '%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s',
        },
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler"},
        "access": {"class": "logging.StreamHandler", "formatter": "access", "stream": "ext://sys.stdout"},
    },
    "loggers": {
        "mcp_expose": {"handlers": ["console"], "level": os.environ.get("MCP_EXPOSE_LOG_LEVEL", "INFO")},
        "uvicorn.access": {"handlers": ["access"], "filters": ["strip_query_strings"], "propagate": False},
    },
}
