"""Usage rows the database cannot take now, kept on local disk until it can: append-only JSON lines files.

Each process appends to a file of its own, which it holds an exclusive `flock` on for as long as it has it
open; a file nobody holds (its process ended, or closed it to replay it) is free to be replayed by any
process, which takes the lock first, so two processes never replay the same file. A file is deleted only
once all its rows are committed; rows carry their row id, so a file replayed twice (a crash between the
commit and the delete) adds nothing twice.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import socket
import stat
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from mcp_expose.calls.usage_losses import count_lost, lose
from mcp_expose.core.conf import get_settings

logger = logging.getLogger("mcp_expose.usage")

SUFFIX = ".jsonl"


def spill_dir() -> Path:
    """`USAGE_SPILL_DIR`, or a directory under the system's temporary directory named for the database the
    usage log is written to (so that two projects, or two databases, on one machine never share one)."""
    configured = get_settings().USAGE_SPILL_DIR
    if configured:
        return Path(configured)
    from django.db import connections, router

    from mcp_expose.models import ToolCall

    database = connections[router.db_for_write(ToolCall)].settings_dict
    where = f"{database.get('HOST') or ''}:{database.get('PORT') or ''}/{database.get('NAME') or ''}"
    digest = hashlib.sha256(where.encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"mcp_expose-usage-{Path(str(database.get('NAME') or 'db')).stem}-{digest}"


def encode(row: dict[str, Any]) -> str:
    """One file line for a `usage.row_values` row; raises for a row that is not JSON (which no database
    would take either)."""
    return json.dumps({**row, "created_at": row["created_at"].isoformat(), "row_id": str(row["row_id"])})


def decode(line: str) -> dict[str, Any]:
    row = json.loads(line)
    row["created_at"] = datetime.fromisoformat(row["created_at"])
    row["row_id"] = uuid.UUID(row["row_id"])
    return row


class Spill:
    """This process's spill file, opened on the first row spilled, and the rows it knows to be on disk."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        self._path: Path | None = None
        # Rows in the files this process wrote or found and has not replayed yet, by file.
        self._rows: dict[Path, int] = {}

    @property
    def rows(self) -> int:
        with self._lock:
            return sum(self._rows.values())

    def write(self, rows: Iterable[dict[str, Any]]) -> list[tuple[dict[str, Any], Exception]]:
        """Append the rows, flushed to disk; return those that are not JSON, with why. Raises OSError when
        the disk refuses (the rows are then lost, and the caller says so)."""
        lines: list[str] = []
        refused: list[tuple[dict[str, Any], Exception]] = []
        for row in rows:
            try:
                lines.append(encode(row) + "\n")
            except (TypeError, ValueError) as exc:
                refused.append((row, exc))
        if lines:
            with self._lock:
                file = self._file or self._open()
                try:
                    file.write("".join(lines))
                    file.flush()
                    os.fsync(file.fileno())
                except OSError:
                    # A line may be cut short: the next rows go to a new file, not onto the end of that line.
                    self._file, self._path = None, None
                    file.close()
                    raise
                assert self._path is not None
                self._rows[self._path] = self._rows.get(self._path, 0) + len(lines)
        return refused

    def close(self) -> None:
        """Let go of this process's file (and its lock), so that it can be replayed."""
        with self._lock:
            file, self._file, self._path = self._file, None, None
        if file is not None:
            file.close()

    def replay(self, write_rows: Callable[[list[dict[str, Any]]], object], chunk: int) -> int:
        """Write every file nobody holds through `write_rows`, `chunk` rows at a time, deleting each once
        written; return the rows read. `write_rows` raising (the database is unavailable) keeps that file and
        stops here: the next replay reads it again."""
        directory = spill_dir()
        replayed = 0
        if not directory.is_dir():
            return 0
        own_directory(directory)  # rows are only taken from a directory no one else could write to
        for path in sorted(directory.glob("*" + SUFFIX)):
            try:
                file = open(path, encoding="utf-8")  # noqa: SIM115  (held across the writes below)
            except FileNotFoundError:  # replayed and deleted by another process since the listing
                continue
            with file:
                try:
                    fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:  # a live process writes it, or another replays it
                    continue
                if os.fstat(file.fileno()).st_nlink == 0:  # replayed and deleted while we waited to open it
                    continue
                rows = self._read(path, file)
                with self._lock:
                    self._rows[path] = len(rows)
                for start in range(0, len(rows), chunk):
                    write_rows(rows[start : start + chunk])
                path.unlink()
                with self._lock:
                    self._rows.pop(path, None)
                replayed += len(rows)
                logger.info("Wrote the %d usage rows kept in %s", len(rows), path)
        return replayed

    def _read(self, path: Path, file: IO[str]) -> list[dict[str, Any]]:
        rows = []
        for number, line in enumerate(file, 1):
            try:
                rows.append(decode(line))
            except (ValueError, KeyError, TypeError):  # a line cut short by a crash while it was written
                count_lost(1)
                logger.error("Lost the usage row on line %d of %s: it cannot be read", number, path)
        return rows

    def _open(self) -> IO[str]:
        """A new file, locked before it gets the name replays look for, so none takes it while it is empty."""
        directory = spill_dir()
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        own_directory(directory)
        name = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        opening = directory / f"{name}.open"
        file = open(opening, "a", encoding="utf-8")  # noqa: SIM115  (kept open until `close`)
        fcntl.flock(file, fcntl.LOCK_EX)
        self._path = opening.rename(directory / f"{name}{SUFFIX}")
        self._file = file
        logger.warning("Usage rows the database cannot take now are kept in %s until it can", self._path)
        return file


def own_directory(directory: Path) -> None:
    """Refuse (PermissionError) a spill directory that is a symlink, not ours, or open to others: under a
    shared temporary directory another local user could make it first, to read the rows or plant some."""
    status = directory.lstat()
    if stat.S_ISLNK(status.st_mode) or not stat.S_ISDIR(status.st_mode):
        raise PermissionError(f"The usage spill directory {directory} is not a directory (a symlink?); not used")
    if status.st_uid != os.geteuid() or status.st_mode & 0o077:
        raise PermissionError(
            f"The usage spill directory {directory} belongs to another user or is open to others "
            f"(mode {stat.S_IMODE(status.st_mode):o}); not used. Set USAGE_SPILL_DIR to a directory of this "
            "server's own (mode 700)."
        )


spill = Spill()


def set_aside(rows: list[dict[str, Any]]) -> int:
    """Spill rows the database cannot take now; return how many. A row is lost (counted, and logged whole)
    only when it is not JSON, or the disk refuses too."""
    if not rows:
        return 0
    try:
        refused = spill.write(rows)
    except OSError as exc:
        lose(rows, exc)
        return 0
    for row, problem in refused:
        lose([row], problem)
    return len(rows) - len(refused)
