"""Connection upkeep for work that runs outside Django's request cycle (MCP calls, their worker threads)."""

from __future__ import annotations

from django.db import connections


def close_stale_connections() -> None:
    """Django's `close_old_connections`, minus connections inside a transaction.

    MCP traffic never passes Django's request signals, so each unit of database
    work tidies up itself. A connection in the middle of someone's atomic block
    (a test, or a caller that wraps us in a transaction) is theirs: never close it.
    """
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close_if_unusable_or_obsolete()
