"""The demo settings, with switches the live OAuth tests flip through environment variables.

- MCP_TEST_HIDE_FORBIDDEN_TOOLS=1: answer forbidden tools as unknown instead of a 403 challenge.
- MCP_TEST_CONFIRMATION_TTL=N: confirmations (and their sealed request state) expire after N seconds.
- MCP_TEST_FAST_PATH=0: every request goes through the SDK (the fast path's differential test compares both).
- MCP_TEST_JSON_RESPONSE=1: answer as JSON instead of SSE (the differential test runs in both modes).
- MCP_TEST_VIEW_MIDDLEWARE=a.B,c.d: VIEW_MIDDLEWARE, comma-separated (the toolbox's middleware).
- MCP_TEST_SQLITE_TIMEOUT=S: SQLite waits S seconds for a lock held by another connection (default 20).
- MCP_TEST_USAGE_SPILL_DIR=path: USAGE_SPILL_DIR, where usage rows the database cannot take are kept.
- MCP_TEST_LEGACY_SESSIONS=1: stateful 2025-11-25 sessions.
- MCP_TEST_WIRE_NAMES=portable: the default names (these settings serve the dotted ones deployments may keep).
- MCP_TEST_BROKEN_APP=1: the toolbox adds a tool whose MCP App page does not render (its E019 would stop every
  management command, so only the server that shows what a host is answered for it has it).
- MCP_TEST_TASK_LEASE=S, MCP_TEST_TASK_HEARTBEAT=S, MCP_TEST_TASK_POLL_INTERVAL=S: the MCP task timings, short
  enough for a test to see a dead worker's task fail.
- MCP_TEST_<SETTING>=N for the long-lived connection limits (MAX_LISTEN_STREAMS, MAX_LISTEN_STREAMS_PER_CALLER,
  MAX_LEGACY_SESSIONS_PER_CALLER, LEGACY_SESSION_IDLE_SECONDS): small ones, so that tests reach them.
- The toolbox app adds tools that are slow, cancellable, chatty, large, chained or need confirmation, and
  routed views: a DRF view with a nested serializer and views that read what middleware sets (tests/urls.py).
- The CIMD fetcher accepts documents served over plain HTTP on 127.0.0.1, which the tests serve
  themselves. This relaxation exists here only, never in the demo or a deployment.
"""

import os

from mcp_expose.core.conf import changed_settings
from project.settings import *  # noqa: F403
from project.settings import DATABASES, MCP_EXPOSE, OAUTH2_PROVIDER

INSTALLED_APPS = [*INSTALLED_APPS, "tests.apps.toolbox"]  # noqa: F405
ROOT_URLCONF = "tests.urls"  # the demo's, plus the toolbox's views

MCP_EXPOSE = {
    **MCP_EXPOSE,
    "HIDE_FORBIDDEN_TOOLS": os.environ.get("MCP_TEST_HIDE_FORBIDDEN_TOOLS") == "1",
    "CONFIRMATION_TTL": int(os.environ.get("MCP_TEST_CONFIRMATION_TTL", "600")),
    "FAST_PATH": os.environ.get("MCP_TEST_FAST_PATH", "1") == "1",
    "JSON_RESPONSE": os.environ.get("MCP_TEST_JSON_RESPONSE") == "1",
    "VIEW_MIDDLEWARE": [path for path in os.environ.get("MCP_TEST_VIEW_MIDDLEWARE", "").split(",") if path],
    "USAGE_SPILL_DIR": os.environ.get("MCP_TEST_USAGE_SPILL_DIR") or None,
    "LEGACY_SESSIONS": os.environ.get("MCP_TEST_LEGACY_SESSIONS") == "1",
    # The dotted names deployments may keep, as in tests/settings.py: the live servers of the toolbox show the
    # setting at work end to end; the demo's (project.settings) serve the portable default.
    "WIRE_NAMES": os.environ.get("MCP_TEST_WIRE_NAMES", "dotted"),
}
for _seconds in ("TASK_LEASE", "TASK_HEARTBEAT", "TASK_POLL_INTERVAL"):
    if f"MCP_TEST_{_seconds}" in os.environ:
        MCP_EXPOSE = changed_settings(MCP_EXPOSE, **{_seconds: float(os.environ[f"MCP_TEST_{_seconds}"])})
for _limit in (
    "MAX_LISTEN_STREAMS",
    "MAX_LISTEN_STREAMS_PER_CALLER",
    "MAX_LEGACY_SESSIONS_PER_CALLER",
    "LEGACY_SESSION_IDLE_SECONDS",
):
    if f"MCP_TEST_{_limit}" in os.environ:
        MCP_EXPOSE = changed_settings(MCP_EXPOSE, **{_limit: int(os.environ[f"MCP_TEST_{_limit}"])})
if "MCP_TEST_SQLITE_TIMEOUT" in os.environ:
    DATABASES["default"]["OPTIONS"] = {
        **DATABASES["default"]["OPTIONS"],
        "timeout": float(os.environ["MCP_TEST_SQLITE_TIMEOUT"]),
    }
OAUTH2_PROVIDER = {**OAUTH2_PROVIDER, "CIMD_METADATA_FETCHER": "tests.cimd.LoopbackMetadataFetcher"}
