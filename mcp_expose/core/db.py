"""Connection upkeep for work that runs outside Django's request cycle (MCP calls, their worker threads)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from django.db import connections

P = ParamSpec("P")
R = TypeVar("R")


def close_stale_connections() -> None:
    """Django's `close_old_connections`, minus connections inside a transaction.

    MCP traffic never passes Django's request signals, so each unit of database
    work tidies up itself. A connection in the middle of someone's atomic block
    (a test, or a caller that wraps us in a transaction) is theirs: never close it.
    """
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close_if_unusable_or_obsolete()


def tidies_connections(func: Callable[P, R]) -> Callable[P, R]:
    """Wrap a sync unit of database work in connection upkeep on both sides, as Django's
    request signals do for a view: with `CONN_MAX_AGE = 0` the connection is closed after
    the unit (so no worker thread keeps one idle, or drops it unclosed when it dies); with
    persistent connections (`CONN_MAX_AGE > 0`, which MCP traffic wants: opening one costs
    more than most calls) it stays open for the thread's next unit until it is too old or broken.
    """

    @functools.wraps(func)
    def tidied(*args: P.args, **kwargs: P.kwargs) -> R:
        close_stale_connections()
        try:
            return func(*args, **kwargs)
        finally:
            close_stale_connections()

    return tidied
