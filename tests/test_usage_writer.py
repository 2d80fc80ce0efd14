"""The batching usage writer: rows arrive within the interval, all of them at stop, none lost to a bad one,
none to an outage (kept in memory, then on disk), none written twice.

The outages are real: another connection holds SQLite's write lock (`write_lock`, in conftest).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.utils import timezone

from mcp_expose.calls import usage, usage_spill, usage_writer
from mcp_expose.calls.usage import CallRecord
from mcp_expose.core.conf import changed_settings
from mcp_expose.core.principal import Principal
from mcp_expose.models import ToolCall

# The writer thread has its own connection; spilled rows go to the test's own directory.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("spill_dir")]
HANG_GUARD = 60.0  # every wait below ends on its event; this only stops a hang


def record(name: str, **values: Any) -> CallRecord:
    principal = Principal(user=AnonymousUser(), scopes=frozenset({"mcp"}), method="local")
    return CallRecord(tool_name=name, principal=principal, outcome="ok", **values)


def names() -> list[str]:
    return sorted(ToolCall.objects.values_list("tool_name", flat=True))


def row_ids() -> list[uuid.UUID]:
    return list(ToolCall.objects.values_list("row_id", flat=True))


def wait_for(condition: Callable[[], Any], what: str) -> None:
    deadline = time.monotonic() + HANG_GUARD
    while not condition():
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.02)


def spilled_lines(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted(directory.glob("*.jsonl")) for line in path.read_text().splitlines()]


def test_rows_arrive_within_the_interval_and_keep_the_time_of_the_call() -> None:
    writer = usage_writer.UsageWriter(0.05)
    writer.start()
    try:
        called_at = timezone.now() - timedelta(minutes=5)
        assert writer.add(record("t.one", created_at=called_at)) and writer.add(record("t.two"))
        deadline = time.monotonic() + 5
        while len(names()) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert names() == ["t.one", "t.two"]
        assert ToolCall.objects.get(tool_name="t.one").created_at == called_at
    finally:
        writer.stop()


def test_stop_writes_everything_queued_and_then_refuses_more() -> None:
    writer = usage_writer.UsageWriter(60)  # nothing would be written for a minute, but for stop
    writer.start()
    for index in range(450):  # more than two inserts' worth
        writer.add(record(f"t.{index:03}"))
    writer.stop()
    assert len(names()) == 450
    assert not writer.add(record("t.late"))  # the caller writes this one itself
    assert "t.late" not in names()


def test_a_row_that_cannot_be_written_costs_no_other(caplog: pytest.LogCaptureFixture) -> None:
    gone = User.objects.create(username="gone")
    departed = Principal(user=gone, scopes=frozenset({"mcp"}), method="api_key")
    # The row's user no longer exists: the database refuses the batch, then that row alone.
    User.objects.filter(pk=gone.pk).delete()
    writer = usage_writer.UsageWriter(60)
    writer.start()
    writer.add(record("t.before"))
    writer.add(
        CallRecord(
            tool_name="t.departed",
            principal=departed,
            outcome="ok",
            conversation_id="conv-7",
            argument_keys=["q"],
            argument_values={"q": "needle", "token": usage.REDACTED},
        )
    )
    writer.add(record("t.unencodable", argument_values={"value": object()}))  # not JSON: refused before SQL
    writer.add(record("t.after"))
    writer.stop()
    assert names() == ["t.after", "t.before"]
    [departed_line] = [line for line in caplog.messages if line.startswith("Lost the usage row for t.departed")]
    assert "IntegrityError" in departed_line and "conversation 'conv-7'" in departed_line
    assert "'q': 'needle'" in departed_line and "caller gone (API key" in departed_line
    assert "Lost the usage row for t.unencodable" in caplog.text
    assert usage_writer.status().lost >= 2


def test_the_process_writer_queues_only_while_running() -> None:
    assert usage_writer.start(0) is None and not usage_writer.queue_or_none(record("t.off"))
    running = usage_writer.start(0.05)
    try:
        assert running is not None and usage_writer.queue_or_none(record("t.on"))
    finally:
        usage_writer.stop()
    assert names() == ["t.on"]
    assert not usage_writer.queue_or_none(record("t.after-stop"))


def test_a_batched_row_has_every_column_a_saved_row_has() -> None:
    """The batch inserts column values without model instances: a column added to `ToolCall` and not to
    `row_values` would send every batch down the slow row-by-row path, or lose the column."""
    user = User.objects.create_user("batcher")
    principal = Principal(user=user, scopes=frozenset({"mcp", "tools"}), method="api_key", api_key_prefix="mcpx_ab")
    called = CallRecord(
        tool_name="t.full",
        principal=principal,
        outcome="ok",
        tool_key="t.full",
        duration_ms=1.5,
        argument_bytes=7,
        result_bytes=9,
        depth=2,
        conversation_id="c-1",
        protocol_version="2026-07-28",
        argument_keys=["message"],
        argument_values={"message": "hi", "nested": [1, None]},
    )
    columns = {field.attname for field in ToolCall._meta.concrete_fields if field is not ToolCall._meta.auto_field}
    assert set(usage.row_values(called)) == columns
    usage.insert_rows([usage.row_values(called)])
    batched = ToolCall.objects.get(tool_name="t.full")
    ToolCall(**usage.row_values(dataclasses.replace(called, row_id=uuid.uuid4()))).save(force_insert=True)
    saved = ToolCall.objects.exclude(pk=batched.pk).get(tool_name="t.full")
    columns.remove("row_id")
    assert {name: getattr(batched, name) for name in columns} == {name: getattr(saved, name) for name in columns}
    assert batched.row_id == called.row_id
    assert (batched.user_id, batched.username, batched.scopes) == (user.pk, "batcher", "mcp tools")
    assert (batched.argument_keys, batched.argument_values) == (["message"], {"message": "hi", "nested": [1, None]})


def test_prepared_values_are_what_a_save_prepares_value_for_value_and_type() -> None:
    """Values passed as they are must be exactly what `get_db_prep_save` would give the database driver."""
    from django.db import connection

    user = User.objects.create_user("preparer")
    principal = Principal(user=user, scopes=frozenset({"mcp"}), method="api_key", api_key_prefix="mcpx_cd")
    called = CallRecord(
        tool_name="t.prep",
        principal=principal,
        outcome="ok",
        duration_ms=2.25,
        argument_bytes=3,
        result_bytes=4,
        argument_keys=["a"],
        argument_values={"a": 1.5},
        protocol_version="2026-07-28",
    )
    fields = [field for field in ToolCall._meta.concrete_fields if field is not ToolCall._meta.auto_field]
    row = usage.row_values(called)
    [prepared] = usage.prepared_values([row], fields, connection)
    expected = [field.get_db_prep_save(row[field.attname], connection) for field in fields]
    assert [(type(value), value) for value in prepared] == [(type(value), value) for value in expected]


def test_rows_queued_while_the_database_is_locked_are_all_written_once_it_is_released(
    write_lock: sqlite3.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    writer = usage_writer.UsageWriter(0.05)
    queued = [record(f"t.{index}") for index in range(5)]
    with caplog.at_level(logging.INFO, logger="mcp_expose.usage"):
        writer.start()
        try:
            assert all(writer.add(row) for row in queued)
            wait_for(lambda: writer.status().failing, "writing to fail")
            failing = writer.status()
            assert failing.buffered == 5 and failing.spilled == 0 and failing.failing_since is not None
            write_lock.execute("ROLLBACK")
            wait_for(lambda: len(row_ids()) == 5, "the rows")
            wait_for(lambda: not writer.status().failing, "the outage to end")
        finally:
            writer.stop()
    assert sorted(row_ids()) == sorted(row.row_id for row in queued)
    assert writer.status().buffered == 0
    messages = [line for line in caplog.messages if "usage rows" in line.lower()]
    assert messages[0].startswith("Usage rows cannot be written: the database is unavailable (OperationalError")
    assert sum(line.startswith("Usage rows cannot be written") for line in messages) == 1
    assert sum(line.startswith("Usage rows are written again") for line in messages) == 1
    assert not any(entry.exc_info for entry in caplog.records)  # no traceback for an outage
    assert not any("Lost" in line for line in caplog.messages)


def test_the_same_rows_written_twice_are_one_row_each() -> None:
    rows = [usage.row_values(record(f"t.{index}")) for index in range(3)]
    usage.insert_rows(rows)
    usage.insert_rows(rows)  # a retry after a commit whose answer was lost
    assert usage.write_rows(rows[:1]) == 0
    assert names() == ["t.0", "t.1", "t.2"]


def test_the_insert_skips_only_a_row_id_already_written() -> None:
    """SQLite's INSERT OR IGNORE (Django's OnConflict.IGNORE there) would drop a row breaking a CHECK silently."""
    from django.db import connection
    from django.db.backends.postgresql.base import DatabaseWrapper

    _, sql = usage.insert_statement(connection)
    assert sql.startswith('INSERT INTO "mcp_expose_toolcall"') and sql.endswith(' ON CONFLICT ("row_id") DO NOTHING')
    postgresql = DatabaseWrapper({**connection.settings_dict, "ENGINE": "django.db.backends.postgresql"})
    _, sql = usage.insert_statement(postgresql)
    assert sql.startswith('INSERT INTO "mcp_expose_toolcall"') and sql.endswith(' ON CONFLICT ("row_id") DO NOTHING')
    negative = usage.row_values(record("t.negative", argument_bytes=-1))  # PositiveIntegerField: a CHECK
    assert usage.write_rows([negative]) == 1 and names() == []


def test_past_the_buffer_the_oldest_rows_are_spilled_and_written_when_the_database_is_back(
    write_lock: sqlite3.Connection, spill_dir: Path, settings: Any
) -> None:
    settings.MCP_EXPOSE = changed_settings(settings.MCP_EXPOSE, USAGE_BUFFER_ROWS=3)
    writer = usage_writer.UsageWriter(0.05)
    queued = [record(f"t.{index}") for index in range(5)]
    writer.start()
    try:
        assert all(writer.add(row) for row in queued)  # none is handed back to the call
        wait_for(lambda: writer.status().spilled == 2, "two rows spilled")
        assert [line["tool_name"] for line in spilled_lines(spill_dir)] == ["t.0", "t.1"]
        assert [line["row_id"] for line in spilled_lines(spill_dir)] == [str(row.row_id) for row in queued[:2]]
        assert writer.status().buffered == 3
        write_lock.execute("ROLLBACK")
        wait_for(lambda: len(row_ids()) == 5 and writer.status().spilled == 0, "every row")
    finally:
        writer.stop()
    assert sorted(row_ids()) == sorted(row.row_id for row in queued)
    assert not list(spill_dir.glob("*.jsonl"))  # deleted once written


def test_stop_during_an_outage_spills_and_the_next_start_writes_each_row_once(
    write_lock: sqlite3.Connection, spill_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = usage_writer.UsageWriter(0.05)
    queued = [record(f"t.{index}") for index in range(4)]
    first.start()
    for row in queued:
        first.add(row)
    wait_for(lambda: first.status().failing, "writing to fail")
    first.stop()
    assert "Stopped while the database is unavailable: 4 usage rows are kept in" in caplog.text
    assert [line["row_id"] for line in spilled_lines(spill_dir)] == [str(row.row_id) for row in queued]
    [kept] = spill_dir.glob("*.jsonl")
    shutil.copy(kept, spill_dir / "copy.jsonl")  # as if a replay had crashed between its commit and the delete
    write_lock.execute("ROLLBACK")
    assert names() == []

    second = usage_writer.UsageWriter(60)  # nothing queued to write: only what the last run spilled
    second.start()
    try:
        wait_for(lambda: not list(spill_dir.glob("*.jsonl")), "the spill files to be written")
    finally:
        second.stop()
    assert sorted(row_ids()) == sorted(row.row_id for row in queued)


def test_two_writers_starting_together_replay_a_file_once(spill_dir: Path) -> None:
    rows = [usage.row_values(record(f"t.{index}")) for index in range(3)]
    assert usage_spill.spill.write(rows) == []
    usage_spill.spill.close()
    holding, done = threading.Event(), threading.Event()
    read: dict[str, list[str]] = {"first": [], "second": []}

    def writing(name: str) -> Callable[[list[dict[str, Any]]], int]:
        def write_rows(chunk: list[dict[str, Any]]) -> int:
            read[name].extend(row["tool_name"] for row in chunk)
            holding.set()
            assert done.wait(HANG_GUARD)  # the other replay runs while this one holds the file
            return usage.write_rows(chunk)

        return write_rows

    first = threading.Thread(target=usage_spill.Spill().replay, args=(writing("first"), 200))
    first.start()
    assert holding.wait(HANG_GUARD)
    assert usage_spill.Spill().replay(writing("second"), 200) == 0
    done.set()
    first.join(HANG_GUARD)
    assert read == {"first": ["t.0", "t.1", "t.2"], "second": []}
    assert names() == ["t.0", "t.1", "t.2"] and not list(spill_dir.glob("*.jsonl"))


def test_the_direct_write_spills_in_an_outage_and_loses_a_row_only_when_the_disk_fails_too(
    write_lock: sqlite3.Connection, spill_dir: Path, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    kept = record("t.kept", conversation_id="conv-1")
    assert not usage.write(kept)
    assert [line["row_id"] for line in spilled_lines(spill_dir)] == [str(kept.row_id)]
    assert "Lost" not in caplog.text

    blocked = spill_dir.parent / "not-a-directory"
    blocked.write_text("")
    settings.MCP_EXPOSE = {**settings.MCP_EXPOSE, "USAGE_SPILL_DIR": str(blocked / "spill")}
    usage_spill.spill.close()  # the next spill opens a file in the new directory, which cannot be made
    lost_before = usage.rows_lost()
    gone = record("t.gone", conversation_id="conv-2", argument_keys=["q"], argument_values={"q": "kept-in-the-log"})
    assert not usage.write(gone)
    assert usage.rows_lost() == lost_before + 1
    [line] = [line for line in caplog.messages if line.startswith("Lost the usage row for t.gone")]
    assert "conversation 'conv-2'" in line and "'q': 'kept-in-the-log'" in line and "outcome ok" in line
    assert str(gone.row_id) in line and gone.created_at.isoformat() in line and "caller anonymous (local)" in line


def test_a_spill_directory_open_to_others_is_neither_written_nor_replayed(
    spill_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Under a shared temporary directory another user could make it first, to read rows or plant some."""
    spill_dir.mkdir(mode=0o755)
    spill_dir.chmod(0o777)
    planted = usage.row_values(record("t.planted"))
    (spill_dir / "planted.jsonl").write_text(usage_spill.encode(planted) + "\n")
    with pytest.raises(PermissionError, match="open to others"):
        usage_spill.spill.replay(usage.write_rows, 10)
    assert not ToolCall.objects.filter(tool_name="t.planted").exists()
    with caplog.at_level(logging.ERROR, logger="mcp_expose.usage"):
        assert usage_spill.set_aside([usage.row_values(record("t.kept"))]) == 0  # lost, and logged whole
    assert "t.kept" in caplog.text and not list(spill_dir.glob("*.open"))
