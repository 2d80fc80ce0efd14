"""A database that cannot serve a call right now is `unavailable` (retryable), logged once per outage.

SQLite for real: another connection holds the write lock (`BEGIN IMMEDIATE`) past the busy timeout. PostgreSQL
for real too: a connection to a port nothing listens on.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

import pytest
from django.db import OperationalError, connection, connections

import mcp_expose
from mcp_expose.calls.dispatch import call_tool
from mcp_expose.catalog.compiled import Catalog, compile_catalog
from mcp_expose.core.conf import changed_settings
from mcp_expose.core.outage import database_unavailable
from mcp_expose.core.principal import Principal
from mcp_expose.declare.registry import CapabilityRegistry

from .live import free_port

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("spill_dir")]


@pytest.fixture
def catalog(registry: CapabilityRegistry) -> Catalog:
    from project.library.models import Author

    @mcp_expose.tool(registry=registry, key="t.add_author")
    def add_author(name: str) -> int:
        return Author.objects.create(name=name).pk

    return compile_catalog(registry, {}, "r")


def principal() -> Principal:
    return Principal(user=None, method="local")


async def test_a_locked_database_is_unavailable_logged_once_and_writes_nothing(
    catalog: Catalog, write_lock: sqlite3.Connection, caplog: pytest.LogCaptureFixture, settings: Any
) -> None:
    from project.library.models import Author

    settings.MCP_EXPOSE = changed_settings(getattr(settings, "MCP_EXPOSE", {}), UNAVAILABLE_RETRY_AFTER=7)
    with caplog.at_level(logging.INFO, logger="mcp_expose"):
        outcomes = [await call_tool(catalog, principal(), "t.add_author", {"name": f"locked-{n}"}) for n in range(3)]
    for outcome in outcomes:
        assert outcome.failure is not None and outcome.failure.as_dict() == {
            "code": "unavailable",
            "details": {"retry_after": 7},
            "message": "The database is busy or unreachable; retry after 7 s.",
        }
    warnings = [
        record
        for record in caplog.records
        if record.levelno >= logging.WARNING and record.name == "mcp_expose.dispatch"
    ]
    assert len(warnings) == 1 and "database is locked" in warnings[0].getMessage()
    assert not any(record.exc_info for record in caplog.records)  # no traceback, per call or otherwise

    write_lock.execute("ROLLBACK")
    after = await call_tool(catalog, principal(), "t.add_author", {"name": "unlocked"})
    assert after.ok
    names = [
        name
        async for name in Author.objects.filter(name__in=["locked-0", "locked-1", "locked-2", "unlocked"]).values_list(
            "name", flat=True
        )
    ]
    assert names == ["unlocked"]  # nothing of the refused calls was written


async def test_a_new_outage_after_a_success_is_logged_again(
    catalog: Catalog, short_busy_timeout: None, caplog: pytest.LogCaptureFixture
) -> None:
    path = connection.settings_dict["NAME"]
    with caplog.at_level(logging.WARNING, logger="mcp_expose.dispatch"):
        for round_ in range(2):
            holder = sqlite3.connect(path, isolation_level=None)
            holder.execute("BEGIN IMMEDIATE")
            try:
                for n in range(2):
                    refused = await call_tool(catalog, principal(), "t.add_author", {"name": f"r{round_}-{n}"})
                    assert refused.failure is not None and refused.failure.code == "unavailable"
            finally:
                holder.execute("ROLLBACK")
                holder.close()
            assert (await call_tool(catalog, principal(), "t.add_author", {"name": f"ok-{round_}"})).ok
    assert sum("The database is unavailable" in record.getMessage() for record in caplog.records) == 2


def test_postgresql_refusing_connections_is_unavailable_and_sql_errors_are_not() -> None:
    from django.db.backends.postgresql.base import DatabaseWrapper

    nowhere = {
        **connections.settings["default"],
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "absent",
        "HOST": "127.0.0.1",
        "PORT": free_port(),
        "USER": "nobody",
        "PASSWORD": "",
        "OPTIONS": {},
    }
    with pytest.raises(OperationalError) as refused:
        DatabaseWrapper(nowhere).ensure_connection()
    assert database_unavailable(refused.value), str(refused.value)

    with pytest.raises(OperationalError) as wrong_sql, connection.cursor() as cursor:
        cursor.execute("SELECT * FROM no_such_table")
    assert not database_unavailable(wrong_sql.value)


def test_an_error_raised_while_the_database_was_failing_counts_as_the_outage() -> None:
    from django.db.transaction import TransactionManagementError

    def failing_inside_atomic() -> None:
        try:
            raise OperationalError("consuming input failed: server closed the connection unexpectedly")
        except OperationalError:
            raise TransactionManagementError("An error occurred in the current transaction.") from None

    with pytest.raises(TransactionManagementError) as raised:
        failing_inside_atomic()
    assert raised.value.__context__ is not None and database_unavailable(raised.value)
    try:
        raise ValueError("a bug")
    except ValueError as bug:
        assert not database_unavailable(bug)
        try:
            raise TransactionManagementError("an error of its own") from bug
        except TransactionManagementError as unrelated:
            assert not database_unavailable(unrelated)


async def test_a_sql_error_stays_internal(registry: CapabilityRegistry) -> None:
    @mcp_expose.tool(registry=registry, key="t.bad_sql")
    def bad_sql() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT * FROM no_such_table")

    outcome = await call_tool(compile_catalog(registry, {}, "r"), principal(), "t.bad_sql", {})
    assert outcome.failure is not None and outcome.failure.code == "internal" and outcome.failure.incident


def test_a_statement_cancelled_by_its_timeout_is_unavailable() -> None:
    """PostgreSQL says so by SQLSTATE (57014), in the server's language: the message is not what is matched."""
    from django.db.backends.postgresql.base import DatabaseWrapper

    from .test_scale import _postgres

    _postgres().close()  # a clear failure when the scale tests' PostgreSQL is not running
    timing_out = {
        **connections.settings["default"],
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "postgres",
        "HOST": "127.0.0.1",
        "PORT": "5432",
        "USER": "mcp",
        "PASSWORD": "mcp",
        "OPTIONS": {"options": "-c statement_timeout=1 -c lc_messages=C"},
    }
    wrapper = DatabaseWrapper(timing_out)
    try:
        with pytest.raises(OperationalError) as cancelled, wrapper.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(5)")
        assert getattr(cancelled.value.__cause__, "sqlstate", None) == "57014"
        assert database_unavailable(cancelled.value)
    finally:
        wrapper.close()


@pytest.mark.parametrize(
    "text",
    [
        # Seen when a connection attempt meets PostgreSQL shutting down (psycopg's text, from libpq).
        'connection failed: connection to server at "127.0.0.1", port 5432 failed: Connection reset by peer',
        "could not send data to server: Broken pipe",
    ],
)
def test_a_connection_the_server_drops_while_shutting_down_is_unavailable(text: str) -> None:
    assert database_unavailable(OperationalError(text))
    assert not database_unavailable(OperationalError('relation "no_such_table" does not exist'))
