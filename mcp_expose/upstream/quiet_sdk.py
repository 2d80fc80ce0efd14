"""The SDK client's log records while it talks to an upstream: one line each, never a traceback.

The SDK logs what it cannot parse with `logger.exception`. From an upstream that is hostile or broken, that is a
traceback per garbage answer, and its pydantic message repeats what the upstream sent. The failure itself is
reported as the call's error, bounded; the record keeps its message and the exception's type only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

SDK_CLIENT_LOGGERS = ("mcp.client.streamable_http", "mcp.client.session", "mcp.client.client")

_upstream: ContextVar[str | None] = ContextVar("mcp_expose_upstream", default=None)


class OneLine(logging.Filter):
    """Drops the traceback of a record made while an upstream is talked to, and names the exception's type."""

    def filter(self, record: logging.LogRecord) -> bool:
        server = _upstream.get()
        if server is None or not record.exc_info:
            return True
        error = record.exc_info[1]
        record.msg = f"{record.getMessage()} (upstream {server!r}: {type(error).__name__})"
        record.args = None
        record.exc_info = None
        record.exc_text = None
        return True


_FILTER = OneLine()
for _name in SDK_CLIENT_LOGGERS:
    logging.getLogger(_name).addFilter(_FILTER)


@contextmanager
def talking_to(server: str) -> Iterator[None]:
    """Within this block (and the tasks it starts), the SDK client's records about `server` are one line each."""
    token = _upstream.set(server)
    try:
        yield
    finally:
        _upstream.reset(token)
