"""Tell a dependency that is not available right now (the database, the shared cache) from a bug, and log
each outage as a story: one line when it starts, a summary now and then while it lasts, one when it ends.

A SQLite file locked past its busy timeout, a PostgreSQL server that refuses or drops connections, a Redis
that is stopped or frozen: none of it is the caller's fault, and it goes away by itself. The caller is told to
retry (`unavailable` in a tool result, 503 with Retry-After at the edge), and the log gets one warning when the
outage starts instead of a traceback per request.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from django.db import InterfaceError, InternalError, OperationalError

from mcp_expose.core.errors import McpExposeError

logger = logging.getLogger("mcp_expose.dispatch")

# What the drivers say when the database cannot serve this call now (lowercased). Any other error, such as
# an SQL mistake also raised as OperationalError, stays a bug.
UNAVAILABLE_MESSAGES = (
    "database is locked",  # SQLite: another connection held the write lock past the busy timeout
    "database table is locked",
    "connection refused",  # PostgreSQL (psycopg): the server is down, restarting or out of reach
    "connection reset by peer",  # a connection attempt the server dropped as it shut down
    "broken pipe",
    "could not connect",
    "server closed the connection",
    "connection already closed",
    "the connection is closed",
    "terminating connection",
    "the database system is starting up",
    "the database system is shutting down",
    "connection timeout expired",
    "consuming input failed",
    "server conn crashed",
    "no connection to the server",
    "connection is lost",
    "could not receive data from server",
    "ssl syscall error",
    "canceling statement due to",  # statement_timeout, lock_timeout
    "read-only transaction",
    "could not extend file",
    "no space left on device",
    "too many connections",
    "the database system is in recovery mode",
)
# While an outage lasts, a summary of what it cost is logged this often (seconds).
SUMMARY_EVERY = 60.0


class DependencyUnavailable(McpExposeError):
    """A request cannot be served because `dependency` ("database", "cache") cannot answer right now.

    Known outages travel as this, so the edge answers 503 with Retry-After, and a tool call `unavailable`,
    without a traceback."""

    def __init__(self, dependency: str, reason: str = "") -> None:
        super().__init__(f"The {dependency} is unavailable" + (f" ({reason})" if reason else ""))
        self.dependency = dependency
        self.reason = reason


# PostgreSQL's SQLSTATE classes and codes for a server that cannot serve now, whatever the message's language:
# connection exceptions, insufficient resources (disk full, too many connections), operator intervention
# (shutdown, a statement cancelled by statement_timeout), a read-only transaction (a failover's standby), and a
# lock not available (lock_timeout).
UNAVAILABLE_SQLSTATE_CLASSES = ("08", "53", "57")
UNAVAILABLE_SQLSTATES = ("25006", "55P03")


def database_unavailable(exc: BaseException) -> bool:
    """Whether `exc` says the database cannot be reached or locked right now, rather than that a query is wrong.

    An exception raised while handling such an error counts as it: a connection that dies inside an atomic block
    surfaces as whatever the code around it raised next (Django's TransactionManagementError, a rollback that
    fails), with the driver's error as its cause or context."""
    current: BaseException | None = exc
    for _ in range(5):
        if current is None:
            return False
        if _unavailable_itself(current):
            return True
        current = current.__cause__ or current.__context__
    return False


def _unavailable_itself(exc: BaseException) -> bool:
    if isinstance(exc, DependencyUnavailable):
        return exc.dependency == "database"
    if not isinstance(exc, OperationalError | InterfaceError | InternalError):
        return False
    sqlstate = getattr(exc.__cause__, "sqlstate", None) or getattr(exc, "sqlstate", None)
    if isinstance(sqlstate, str) and (
        sqlstate[:2] in UNAVAILABLE_SQLSTATE_CLASSES or sqlstate in UNAVAILABLE_SQLSTATES
    ):
        return True
    if isinstance(exc, InternalError):
        return False
    text = str(exc).lower()
    return any(message in text for message in UNAVAILABLE_MESSAGES)


