"""`mcp_expose.testing`: the pytest plugin, the in-process client, the live server, the assertions, the mixin.

The plugin's switch is proved in projects of its own (pytester, in subprocesses); this suite enables it in
pyproject.toml, so everything else here uses its fixtures as a project's tests would.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import TestCase, override_settings
from mcp import MCPError

import mcp_expose
from mcp_expose import Elicit, InvocationContext
from mcp_expose.calls.invoke import CallAbandoned
from mcp_expose.core.conf import changed_settings
from mcp_expose.core.db import hops_on_callers_thread, in_worker_thread
from mcp_expose.declare.registry import CapabilityRegistry
from mcp_expose.models import ExposedTool, ToolCall
from mcp_expose.testing import (
    HttpRefusal,
    LiveMcpServer,
    McpTestCase,
    McpTestClient,
    assert_cannot_call,
    assert_hidden,
    assert_input_required,
    assert_tool_error,
    assert_tool_result,
    assert_visible,
)
from project.library.models import Author, Book

from .live import HANG_GUARD_SECONDS
from .test_dispatch import _work_until_abandoned

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
ERAS = ["2026-07-28", "2025-11-25"]
READ_TOOLS = ("library.search_books", "library.get_book", "library.books.list")
WRITE_TOOLS = ("library.borrow_book", "library.books.create")


@pytest.fixture
def reader(db: None) -> User:
    return User.objects.create_user("reader", password="pw")


@pytest.fixture
def book(db: None) -> Book:
    author = Author.objects.create(name="Ursula K. Le Guin", born=1929)
    return Book.objects.create(title="A Wizard of Earthsea", author=author, isbn="1", genre="fiction", copies=2)


# The plugin, in projects of its own ----------------------------------------------------------------------------

PROJECT_INI = f"""
[pytest]
DJANGO_SETTINGS_MODULE = tests.settings
pythonpath = {ROOT}
addopts = -p no:cacheprovider
{{extra}}
"""

THREE_LINES = """
from mcp_expose.testing import assert_tool_error, assert_visible


def test_a_reader_sees_the_library(mcp_client, django_user_model):
    reader = django_user_model.objects.create_user("reader")
    result = mcp_client(user=reader, scopes=["library:read"]).call_tool("library.library_stats")
    assert result.structured_content == {"books": 0, "authors": 0, "loans_out": 0}


def test_a_reader_expecting_to_borrow(mcp_client, django_user_model):
    reader = django_user_model.objects.create_user("reader")
    assert_visible(mcp_client(user=reader, scopes=["library:read"]), "library.borrow_book")


def test_a_success_expected_to_fail(mcp_client, django_user_model):
    reader = django_user_model.objects.create_user("reader")
    result = mcp_client(user=reader, scopes=["library:read"]).call_tool("library.library_stats")
    assert_tool_error(result, "not_found")
