"""Migrations that change the database in ways the model state does not show."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from mcp_expose.models import ToolCall

BEFORE = ("mcp_expose", "0007_toolcall_input_required")
DROPPED = ("mcp_expose", "0008_toolcall_tool_name_index_is_the_composite")


def _indexes_leading_with_tool_name() -> list[tuple[str, ...]]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, ToolCall._meta.db_table)
    return sorted(tuple(details["columns"]) for details in constraints.values()
                  if details["index"] and details["columns"][:1] == ["tool_name"])


def _migrate(target: tuple[str, str]) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate([target])


@pytest.mark.django_db(transaction=True)
def test_usage_rows_keep_one_index_leading_with_the_tool_name_both_ways() -> None:
    ToolCall.objects.create(tool_name="library.echo", auth_method="api_key", outcome="ok", duration_ms=1.0)
    assert _indexes_leading_with_tool_name() == [("tool_name", "created_at")]
    _migrate(BEFORE)
    assert _indexes_leading_with_tool_name() == [("tool_name",), ("tool_name", "created_at")]
    _migrate(DROPPED)
    assert _indexes_leading_with_tool_name() == [("tool_name", "created_at")]
    assert ToolCall.objects.filter(tool_name="library.echo").count() == 1
