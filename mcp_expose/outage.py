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
    """This process's current database outage, as one part of it sees it: logged when it starts, again every
    `log_again_after` seconds while it lasts, and when it ends. The messages are the dispatcher's; the usage
    writer says its own (`usage_writer.WritingOutage`)."""

    def __init__(self, log_again_after: float = LOG_AGAIN_AFTER) -> None:
        self.log_again_after = log_again_after
        self._lock = threading.Lock()
        self._logged_at: float | None = None  # monotonic; None: no outage
        self._started_at: float | None = None  # wall-clock time, for whoever asks since when
        self._refused = 0

    @property
    def since(self) -> float | None:
        """When (`time.time()`) the current outage started; None when there is none."""
        return self._started_at

    def refused(self, what: str, exc: BaseException) -> None:
        """`what` failed for the outage: a warning when the outage starts, again only every `log_again_after`
        seconds while it lasts."""
        now = time.monotonic()
        with self._lock:
            self._refused += 1
            if self._logged_at is not None and now - self._logged_at < self.log_again_after:
                return
            starting, refused = self._logged_at is None, self._refused
            self._logged_at, self._refused = now, 0
            if starting:
                self._started_at = time.time()
        reason = f"{type(exc).__name__}: {first_line(exc)}"
        if starting:
            self.log_started(what, reason)
        else:
            self.log_continues(reason, refused)

    def ended(self) -> None:
        """Something succeeded: the outage is over, and the next refusal starts a new one (logged again)."""
        if self._logged_at is None:  # the common case, without the lock
            return
        with self._lock:
            ended, self._logged_at, self._started_at, self._refused = self._logged_at is not None, None, None, 0
        if ended:
            self.log_ended()

    def log_started(self, what: str, reason: str) -> None:
        logger.warning(
            "The database is unavailable (%s); %s and every call after it are answered "
            "`unavailable` until one succeeds",
            reason,
            what,
        )

    def log_continues(self, reason: str, refused: int) -> None:
        logger.warning(
            "The database is still unavailable (%s): %d calls answered `unavailable` in the last %d seconds",
            reason,
            refused,
            self.log_again_after,
        )

    def log_ended(self) -> None:
        logger.info("The database is available again")


def first_line(exc: BaseException) -> str:
    """The driver's message names the failure (and for PostgreSQL, the host and port), never a query's values."""
    return str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""


outage = Outage()
