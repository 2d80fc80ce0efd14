"""Ending the streams that would keep a stopping server from stopping.

A `subscriptions/listen` stream lasts until its client leaves. uvicorn, told to stop (SIGTERM, a reload), first
waits for every open response and only then sends the lifespan's shutdown; so one open listen stream kept the
process up until it was killed. While the server stops, each listen stream is ended the spec's graceful way
instead: its `SubscriptionsListenResult` as the last frame, after which the client listens again elsewhere.

A stop is seen as sse-starlette sees it (the SDK's 2025-11-25 event streams end through it): its flag, set by its
wrapper of uvicorn's exit handler, or the `should_exit` of the uvicorn server whose method handles SIGTERM. Other
servers bound the wait themselves (hypercorn's and gunicorn's graceful timeouts, daphne's close timeout).
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable

import anyio
from sse_starlette.sse import AppStatus

logger = logging.getLogger("mcp_expose.asgi")

# How often a serving process asks whether its server has begun to stop, in seconds.
POLL_SECONDS = 0.5


def server_stopping() -> bool:
    """Whether the ASGI server running this process has been told to stop."""
    if AppStatus.should_exit:
        return True
    handler = signal.getsignal(signal.SIGTERM)
    return bool(getattr(getattr(handler, "__self__", None), "should_exit", False))


async def end_streams_on_stop(end_streams: Callable[[], int], stopping: Callable[[], bool] = server_stopping) -> None:
    """Call `end_streams` (which ends every open stream and says how many) once `stopping()` is true, and again
    at every poll after, for any stream opened meanwhile on a connection the server had not yet closed. Runs
    until cancelled."""
    while not stopping():
        await anyio.sleep(POLL_SECONDS)
    ended = end_streams()
    if ended:
        logger.info("The server is stopping: ended %d listen stream(s)", ended)
    while True:
        await anyio.sleep(POLL_SECONDS)
        end_streams()
