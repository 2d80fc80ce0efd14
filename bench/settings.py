"""Settings for our server under benchmark: the demo's settings, plus the bench app, with DEBUG off.

DEBUG off because that is how a server is deployed (DEBUG on also makes Django keep every query
in memory). Everything else (SQLite in WAL mode, the file cache, middleware, DRF, OAuth) is the demo's.
"""

from project.settings import *  # noqa: F403

DEBUG = False
INSTALLED_APPS = [*INSTALLED_APPS, "bench.benchapp"]  # noqa: F405
