"""Settings for our server under benchmark: the demo's settings, plus the bench app, with DEBUG off.

DEBUG off because that is how a server is deployed (DEBUG on also makes Django keep every query
in memory). Everything else (SQLite in WAL mode, the file cache, middleware, DRF, OAuth) is the demo's.
With MCP_BENCH_OTEL=1 (the `echo_otel` workload) an OpenTelemetry SDK is configured, as `opentelemetry-instrument`
would: spans to a batch processor, metrics to a periodic reader, both exported to nowhere.
"""

import os

from project.settings import *  # noqa: F403

if os.environ.get("MCP_BENCH_OTEL") == "1":
    from bench.telemetry_sdk import configure

    configure()

DEBUG = False
INSTALLED_APPS = [*INSTALLED_APPS, "bench.benchapp"]  # noqa: F405
