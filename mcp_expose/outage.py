"""Tell a database that is not available right now from a bug, and log each outage once.

A SQLite file locked past its busy timeout, or a PostgreSQL server that refuses or drops connections, is
not the tool's fault and goes away by itself: the caller is told to retry (`unavailable`), and the log
gets one warning when the outage starts instead of a traceback per call.
"""

from __future__ import annotations

import logging
import threading
import time

from django.db import InterfaceError, OperationalError

logger = logging.getLogger("mcp_expose.dispatch")

# What the drivers say when the database cannot serve this call now (lowercased). Any other error, such as
# an SQL mistake also raised as OperationalError, stays a bug.
UNAVAILABLE_MESSAGES = (
    "database is locked",  # SQLite: another connection held the write lock past the busy timeout
    "database table is locked",
    "connection refused",  # PostgreSQL (psycopg): the server is down, restarting or out of reach
    "could not connect",
    "server closed the connection",
    "connection already closed",
    "the connection is closed",
    "terminating connection",
    "the database system is starting up",
    "the database system is shutting down",
)
# An outage still going on after this many seconds is logged again, so a long one is not one line.
LOG_AGAIN_AFTER = 300.0


def database_unavailable(exc: BaseException) -> bool:
    """Whether `exc` says the database cannot be reached or locked right now, rather than that a query is wrong."""
    if not isinstance(exc, OperationalError | InterfaceError):
        return False
    text = str(exc).lower()
    return any(message in text for message in UNAVAILABLE_MESSAGES)


class Outage:
    """This process's current database outage: logged when it starts, ended by the next successful call."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since: float | None = None
        self._refused = 0

    def refused(self, what: str, exc: BaseException) -> None:
        """A call (`what`) was answered `unavailable`: a warning when the outage starts, again only every
        `LOG_AGAIN_AFTER` seconds while it lasts."""
        now = time.monotonic()
        with self._lock:
            self._refused += 1
            if self._since is not None and now - self._since < LOG_AGAIN_AFTER:
                return
            starting, refused = self._since is None, self._refused
            self._since, self._refused = now, 0
        reason = f"{type(exc).__name__}: {_first_line(exc)}"
        if starting:
            logger.warning(
                "The database is unavailable (%s); %s and every call after it are answered "
                "`unavailable` until one succeeds",
                reason,
                what,
            )
        else:
            logger.warning(
                "The database is still unavailable (%s): %d calls answered `unavailable` in the last %d seconds",
                reason,
                refused,
                LOG_AGAIN_AFTER,
            )

    def ended(self) -> None:
        """A call succeeded: the outage is over, and the next refusal starts a new one (logged again)."""
        if self._since is None:  # the common case, without the lock
            return
        with self._lock:
            ended, self._since, self._refused = self._since is not None, None, 0
        if ended:
            logger.info("The database is available again")


def _first_line(exc: BaseException) -> str:
    """The driver's message names the failure (and for PostgreSQL, the host and port), never a query's values."""
    return str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""


outage = Outage()
