"""Connection upkeep for work that runs outside Django's request cycle (MCP calls, their worker threads), and the
one way the package's code leaves the event loop for a thread (`in_worker_thread`).

A test (`tests/test_thread_hops.py`) fails on a `sync_to_async` or `anyio.to_thread` anywhere else in the package:
one hop, so that `mcp_expose.testing` can move every database hop onto the test's thread, and so that a reader
finds the three kinds of hop in one place."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Generic, ParamSpec, TypeVar

import anyio
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
    """`func` as a coroutine function that runs it in a worker thread, one of three ways, decided at each call:

    - by default, `sync_to_async(func, thread_sensitive=False)`; `hops_on_callers_thread` puts it on the caller's
      thread instead (`thread_sensitive=True`), so that a test's tool sees the test's transaction;
    - `abandon_on_cancel`: work that holds no database connection a caller shares (a DNS look-up, parsing an
      upstream's answer, a background loop's read), which a cancelled caller need not wait for: the thread finishes
      alone (`anyio.to_thread.run_sync(..., abandon_on_cancel=True)`);
    - `shared_thread`: code that is not thread-safe (Django's declarations, imported at startup) runs on the one
      thread asgiref keeps for such code (`thread_sensitive=True`, always).

    Each asgiref wrapper is made once, on the first call that needs it, so that making a hop costs nothing: a hop
    made where it is used (`in_worker_thread(f)(...)`) is as cheap as one kept at module level."""

    __slots__ = ("_apart", "_together", "abandon_on_cancel", "func", "shared_thread")

    def __init__(self, func: Callable[P, R], *, abandon_on_cancel: bool = False, shared_thread: bool = False) -> None:
        self.func = func
        self.abandon_on_cancel = abandon_on_cancel
        self.shared_thread = shared_thread
        self._apart: Callable[P, Coroutine[Any, Any, R]] | None = None
        self._together: Callable[P, Coroutine[Any, Any, R]] | None = None

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:
        if self.abandon_on_cancel:
            return anyio.to_thread.run_sync(functools.partial(self.func, *args, **kwargs), abandon_on_cancel=True)
        if not _ON_CALLERS_THREAD.get():
            apart = self._apart
            if apart is None:
                # Not thread-sensitive unless asked: outside Django's handler that would put every call on one
                # global thread.
                apart = self._apart = sync_to_async(self.func, thread_sensitive=self.shared_thread)
            return apart(*args, **kwargs)
        together = self._together
        if together is None:
            together = self._together = sync_to_async(self.func, thread_sensitive=True)
        return together(*args, **kwargs)


def in_worker_thread(
    func: Callable[P, R], *, abandon_on_cancel: bool = False, shared_thread: bool = False
) -> WorkerHop[P, R]:
    """The hop off the event loop (see `WorkerHop` for its three kinds). Usable as a bare decorator."""
    return WorkerHop(func, abandon_on_cancel=abandon_on_cancel, shared_thread=shared_thread)
