"""Usage rows written off the request path: one thread per server process inserts them in batches.

An insert per call costs a worker-thread hop and a commit on the request's critical path; a batch
costs one commit for many calls, and the caller's answer does not wait for it. The writer runs only
while an ASGI server runs our lifespan (`McpExposeASGI`), which stops it at shutdown after writing
everything queued, so a graceful restart loses no row. Everywhere else (management commands, stdio,
tests calling the dispatcher) rows are written at once, as before. `USAGE_BATCH_SECONDS = 0` turns
batching off.

What a batch cannot promise: rows of the last `USAGE_BATCH_SECONDS` die with a process that is killed
outright (SIGKILL, out of memory) instead of stopped.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Sequence
from typing import Any

from . import usage
from .db import close_stale_connections

logger = logging.getLogger("mcp_expose.usage")

# Rows per transaction (one `executemany`): a failed batch falls back to single rows, so keep it small.
BATCH_SIZE = 200
# Past this many waiting rows (the database is down or slow), calls write their own row again: they slow
# down instead of the queue growing without bound.
MAX_PENDING = 10_000
# How long a shutdown waits for the last rows; what is still unwritten then is counted in the log.
STOP_TIMEOUT = 30.0


class UsageWriter:
    """Records queued by calls, and the thread that inserts them every `interval` seconds.

    Queuing wakes nobody (a thread woken per call costs more than the insert saves): the thread
    sleeps for the interval, then writes what has gathered.
    """

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._pending: deque[usage.CallRecord] = deque()
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._writing = 0  # rows taken from the queue and not yet written
        # Taken by `add` and `stop`: once stopping, nothing more is queued behind the final write.
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._stopping.clear()
                self._thread = threading.Thread(target=self._run, name="mcp_expose-usage-writer", daemon=True)
                self._thread.start()

    def add(self, record: usage.CallRecord) -> bool:
        """Queue the row for the thread to write within `interval` seconds; False once stopped or full."""
        with self._lock:
            if self._thread is None or len(self._pending) >= MAX_PENDING:
                return False
            self._pending.append(record)
            return True

    def stop(self) -> None:
        """Write what is queued, then end the thread. Blocking: call it from a worker thread."""
        with self._lock:
            thread, self._thread = self._thread, None
            self._stopping.set()
        if thread is not None:
            thread.join(STOP_TIMEOUT)
            if thread.is_alive():
                logger.error("Stopped waiting for the usage writer after %d s: about %d usage rows were not written",
                             STOP_TIMEOUT, len(self._pending) + self._writing)

    def _run(self) -> None:
        try:
            while not self._stopping.wait(self.interval):
                self._write_pending()
            self._write_pending()
        finally:
            from django.db import connections

            connections.close_all()

    def _write_pending(self) -> None:
        batch: list[usage.CallRecord] = []
        while self._pending:
            batch.append(self._pending.popleft())
        if batch:
            self._writing = len(batch)
            try:
                write_batch(batch)
            except Exception:  # noqa: BLE001  (keep writing later rows whatever happened to these)
                logger.exception("Could not write %d usage rows", len(batch))
            finally:
                self._writing = 0


def write_batch(records: Sequence[usage.CallRecord]) -> None:
    """Insert the rows together; if the batch fails, each on its own (a row that still cannot be written is
    logged whole by `usage.write`), so one bad row costs no other."""
    for start in range(0, len(records), BATCH_SIZE):
        chunk = records[start:start + BATCH_SIZE]
        close_stale_connections()
        try:
            insert_rows([usage.row_values(record) for record in chunk])
        except Exception:  # noqa: BLE001  (the log must never stop; each row gets its own chance)
            logger.warning("Could not write %d usage rows together; writing them one by one", len(chunk), exc_info=True)
            for record in chunk:
                usage.write(record, attempts=1)  # a row that fails alone is logged whole



def insert_rows(rows: list[dict[str, Any]]) -> None:
    """One `executemany` of the INSERT Django compiles for one row, in one transaction: what `bulk_create`
    does, without compiling the statement again, or building a model instance, for every row (the bulk of
    its cost for small rows). `rows` are `usage.row_values`, prepared by `prepared_values` as a save would
    prepare them (`ToolCall` has no field that sets itself on save)."""
    from django.db import connections, router, transaction
    from django.db.models.sql import InsertQuery

    from .models import ToolCall

    alias = router.db_for_write(ToolCall)
    connection = connections[alias]
    fields = [field for field in ToolCall._meta.concrete_fields if field is not ToolCall._meta.auto_field]
    query = InsertQuery(ToolCall)
    query.insert_values(fields, [ToolCall(**rows[0])])
    [(sql, _)] = query.get_compiler(alias).as_sql()
    values = prepared_values(rows, fields, connection)
    with transaction.atomic(using=alias, savepoint=False), connection.cursor() as cursor:
        cursor.executemany(sql, values)


def prepared_values(rows: list[dict[str, Any]], fields: list[Any], connection: Any) -> list[list[Any]]:
    """Each row's parameters, in `fields` order: what each field's `get_db_prep_save` returns, without calling
    it for a string in a text column or a float in a float column (it returns them as they are on every
    backend Django ships; not integers: psycopg 3 wraps those in its Int2/Int4 types)."""
    from django.db import models

    as_is = {models.CharField: str, models.TextField: str, models.FloatField: float}
    columns = [(field.attname, as_is.get(type(field)), field) for field in fields]
    return [[
        value if kind is not None and type(value) is kind else field.get_db_prep_save(value, connection)
        for name, kind, field in columns for value in (row[name],)
    ] for row in rows]


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
