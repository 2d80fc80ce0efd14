"""Health for load balancers and operators: liveness at `HEALTH_PATH`, readiness at `HEALTH_PATH/ready`.

Liveness answers from the event loop alone: the process is up and serving requests. Readiness also asks each
dependency, quickly, and reports it with this process's breaker and outage states and the usage rows it holds:

- 200 `ok`: everything answers;
- 200 `degraded`: the shared cache or the channel layer is out, and the process serves what it can without
  them (see the outage docs);
- 503 `unavailable`: the database cannot be reached; credentials and the catalog this process holds still
  serve, but nothing new can be looked up or written.

Nothing in either answer names a host, a port, a user or an error message: only states and counts.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from mcp_expose.core.db import in_worker_thread
from mcp_expose.core.outage import outage
from mcp_expose.core.shared_cache import breaker, guarded

HEALTH_KEY = "mcp_expose:health"


def health_paths(mcp_path: str, configured: str | None | bool) -> tuple[str, str] | None:
    """(liveness, readiness) paths, or None when the endpoint is off (`HEALTH_PATH = ""`/False)."""
    if configured is False or configured == "":
        return None
    base = (mcp_path + "/health") if configured is None else str(configured).rstrip("/")
    return base, base + "/ready"


async def serve_health(scope: Scope, receive: Receive, send: Send, *, deep: bool, relay: Any = None) -> None:
    headers = {"Cache-Control": "no-store"}
    if scope["method"] not in ("GET", "HEAD"):
        await Response(status_code=405, headers={"Allow": "GET, HEAD", **headers})(scope, receive, send)
        return
    if not deep:
        await JSONResponse({"status": "ok"}, headers=headers)(scope, receive, send)
        return
    report = await _recent_readiness(relay)
    status = 503 if report["status"] == "unavailable" else 200
    await JSONResponse(report, status_code=status, headers=headers)(scope, receive, send)


# Probes arrive from every load balancer node and anyone else: the dependencies are asked by one at a time, and
# its answer serves the others for this long.
READINESS_REUSE_SECONDS = 1.0
_reused: tuple[float, dict[str, Any]] | None = None
_asking: asyncio.Lock | None = None


async def _recent_readiness(relay: Any) -> dict[str, Any]:
    global _reused, _asking
    if _asking is None:
        _asking = asyncio.Lock()
    async with _asking:
        if _reused is None or time.monotonic() - _reused[0] >= READINESS_REUSE_SECONDS:
            _reused = (time.monotonic(), await in_worker_thread(readiness)(relay))
        return _reused[1]


def readiness(relay: Any = None) -> dict[str, Any]:
    """Each dependency's state, asked now (sync: a query and a cache read, each with its short timeout)."""
    database = _database_state()
    cache = _cache_state()
    layer = relay.layer_state() if relay is not None else "local"
    dependencies = {"database": database, "cache": cache, "channel_layer": layer}
    if database != "ok":
        status = "unavailable"
    elif cache != "ok" or layer not in ("ok", "local"):
        status = "degraded"
    else:
        status = "ok"
    return {
        "status": status,
        "dependencies": dependencies,
        "breakers": {"cache": "open" if breaker.is_open else "closed"},
        "outages": {
            state.dependency: {
                "unavailable": state.unavailable,
                "for_seconds": state.since_seconds,
                "requests_affected": state.refused,
            }
            for state in (outage.state(), breaker.outage.state())
        },
        "usage_rows": _usage_rows(),
    }


def _database_state() -> str:
    from django.db import connections

    from mcp_expose.core.db import close_stale_connections
    from mcp_expose.core.outage import database_unavailable

    close_stale_connections()
    try:
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT 1")
        return "ok"
    except Exception as exc:  # noqa: BLE001  (reported, never raised: this is the health check)
        return "unavailable" if database_unavailable(exc) else "error"
    finally:
        close_stale_connections()


def _cache_state() -> str:
    from mcp_expose.core.outage import DependencyUnavailable
    from mcp_expose.core.process_cache import process_cache

    cache = process_cache()
    try:
        guarded("checking health", cache.get, HEALTH_KEY)
        return "ok"
    except DependencyUnavailable:
        return "unavailable"
    except Exception:  # noqa: BLE001  (reported, never raised)
        return "error"


def _usage_rows() -> dict[str, Any]:
    """Counts only: how many rows wait in memory or in spill files, and how many were lost (each logged)."""
    from mcp_expose.calls import usage_writer

    status = usage_writer.status()
    return {
        "buffered": status.buffered,
        "spilled": status.spilled,
        "lost": status.lost,
        "failing_since": status.failing_since.isoformat() if status.failing_since is not None else None,
    }
