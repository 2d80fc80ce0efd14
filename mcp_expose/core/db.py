"""Connection upkeep for work that runs outside Django's request cycle (MCP calls, their worker threads), and the
thread hop that work takes."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Generic, ParamSpec, TypeVar

from asgiref.sync import sync_to_async
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


# On while a caller wants the hops of its calls on its own thread: `mcp_expose.testing`'s client, so that a tool
# runs on the test's connection, inside the test's transaction (pytest-django's `db`, Django's TestCase).
_ON_CALLERS_THREAD: ContextVar[bool] = ContextVar("mcp_expose.on_callers_thread", default=False)


@contextmanager
def hops_on_callers_thread() -> Iterator[None]:
    """Within this block (and the tasks it starts), `in_worker_thread` hops are thread-sensitive: under
    asgiref's `async_to_sync` they run on the thread that called it, with its connection."""
    token = _ON_CALLERS_THREAD.set(True)
    try:
        yield
    finally:
        _ON_CALLERS_THREAD.reset(token)


class WorkerHop(Generic[P, R]):
    """`func` as a coroutine function that runs it in a worker thread: `sync_to_async(func,
    thread_sensitive=False)`, decided at each call, so that `hops_on_callers_thread` can put it on the
    caller's thread instead (`thread_sensitive=True`). Each wrapper is made once."""

    __slots__ = ("_apart", "_together", "func")

    def __init__(self, func: Callable[P, R]) -> None:
        self.func = func
        # Not thread-sensitive: outside Django's handler that would put every call on one global thread.
        self._apart = sync_to_async(func, thread_sensitive=False)
        self._together: Callable[P, Coroutine[Any, Any, R]] | None = None

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:
        if not _ON_CALLERS_THREAD.get():
            return self._apart(*args, **kwargs)
        together = self._together
        if together is None:
            together = self._together = sync_to_async(self.func, thread_sensitive=True)
        return together(*args, **kwargs)


def in_worker_thread(func: Callable[P, R]) -> WorkerHop[P, R]:
    """The hop a unit of database work takes off the event loop (see `WorkerHop`). Usable as a decorator."""
    return WorkerHop(func)