def dependency_of(exc: BaseException) -> str | None:
    """The dependency a known outage is of ("database", "cache"), or None for anything else (a bug)."""
    if isinstance(exc, DependencyUnavailable):
        return exc.dependency
    return "database" if database_unavailable(exc) else None


@dataclass(frozen=True)
class OutageState:
    """What an operator (the health endpoint) is told: no hosts, no messages that could carry secrets."""

    dependency: str
    unavailable: bool
    since_seconds: float | None
    refused: int


class Outage:
    """This process's current outage of one dependency, as one part of it sees it: logged when it starts, summarized
    every `log_again_after` seconds while it lasts, and when it ends (by the next success). The messages are
    methods, so a part with more to say (the usage writer's `WritingOutage`) says its own."""

    def __init__(
        self,
        dependency: str = "database",
        consequence: str = "calls that need it are answered `unavailable` until one succeeds",
        log_again_after: float = SUMMARY_EVERY,
    ) -> None:
        self.dependency = dependency
        self.consequence = consequence  # what the start line says happens meanwhile
        self.log_again_after = log_again_after
        self._lock = threading.Lock()
        self._since: float | None = None  # monotonic start of the outage; None: no outage
        self._started_at: float | None = None  # the same as wall-clock time, for whoever asks since when
        self._summarized = 0.0
        self._refused = 0  # since the last line logged
        self._total = 0  # in this outage

    @property
    def active(self) -> bool:
        return self._since is not None

    @property
    def since(self) -> float | None:
        """When (`time.time()`) the current outage started; None when there is none."""
        return self._started_at

    def refused(self, what: str, exc: BaseException | None = None) -> None:
        """`what` could not be served for the outage: a warning when the outage starts, a summary every
        `log_again_after` seconds while it lasts."""
        now = time.monotonic()
        with self._lock:
            self._refused += 1
            self._total += 1
            starting = self._since is None
            if starting:
                self._since, self._started_at, self._summarized, self._refused = now, time.time(), now, 0
            elif now - self._summarized < self.log_again_after:
                return
            refused = self._refused
            self._summarized, self._refused = now, 0
        reason = f"{type(exc).__name__}: {first_line(exc)}" if exc is not None else ""
        if starting:
            self.log_started(what, reason)
        else:
            self.log_continues(reason, refused)

    def ended(self) -> bool:
        """Something succeeded: the outage is over (True when one was going on); the next refusal starts a new
        one, logged again."""
        if self._since is None:  # the common case, without the lock
            return False
        with self._lock:
            since, total = self._since, self._total
            self._since = self._started_at = None
            self._refused = self._total = 0
        if since is None:
            return False
        self.log_ended(time.monotonic() - since, total)
        return True

    def reset(self) -> None:
        """No outage, and nothing logged (tests; a breaker reset)."""
        with self._lock:
            self._since = self._started_at = None
            self._refused = self._total = 0

    def state(self) -> OutageState:
        since = self._since
        return OutageState(
            self.dependency,
            since is not None,
            None if since is None else round(time.monotonic() - since, 1),
            self._total,
        )

    def log_started(self, what: str, reason: str) -> None:
        logger.warning(
            "The %s is unavailable%s; %s: %s", self.dependency, f" ({reason})" if reason else "", what, self.consequence
        )

    def log_continues(self, reason: str, refused: int) -> None:
        since = self._since
        lasted = time.monotonic() - since if since is not None else 0.0
        logger.warning(
            "The %s is still unavailable%s, for %d s now: %d requests affected in the last %d s",
            self.dependency,
            f" ({reason})" if reason else "",
            lasted,
            refused,
            self.log_again_after,
        )

    def log_ended(self, lasted: float, total: int) -> None:
        logger.warning("The %s is available again after %d s (%d requests affected)", self.dependency, lasted, total)


def first_line(exc: BaseException) -> str:
    """The driver's message names the failure (and for PostgreSQL, the host and port), never a query's values."""
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else ""


outage = Outage("database", "calls that need it are answered `unavailable` until one succeeds")
