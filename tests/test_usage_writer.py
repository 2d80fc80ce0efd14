"""The batching usage writer: rows arrive within the interval, all of them at stop, none lost to a bad one."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.utils import timezone

from mcp_expose import usage, usage_writer
from mcp_expose.models import ToolCall
from mcp_expose.principal import Principal
from mcp_expose.usage import CallRecord

pytestmark = pytest.mark.django_db(transaction=True)  # the writer thread has its own connection


def record(name: str, **values: Any) -> CallRecord:
    principal = Principal(user=AnonymousUser(), scopes=frozenset({"mcp"}), method="local")
    return CallRecord(tool_name=name, principal=principal, outcome="ok", **values)


def names() -> list[str]:
    return sorted(ToolCall.objects.values_list("tool_name", flat=True))


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
    User.objects.filter(pk=gone.pk).delete()  # the row's user no longer exists: the database refuses the batch, then that row alone
    writer = usage_writer.UsageWriter(60)
    writer.start()
    writer.add(record("t.before"))
    writer.add(CallRecord(tool_name="t.departed", principal=departed, outcome="ok"))
    writer.add(record("t.unencodable", argument_values={"value": object()}))  # not JSON: refused before SQL
    writer.add(record("t.after"))
    writer.stop()
    assert names() == ["t.after", "t.before"]
    assert "Could not write the usage row for t.departed" in caplog.text and "IntegrityError" in caplog.text
    assert "Could not write the usage row for t.unencodable" in caplog.text


def test_the_process_writer_queues_only_while_running() -> None:
    assert usage_writer.start(0) is None and not usage_writer.queue_or_none(record("t.off"))
    running = usage_writer.start(0.05)
    try:
        assert running is not None and usage_writer.queue_or_none(record("t.on"))
    finally:
        usage_writer.stop()
    assert names() == ["t.on"]
    assert not usage_writer.queue_or_none(record("t.after-stop"))


def test_a_full_queue_hands_the_row_back_to_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(usage_writer, "MAX_PENDING", 3)
    writer = usage_writer.UsageWriter(60)
    writer.start()
    try:
        assert all(writer.add(record(f"t.{index}")) for index in range(3))
        assert not writer.add(record("t.overflow"))  # the caller writes it itself, now
    finally:
        writer.stop()
    assert names() == ["t.0", "t.1", "t.2"]


def test_a_batched_row_has_every_column_a_saved_row_has() -> None:
    """The batch inserts column values without model instances: a column added to `ToolCall` and not to
    `row_values` would send every batch down the slow row-by-row path, or lose the column."""
    user = User.objects.create_user("batcher")
    principal = Principal(user=user, scopes=frozenset({"mcp", "tools"}), method="api_key", api_key_prefix="mcpx_ab")
    called = CallRecord(tool_name="t.full", principal=principal, outcome="ok", tool_key="t.full", duration_ms=1.5,
                        argument_bytes=7, result_bytes=9, depth=2, conversation_id="c-1", protocol_version="2026-07-28",
                        argument_keys=["message"], argument_values={"message": "hi", "nested": [1, None]})
    columns = {field.attname for field in ToolCall._meta.concrete_fields if field is not ToolCall._meta.auto_field}
    assert set(usage.row_values(called)) == columns
    usage_writer.insert_rows([usage.row_values(called)])
    batched = ToolCall.objects.get(tool_name="t.full")
    assert usage.write(called)
    saved = ToolCall.objects.exclude(pk=batched.pk).get(tool_name="t.full")
    assert {name: getattr(batched, name) for name in columns} == {name: getattr(saved, name) for name in columns}
    assert (batched.user_id, batched.username, batched.scopes) == (user.pk, "batcher", "mcp tools")
    assert (batched.argument_keys, batched.argument_values) == (["message"], {"message": "hi", "nested": [1, None]})


def test_prepared_values_are_what_a_save_prepares_value_for_value_and_type() -> None:
    """Values passed as they are must be exactly what `get_db_prep_save` would give the database driver."""
    from django.db import connection

    user = User.objects.create_user("preparer")
    principal = Principal(user=user, scopes=frozenset({"mcp"}), method="api_key", api_key_prefix="mcpx_cd")
    called = CallRecord(tool_name="t.prep", principal=principal, outcome="ok", duration_ms=2.25, argument_bytes=3,
                        result_bytes=4, argument_keys=["a"], argument_values={"a": 1.5}, protocol_version="2026-07-28")
    fields = [field for field in ToolCall._meta.concrete_fields if field is not ToolCall._meta.auto_field]
    row = usage.row_values(called)
    [prepared] = usage_writer.prepared_values([row], fields, connection)
    expected = [field.get_db_prep_save(row[field.attname], connection) for field in fields]
    assert [(type(value), value) for value in prepared] == [(type(value), value) for value in expected]
