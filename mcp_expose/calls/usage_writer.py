"""Usage rows written off the request path: one thread per server process inserts them in batches.

An insert per call costs a worker-thread hop and a commit on the request's critical path; a batch
costs one commit for many calls, and the caller's answer does not wait for it. The writer runs only
while an ASGI server runs our lifespan (`McpExposeASGI`), which stops it at shutdown after writing
everything queued, so a graceful restart loses no row. Everywhere else (management commands, stdio,
tests calling the dispatcher) rows are written at once, as before. `USAGE_BATCH_SECONDS = 0` turns
batching off.

While the database cannot take rows (down, locked, unreachable) they stay queued and are retried, less
and less often, until it can; past `USAGE_BUFFER_ROWS` the oldest go to a spill file on local disk
(`usage_spill`), as do those still queued at a shutdown during an outage, and the writer of the next start
writes them. Every row has its row id from the start, so none is written twice. A row is lost (counted and
logged whole) only when the database refuses it for another reason (a bug, bad data), or memory and disk
both fail it.

What a batch cannot promise: rows of the last `USAGE_BATCH_SECONDS` die with a process that is killed
outright (SIGKILL, out of memory) instead of stopped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mcp_expose.calls import usage, usage_spill
from mcp_expose.core import telemetry
from mcp_expose.core.conf import get_settings
from mcp_expose.core.outage import Outage

logger = logging.getLogger("mcp_expose.usage")

# Rows per transaction (one `executemany`): a failed batch falls back to single rows, so keep it small.
BATCH_SIZE = 200
# How long a shutdown waits for the writer to write (or spill) the last rows before spilling them itself.
STOP_TIMEOUT = 10.0
# While the database is unavailable, the wait before the next try: doubled after each failure, up to the last.
FIRST_RETRY = 0.5
LAST_RETRY = 30.0
# An outage is summed up in the log this often while it lasts.
SUMMARY_EVERY = 30.0


@dataclass(frozen=True)
class UsageStatus:
    """Where this process's usage rows stand, for operators (the admin's usage summary, a health check)."""

    buffered: int  # rows in memory waiting for the database
    spilled: int  # rows in spill files this process wrote or found, not written to the database yet
    lost: int  # rows lost since the process started, each logged whole
    failing_since: datetime | None  # when writing rows started failing; None while it works

    @property
    def failing(self) -> bool:
        return self.failing_since is not None


class WritingOutage(Outage):
    """The writer's view of an outage: when writing starts failing, a summary every `SUMMARY_EVERY` seconds
    while it lasts, and when rows flow again."""

    def __init__(self, writer: UsageWriter) -> None:
        super().__init__(log_again_after=SUMMARY_EVERY)
        self.writer = writer

    def log_started(self, what: str, reason: str) -> None:
        logger.warning(
            "Usage rows cannot be written: the database is unavailable (%s). They are kept in memory (up to %d; "
            "the oldest beyond that in %s) and written when it is back",
            reason,
            self.writer.buffer_rows,
            usage_spill.spill_dir(),
        )

    def log_continues(self, reason: str, refused: int) -> None:
        status = self.writer.status()
        logger.warning(
            "The database is still unavailable for usage rows (%s): %d rows buffered in memory, %d in spill files",
            reason,
            status.buffered,
            status.spilled,
        )

    def log_ended(self, lasted: float, total: int) -> None:
        status = self.writer.status()
        logger.info(
            "Usage rows are written again (%d rows buffered in memory, %d in spill files)",
            status.buffered,
            status.spilled,
        )


class UsageWriter:
    """Records queued by calls, and the thread that inserts them every `interval` seconds.

    Queuing wakes nobody (a thread woken per call costs more than the insert saves): the thread
    sleeps for the interval, then writes what has gathered. Only a queue past the buffer wakes it, to spill.
    """

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.buffer_rows: int = get_settings().USAGE_BUFFER_ROWS
        self.outage = WritingOutage(self)
        self._pending: deque[usage.CallRecord] = deque()
        self._in_flight: list[usage.CallRecord] = []  # taken from the queue, being written
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._wake = threading.Event()  # set by `add` past the buffer, and by `stop`
        self._retry_in = 0.0
        self._replay_due = True  # spill files to write: at start, and after rows were spilled
        # Taken by `add` and `stop`, and around every change to the queue: once stopping, nothing more is
        # queued behind the final write.
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._stopping.clear()
                self._replay_due = True
                self._thread = threading.Thread(target=self._run, name="mcp_expose-usage-writer", daemon=True)
                self._thread.start()

    def add(self, record: usage.CallRecord) -> bool:
        """Queue the row for the thread to write within `interval` seconds; False once stopped. Past
        `buffer_rows` queued, the oldest are spilled to disk."""
        with self._lock:
            if self._thread is None:
                return False
            self._pending.append(record)
            queued = len(self._pending)
            # The writer thread spills (a call must not wait on the disk); only a thread stuck in the database
            # call leaves it to the calls, past twice the buffer, to keep the memory bounded.
            overflow = self._overflow() if queued > 2 * self.buffer_rows else []
        if queued > self.buffer_rows:
            self._wake.set()
        self._spill(overflow)
        return True

    def stop(self) -> None:
        """Write what is queued (or, the database being unavailable, spill it), then end the thread.
        Blocking: call it from a worker thread."""
        with self._lock:
            thread, self._thread = self._thread, None
            self._stopping.set()
            self._wake.set()
        if thread is None:
            return
        thread.join(STOP_TIMEOUT)
        if thread.is_alive():
            logger.error("The usage writer did not finish within %d s: spilling the rows it still has", STOP_TIMEOUT)
            self._spill_all(self._in_flight)
        usage_spill.spill.close()

    def status(self) -> UsageStatus:
        with self._lock:
            buffered = len(self._pending) + len(self._in_flight)
        since = self.outage.since
        return UsageStatus(
            buffered=buffered,
            spilled=usage_spill.spill.rows,
            lost=usage.rows_lost(),
            failing_since=datetime.fromtimestamp(since, tz=UTC) if since is not None else None,
        )

    def _run(self) -> None:
        try:
            due = time.monotonic()  # spill files left by an earlier run first
            while not self._stopping.is_set():
                self._wake.wait(max(0.0, due - time.monotonic()))
                self._wake.clear()
                if self._stopping.is_set():
                    break
                self._spill_overflow()  # woken past the buffer: spill now, write when due
                if time.monotonic() >= due:
                    due = time.monotonic() + self._write_pass()
            self._last_pass()
        finally:
            from django.db import connections

            connections.close_all()

    def _write_pass(self) -> float:
        """Write what is queued, then what was spilled; return how long to wait before the next pass."""
        try:
            written = self._drain()
            if self._replay_due:
                self._replay_due = False
                try:
                    usage_spill.spill.close()  # this process's own file too
                    written += usage_spill.spill.replay(usage.write_rows, BATCH_SIZE)
                except BaseException:
                    self._replay_due = True
                    raise
        except usage.DatabaseUnavailable as exc:
            self.outage.refused("usage rows", exc.__cause__ or exc)
            self._retry_in = min(max(self._retry_in * 2, FIRST_RETRY), LAST_RETRY)
            return self._retry_in
        except Exception:  # noqa: BLE001  (the spill directory unreadable, say: keep writing later rows)
            logger.exception("The usage writer failed; it tries again in %s s", LAST_RETRY)
            return LAST_RETRY
        if written:
            self._retry_in = 0.0
            self.outage.ended()
        return self._retry_in or self.interval

    def _drain(self) -> int:
        """Write the queue, oldest first, a batch at a time; return the rows written. On an outage the batch
        goes back to the front of the queue and `DatabaseUnavailable` is raised."""
        written = 0
        while True:
            with self._lock:
                if not self._pending:
                    return written
                batch = [self._pending.popleft() for _ in range(min(BATCH_SIZE, len(self._pending)))]
                self._in_flight = batch
            try:
                usage.write_rows(usage.rows_of(batch))
            except usage.DatabaseUnavailable:
                with self._lock:
                    self._pending.extendleft(reversed(batch))
                    self._in_flight = []
                    overflow = self._overflow()
                self._spill(overflow)
                raise
            with self._lock:
                self._in_flight = []
            written += len(batch)

    def _last_pass(self) -> None:
        """At stop: write the queue if the database takes it, or else spill it at once (retries would only
        hold up the shutdown; the next start writes the spilled rows)."""
        if self.outage.since is None:
            try:
                self._drain()
                return
            except usage.DatabaseUnavailable as exc:
                self.outage.refused("usage rows", exc.__cause__ or exc)
        spilled = self._spill_all()
        logger.warning(
            "Stopped while the database is unavailable: %d usage rows are kept in %s for the next start",
            spilled,
            usage_spill.spill_dir(),
        )

    def _overflow(self) -> list[usage.CallRecord]:
        """The oldest rows past `buffer_rows`, taken from the queue (the lock held), with room for a tenth more:
        one spill-file write per tenth of the buffer, not one per call."""
        excess = len(self._pending) - self.buffer_rows
        if excess <= 0:
            return []
        return [self._pending.popleft() for _ in range(min(excess + self.buffer_rows // 10, len(self._pending)))]

    def _spill_overflow(self) -> None:
        with self._lock:
            overflow = self._overflow()
        self._spill(overflow)

    def _spill_all(self, also: Sequence[usage.CallRecord] = ()) -> int:
        with self._lock:
            records = [*also, *self._pending]
            self._pending.clear()
        return self._spill(records)

    def _spill(self, records: list[usage.CallRecord]) -> int:
        if not records:
            return 0
        self._replay_due = True
        return usage_spill.set_aside(usage.rows_of(records))


writer: UsageWriter | None = None


def start(interval: float) -> UsageWriter | None:
    """Start this process's writer (once); None when batching is off."""
    global writer
    if interval <= 0:
        return None
    if writer is None:
        writer = UsageWriter(interval)
    writer.start()
    return writer


def stop() -> None:
    """Write everything queued and stop the writer (blocking)."""
    global writer
    current, writer = writer, None
    if current is not None:
        current.stop()


def queue_or_none(record: usage.CallRecord) -> bool:
    """Queue the row when this process has a writer running; False means: write it yourself."""
    current = writer
    return current is not None and current.add(record)


def _usage_gauges(field: str) -> Callable[[], list[tuple[float, dict[str, Any]]]]:
    return lambda: [(float(getattr(status(), field)), {})]


telemetry.observe(
    "mcp_expose.usage.queue",
    _usage_gauges("buffered"),
    unit="{row}",
    description="Usage rows in this process's memory, waiting for the database.",
)
telemetry.observe(
    "mcp_expose.usage.spilled",
    _usage_gauges("spilled"),
    unit="{row}",
    description="Usage rows in spill files, not yet written to the database.",
)


def status() -> UsageStatus:
    """This process's usage rows: buffered, spilled, lost, and whether writing fails. Cheap and thread-safe."""
    current = writer
    if current is not None:
        return current.status()
    return UsageStatus(buffered=0, spilled=usage_spill.spill.rows, lost=usage.rows_lost(), failing_since=None)