"""


def test_the_fixtures_exist_only_where_a_project_enables_them(pytester: pytest.Pytester) -> None:
    pytester.makeini(PROJECT_INI.format(extra=""))
    pytester.makepyfile(test_off="def test_uses_it(mcp_client):\n    pass\n")
    off = pytester.runpytest_subprocess()
    off.assert_outcomes(errors=1)
    off.stdout.fnmatch_lines(["*fixture 'mcp_client' not found*"])
    # The command line turns them on for one run (this fixture needs no database).
    pytester.makepyfile(test_off="def test_uses_it(mcp_live_application):\n    assert mcp_live_application is None\n")
    pytester.runpytest_subprocess("--mcp-expose").assert_outcomes(passed=1)


def test_a_project_enabling_the_plugin_calls_a_tool_as_a_user_with_a_scope_in_three_lines(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(PROJECT_INI.format(extra="mcp_expose = true"))
    pytester.makepyfile(test_library=THREE_LINES)
    run = pytester.runpytest_subprocess()
    run.assert_outcomes(passed=1, failed=2)
    run.stdout.fnmatch_lines(
        [
            "*AssertionError: Expected library.borrow_book to be visible; the caller sees library.authors.retrieve, *",
            "*AssertionError: Expected a tool error with code 'not_found'; got the result "
            '{"authors": 0, "books": 0, "loans_out": 0}',
        ]
    )


# The in-process client on pytest-django's plain `db` -----------------------------------------------------------


def test_a_hop_runs_on_the_caller_s_thread_only_while_it_is_asked_to() -> None:
    hop = in_worker_thread(threading.get_ident)

    async def both_ways() -> tuple[int, int]:
        apart = await hop()
        with hops_on_callers_thread():
            together = await hop()
        return apart, together

    apart, together = async_to_sync(both_ways)()
    assert together == threading.get_ident() != apart  # async_to_sync ran the loop in a thread of its own


@pytest.mark.parametrize("era", ERAS)
def test_a_tool_sees_the_test_s_rows_and_its_call_is_logged(
    mcp_client: Any, reader: User, book: Book, era: str
) -> None:
    client = mcp_client(user=reader, scopes=["library:read"], era=era)
    result = client.call_tool("library.get_book", {"book_id": book.pk})
    assert_tool_result(
        result,
        {
            "id": book.pk,
            "title": "A Wizard of Earthsea",
            "author": "Ursula K. Le Guin",
            "isbn": "1",
            "genre": "fiction",
            "published": None,
            "copies": 2,
            "available": 2,
        },
    )
    # An async tool too: Django's async ORM hops to the same thread, and connection.
    assert client.call_tool("library.library_stats").structured_content == {"books": 1, "authors": 1, "loans_out": 0}
    row = ToolCall.objects.get(tool_name="library.get_book")
    assert (row.username, row.outcome, row.auth_method, row.protocol_version) == (reader.username, "ok", "local", era)
    assert row.scopes == "library:read mcp"  # the demo's hierarchy: reading implies the base scope


def test_what_a_tool_writes_stays_in_the_test_s_transaction(mcp_client: Any, reader: User, book: Book) -> None:
    borrowed = mcp_client(user=reader, scopes=["library:write"]).call_tool("library.borrow_book", {"book_id": book.pk})
    assert borrowed.structured_content["book"] == "A Wizard of Earthsea"
    assert book.loans.get().borrower == reader
    assert connection.in_atomic_block  # pytest-django's transaction, which rolls the loan back after the test


def test_a_missing_scope_hides_and_refuses_the_tool(mcp_client: Any, reader: User, book: Book) -> None:
    reading = mcp_client(user=reader, scopes=["library:read"])
    names = reading.tool_names()
    assert_visible(names, *READ_TOOLS)
    assert_hidden(names, *WRITE_TOOLS)
    assert_cannot_call(reading, "library.borrow_book", {"book_id": book.pk})
    assert not book.loans.exists()
    # Writing implies reading (SCOPE_HIERARCHY): the credential's scopes are widened as the edge widens them.
    assert_visible(mcp_client(user=reader, scopes=["library:write"]), *READ_TOOLS, *WRITE_TOOLS)
    # By default the caller holds every scope the catalog uses.
    assert_visible(mcp_client(user=reader), *READ_TOOLS, *WRITE_TOOLS)


def test_permissions_are_read_at_each_connection(mcp_client: Any, reader: User) -> None:
    client = mcp_client(user=reader.username, scopes=["library:read"])
    assert_hidden(client, "library.overdue_loans")
    reader.user_permissions.add(Permission.objects.get(codename="view_loan"))
    assert_visible(client, "library.overdue_loans")
    reader.is_active = False
    reader.save()
    with pytest.raises(HttpRefusal) as refused:
        client.tool_names()
    assert refused.value.status == 401 and "The user 'reader' is inactive." in str(refused.value)


def test_a_row_the_test_changes_is_served_at_once(mcp_client: Any, reader: User, book: Book) -> None:
    client = mcp_client(user=reader, scopes=["library:read"])
    assert_visible(client, "library.get_book")
    row = ExposedTool.objects.get(key="library.get_book")
    row.enabled = False
    row.save()  # the revision moves only when the test's transaction commits, which it never does
    assert_hidden(client, "library.get_book")
    assert_cannot_call(client, "library.get_book", {"book_id": book.pk})
    assert_visible(client, "library.search_books")


def test_allowed_clients_apply_to_an_oauth_client_s_tokens(mcp_client: Any, reader: User) -> None:
    from oauth2_provider.models import get_application_model

    application = get_application_model()
    allowed = application.objects.create(name="Allowed", client_type="public", authorization_grant_type="password")
    other = application.objects.create(name="Other", client_type="public", authorization_grant_type="password")
    ExposedTool.objects.get(key="library.search_books").allowed_clients.add(allowed)
    assert_visible(mcp_client(user=reader, scopes=["library:read"], oauth_client=allowed), "library.search_books")
    stranger = mcp_client(user=reader, scopes=["library:read"], oauth_client=other.client_id)
    assert_hidden(stranger, "library.search_books")
    assert_visible(stranger, "library.get_book")
    assert_cannot_call(stranger, "library.search_books")
    # A local caller is trusted, as on the command line.
    assert_visible(mcp_client(user=reader, scopes=["library:read"]), "library.search_books")
    row = ToolCall.objects.filter(tool_name="library.search_books").latest("created_at")
    assert (row.auth_method, row.client_id, row.outcome) == ("oauth", other.client_id, "unknown_tool")


def test_an_oauth_token_short_of_scopes_gets_the_step_up_challenge(mcp_client: Any, reader: User, book: Book) -> None:
    token = mcp_client(user=reader, scopes=["library:read"], oauth_client="script")
    with pytest.raises(HttpRefusal) as challenge:
        token.call_tool("library.borrow_book", {"book_id": book.pk})
    assert challenge.value.status == 403 and challenge.value.scopes == {"mcp", "library:write"}
    assert_cannot_call(token, "library.borrow_book", {"book_id": book.pk})
    without_base = mcp_client(user=reader, scopes=["other"], oauth_client="script")
    with pytest.raises(HttpRefusal) as base:
        without_base.tool_names()
    assert base.value.status == 403 and base.value.scopes == {"mcp"}
    assert not book.loans.exists()


def test_anonymous_callers_follow_the_settings(mcp_client: Any) -> None:
    anonymous = mcp_client()
    with pytest.raises(HttpRefusal) as refused:
        anonymous.tool_names()
    assert refused.value.status == 401
    with override_settings(
        MCP_EXPOSE={**mcp_expose_settings(), "ALLOW_ANONYMOUS": True, "ANONYMOUS_SCOPES": ["library:read"]}
    ):
        names = anonymous.tool_names()
    assert_visible(names, *READ_TOOLS)
    assert_hidden(names, *WRITE_TOOLS)
    with pytest.raises(ValueError, match="pass a user"):
        McpTestClient(None, ["library:write"])


def test_the_settings_fixture_is_honoured(mcp_client: Any, reader: User, settings: Any) -> None:
    writer = mcp_client(user=reader, scopes=["library:write"])
    assert_visible(writer, "library.get_book")
    settings.MCP_EXPOSE = {**settings.MCP_EXPOSE, "SCOPE_HIERARCHY": {}}
    assert_visible(writer, "library.borrow_book")
    assert_hidden(writer, "library.get_book")  # writing no longer implies reading


def mcp_expose_settings() -> dict[str, Any]:
    from django.conf import settings

    return dict(settings.MCP_EXPOSE)


# Timeouts, on the test's thread --------------------------------------------------------------------------------


def test_a_timed_out_call_on_the_test_s_connection_is_answered_and_rolled_back(
    reader: User, settings: Any, registry: CapabilityRegistry
) -> None:
    abandoned: list[str] = []

    @mcp_expose.tool(registry=registry, key="t.slow_write")
    def slow_write() -> None:
        Author.objects.create(name="timed-out")
        try:
            _work_until_abandoned()  # its next query after the deadline raises
        except CallAbandoned as exc:
            abandoned.append(str(exc))
            raise

    # The default timeout, as the settings say now: the catalog is compiled again when they change.
    settings.MCP_EXPOSE = {**settings.MCP_EXPOSE, "TOOL_TIMEOUT": 0.2}
    result = McpTestClient(reader, registry=registry).call_tool("t.slow_write")
    error = assert_tool_error(result, "timeout", message="nothing it wrote is kept")
    assert error["details"] == {"timeout_seconds": 0.2}
    assert abandoned == ["the caller stopped waiting for this call"]
    assert not Author.objects.filter(name="timed-out").exists()
    assert connection.in_atomic_block  # only the tool's savepoint was rolled back


# Confirmation and questions ------------------------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
def test_confirmation_is_asked_and_answered_as_the_test_says(
    mcp_client: Any, admin_user: User, book: Book, era: str
) -> None:
    withdraw = ("library.withdraw_book", {"book_id": book.pk})
    nobody = mcp_client(user=admin_user, era=era).call_tool(*withdraw)
    assert_tool_error(nobody, "confirmation_required", message="/mcp/approve/")
    declined = mcp_client(user=admin_user, era=era, confirm=False).call_tool(*withdraw)
    # 2026-07-28: declined in the client's form; 2025-11-25: on the approval page, signed in as the user.
    assert_tool_error(declined, "confirmation_declined")
    assert Book.objects.filter(pk=book.pk).exists()
    assert_tool_result(
        mcp_client(user=admin_user, era=era, confirm=True).call_tool(*withdraw), {"withdrawn": book.title}
    )
    assert not Book.objects.filter(pk=book.pk).exists()


def test_a_client_that_shows_forms_gets_the_confirmation_form(mcp_client: Any, admin_user: User, book: Book) -> None:
    result = mcp_client(user=admin_user, forms=True).call_tool("library.withdraw_book", {"book_id": book.pk})
    asked = assert_input_required(result, "confirm")
    assert "Run the tool library.withdraw_book?" in asked.input_requests["confirm"].params.message
    assert Book.objects.filter(pk=book.pk).exists()
    with pytest.raises(AssertionError, match=r"Expected the call to ask \['name'\]; it asked \['confirm'\]"):
        assert_input_required(result, "name")


@pytest.fixture
def asking(registry: CapabilityRegistry) -> CapabilityRegistry:
    question = Elicit("What is your name?", {"type": "object", "properties": {"name": {"type": "string"}}})

    @mcp_expose.tool(registry=registry, key="t.greet")
    async def greet(context: InvocationContext) -> str:
        answers = await context.ask({"name": question})
        return f"Hello, {answers['name'].content['name']}!"

    return registry


@pytest.mark.parametrize("era", ERAS)
def test_a_tool_s_own_questions_get_the_test_s_answers(reader: User, asking: CapabilityRegistry, era: str) -> None:
    seen: list[str] = []

    def answer(message: str, schema: dict[str, Any]) -> dict[str, Any]:
        seen.append(message)
        return {"name": "Ada"}

    client = McpTestClient(reader, era=era, answer=answer, registry=asking)
    assert_tool_result(client.call_tool("t.greet"), {"result": "Hello, Ada!"})
    assert seen == ["What is your name?"]


def test_an_unanswered_question_comes_back_and_a_client_without_forms_cannot_be_asked(
    reader: User, asking: CapabilityRegistry
) -> None:
    asked = McpTestClient(reader, forms=True, registry=asking).call_tool("t.greet")
    assert_input_required(asked, "name")
    with pytest.raises(MCPError) as missing:
        McpTestClient(reader, registry=asking).call_tool("t.greet")
    assert missing.value.code == -32021  # the client declared no forms


# Resources, prompts and the async API ---------------------------------------------------------------------------


def test_resources_and_prompts_through_the_same_policy(mcp_client: Any, reader: User, book: Book) -> None:
    client = mcp_client(user=reader, scopes=["library:read"])
    assert [resource.uri for resource in client.list_resources().resources] == ["library://catalogue"]
    record = client.read_resource(f"library://books/{book.pk}").contents[0]
    assert '"title":"A Wizard of Earthsea"' in record.text
    assert [prompt.name for prompt in client.list_prompts().prompts] == ["library.recommend"]
    prompt = client.get_prompt("library.recommend", {"genre": "fiction"})
    assert "A Wizard of Earthsea" in prompt.messages[1].content.text
    with pytest.raises(MCPError) as hidden:
        mcp_client(user=reader, scopes=["other"]).read_resource(f"library://books/{book.pk}")
    assert hidden.value.code == -32602


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_the_async_api_in_an_async_test() -> None:
    reader = await sync_to_async(User.objects.create_user)("reader")
    author = await Author.objects.acreate(name="Carl Sagan")
    cosmos = await Book.objects.acreate(title="Cosmos", author=author, isbn="2", genre="science")
    client = McpTestClient(reader, ["library:read"])
    assert "library.get_book" in await client.atool_names()
    assert_tool_result(
        await client.acall_tool("library.search_books", {"query": "cosmos"}),
        {"result": [{"id": cosmos.pk, "title": "Cosmos", "author": "Carl Sagan", "genre": "science"}]},
    )
    async with client.connect() as sdk:
        assert sdk.protocol_version == "2026-07-28"
        assert (await sdk.call_tool("library.library_stats", {})).structured_content["books"] == 1


# The assertions' messages --------------------------------------------------------------------------------------


def test_each_assertion_says_what_was_expected_and_what_came_back() -> None:
    ok = types.CallToolResult(content=[types.TextContent(text='{"n":1}')], structured_content={"n": 1})
    error = types.CallToolResult(
        content=[types.TextContent(text="...")],
        structured_content={"error": {"code": "conflict", "message": "Taken.", "details": {"id": 3}}},
        is_error=True,
    )
    with pytest.raises(AssertionError, match=r"^Expected b to be hidden; the caller sees a, b\.$"):
        assert_hidden(["a", "b"], "b")
    with pytest.raises(AssertionError, match=r"^Expected c, d to be visible; the caller sees a, b\.$"):
        assert_visible(["a", "b"], "d", "c")
    with pytest.raises(AssertionError, match=r"""got tool error 'conflict': Taken\. \(details: {"id": 3}\)$"""):
        assert_tool_error(error, "not_found")
    with pytest.raises(AssertionError, match=r"saying 'Gone'; got tool error 'conflict'"):
        assert_tool_error(error, message="Gone")
    with pytest.raises(AssertionError, match=r"""^Expected a tool error; got the result {"n": 1}$"""):
        assert_tool_error(ok)
    with pytest.raises(AssertionError, match=r"""^Expected the result {"n": 2}; got {"n": 1}$"""):
        assert_tool_result(ok, {"n": 2})
    with pytest.raises(AssertionError, match=r"^Expected the result {}; got tool error 'conflict'"):
        assert_tool_result(error, {})
    with pytest.raises(AssertionError, match=r"""^Expected the call to ask the client; got the result {"n": 1}$"""):
        assert_input_required(ok)


def test_a_tool_that_can_be_called_fails_assert_cannot_call(mcp_client: Any, reader: User) -> None:
    with pytest.raises(AssertionError, match=r"Expected 'library.library_stats' to be refused; it was called"):
        assert_cannot_call(mcp_client(user=reader, scopes=["library:read"]), "library.library_stats")


# The unittest mixin, in Django's TestCase ----------------------------------------------------------------------


class McpTestCaseInDjangosTestCase(McpTestCase, TestCase):
    @classmethod
    def setUpTestData(cls) -> None:
        cls.reader = User.objects.create_user("reader")
        author = Author.objects.create(name="Mary Beard")
        cls.spqr = Book.objects.create(title="SPQR", author=author, isbn="3", genre="history")

    def test_a_reader_reads_and_cannot_borrow(self) -> None:
        client = self.mcp_client(self.reader, ["library:read"])
        self.assertToolVisible(client, "library.get_book")
        self.assertToolHidden(client, "library.borrow_book")
        self.assertCannotCall(client, "library.borrow_book", {"book_id": self.spqr.pk})
        self.assertToolResult(client.call_tool("library.library_stats"), {"books": 1, "authors": 1, "loans_out": 0})
        self.assertToolError(client.call_tool("library.get_book", {"book_id": 999}), "not_found")

    def test_confirmation_in_the_client(self) -> None:
        admin = User.objects.create_superuser("boss", "boss@example.com", "pw")
        asked = self.mcp_client(admin, forms=True).call_tool("library.withdraw_book", {"book_id": self.spqr.pk})
        self.assertInputRequired(asked, "confirm")
        with self.assertRaises(AssertionError):
            self.assertToolHidden(self.mcp_client(admin), "library.withdraw_book")


# The live server, over HTTP ------------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("era", ERAS)
async def test_the_live_server_serves_the_sdk_client_with_a_key(mcp_live: Any, era: str) -> None:
    reader = await sync_to_async(User.objects.create_user)("reader")
    author = await Author.objects.acreate(name="Terry Pratchett")
    small_gods = await Book.objects.acreate(title="Small Gods", author=author, isbn="4", genre="fiction")
    assert mcp_live.url.startswith("http://127.0.0.1:") and mcp_live.url.endswith("/mcp")
    async with mcp_live.connect(reader, ["library:read"], era=era) as client:
        assert client.protocol_version == era
        names = [tool.name for tool in (await client.list_tools()).tools]
        got = await client.call_tool("library.get_book", {"book_id": small_gods.pk})
        with pytest.raises(MCPError) as refused:
            await client.call_tool("library.borrow_book", {"book_id": small_gods.pk})
    assert_visible(names, *READ_TOOLS)
    assert_hidden(names, *WRITE_TOOLS)
    assert got.structured_content["title"] == "Small Gods"
    assert refused.value.code == -32602
    # The usage row is written before the answer (batching is off for the live server).
    row = await ToolCall.objects.aget(tool_name="library.get_book")
    assert (row.auth_method, row.username, row.outcome) == ("api_key", "reader", "ok")


@pytest.mark.anyio
async def test_stopping_the_live_server_ends_an_open_listen_stream_gracefully(mcp_live: Any) -> None:
    """uvicorn stops only once every response has ended: the live server's stop ends each listen stream first, with
    its result (a graceful close; an abrupt one raises `SubscriptionLost`), so the stop returns."""
    import anyio

    reader = await sync_to_async(User.objects.create_user)("reader")
    async with mcp_live.connect(reader, ["library:read"]) as client:
        async with client.listen(tools_list_changed=True) as subscription:
            with anyio.fail_after(HANG_GUARD_SECONDS):
                await anyio.to_thread.run_sync(mcp_live.stop)
                events = [type(event).__name__ async for event in subscription]
    assert events == []
    assert mcp_live.port is not None and mcp_live._thread is None


@pytest.mark.django_db(transaction=True)
def test_the_live_server_leaves_the_test_process_s_collector_alone(settings: Any) -> None:
    """FREEZE_GC is for a server's own process: in the test run's, it would keep every earlier test's objects."""
    import gc

    settings.MCP_EXPOSE = changed_settings(settings.MCP_EXPOSE, FREEZE_GC=True)
    frozen_before = gc.get_freeze_count()
    with LiveMcpServer() as live:
        assert live.port is not None
        assert gc.get_freeze_count() == frozen_before


def test_a_live_server_that_cannot_start_says_so_and_undoes_its_settings() -> None:
    from django.conf import settings

    async def refuses_to_start(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "lifespan.startup.failed", "message": "no database"})

    allowed = list(settings.ALLOWED_HOSTS)
    with pytest.raises(RuntimeError, match="The live MCP server did not start"):
        LiveMcpServer(refuses_to_start, host="localhost").start()
    assert settings.ALLOWED_HOSTS == allowed
