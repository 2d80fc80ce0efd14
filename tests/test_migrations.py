"""Migrations that change the database in ways the model state does not show: here, 0008 dropping Django's
single-column index on the usage log's tool name, by name, on SQLite and on PostgreSQL, both ways.

On PostgreSQL, `manage.py migrate` runs as a real process against a database of its own: the command and the
migration graph as a deployment runs them are the subject."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from mcp_expose.models import ExposedTool, ToolCall

from .live import manage

BEFORE = "0007_toolcall_input_required"
DROPPED = "0008_toolcall_tool_name_index_is_the_composite"
TABLE = ToolCall._meta.db_table
DJANGO_INDEX = "mcp_expose_toolcall_tool_name_527703f6"  # what Django named it in 0003, on every backend
PROJECT_INDEX = "project_tool_name_search"


def latest_migrations() -> list[tuple[str, str]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes("mcp_expose")


def _check_both_ways(
    indexes: Callable[[], set[str]],
    migrate: Callable[[str], None],
    execute: Callable[[str], None],
    django_indexes: set[str],
) -> None:
    """Down restores Django's indexes, up drops exactly them; an index already gone, already back, or a
    project's own on the same column changes nothing."""
    composite = indexes() - django_indexes
    assert not django_indexes & indexes()
    migrate(BEFORE)
    assert indexes() == composite | django_indexes
    execute(f"CREATE INDEX {PROJECT_INDEX} ON {TABLE} (tool_name)")
    execute(f"DROP INDEX {DJANGO_INDEX}")  # gone before the migration runs
    migrate(DROPPED)
    assert indexes() == composite | {PROJECT_INDEX}
    execute(f"CREATE INDEX {DJANGO_INDEX} ON {TABLE} (tool_name)")  # back before the migration is reversed
    migrate(BEFORE)
    assert indexes() == composite | django_indexes | {PROJECT_INDEX}
    execute(f"DROP INDEX {PROJECT_INDEX}")
    migrate(DROPPED)
    assert indexes() == composite


@pytest.mark.django_db(transaction=True)
def test_sqlite_drops_and_restores_only_djangos_tool_name_index() -> None:
    ToolCall.objects.create(tool_name="library.echo", auth_method="api_key", outcome="ok", duration_ms=1.0)

    def indexes() -> set[str]:
        with connection.cursor() as cursor:
            constraints = connection.introspection.get_constraints(cursor, TABLE)
        return {name for name, details in constraints.items() if details["index"] and "tool_name" in details["columns"]}

    def migrate(name: str) -> None:
        MigrationExecutor(connection).migrate([("mcp_expose", name)])

    def execute(sql: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(sql)

    try:
        _check_both_ways(indexes, migrate, execute, {DJANGO_INDEX})
    finally:
        MigrationExecutor(connection).migrate(latest_migrations())  # as the other tests expect the schema
    assert ToolCall.objects.filter(tool_name="library.echo").count() == 1  # no row lost on the way


@pytest.mark.django_db(transaction=True)
def test_migrating_back_syncs_no_rows_into_an_older_schema() -> None:
    """After `migrate` the rows follow the declarations, but only once the app is fully migrated: an older
    schema lacks columns the model reads."""
    ExposedTool.objects.filter(key="library.echo").delete()  # a row to create, as for a new declaration
    try:
        call_command("migrate", "mcp_expose", DROPPED, verbosity=0)
        assert not ExposedTool.objects.filter(key="library.echo").exists()
    finally:
        call_command("migrate", "mcp_expose", verbosity=0)
    assert ExposedTool.objects.filter(key="library.echo").exists()


@pytest.mark.scale
def test_postgresql_drops_and_restores_the_index_and_its_like_twin(tmp_path: Path) -> None:
    import psycopg

    name = f"mcp_migrations_{secrets.token_hex(4)}"
    env = {"DJANGO_SETTINGS_MODULE": "tests.settings_scale", "MCP_SCALE_DB": name}
    admin = psycopg.connect(host="127.0.0.1", user="mcp", password="mcp", dbname="postgres", autocommit=True)
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        manage(tmp_path, "migrate", "--noinput", env=env)
        with psycopg.connect(host="127.0.0.1", user="mcp", password="mcp", dbname=name, autocommit=True) as database:

            def indexes() -> set[str]:
                rows = database.execute(
                    "SELECT indexname FROM pg_indexes WHERE tablename = %s AND indexdef LIKE %s", (TABLE, "%tool_name%")
                ).fetchall()
                return {row[0] for row in rows}

            _check_both_ways(
                indexes,
                lambda target: manage(tmp_path, "migrate", "mcp_expose", target, env=env),
                lambda sql: database.execute(sql),
                {DJANGO_INDEX, f"{DJANGO_INDEX}_like"},
            )
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()
