"""Wire names every client accepts: the portable style (the default), its clashes, its upstream names, and the
dotted style deployments may keep.

Claude Desktop refuses a whole tool list when one name does not match `^[a-zA-Z0-9_-]{1,64}$`; the OpenAI API (and
so Codex and the Agents SDK) refuses names outside `^[a-zA-Z0-9_-]+$`. SEP-986 allows more (`.` and `/`, 128
characters). These tests run in this process: the unit settings keep the dotted names, so each test says the
style it means.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import override_settings
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

import mcp_expose
from mcp_expose.catalog.compiled import CatalogProvider, compile_catalog
from mcp_expose.checks import check_settings, check_wire_names
from mcp_expose.declare.names import (
    MAX_SERVER_NAME_LENGTH,
    SERVER_NAME,
    portable_problem,
    served_name,
    server_name_problem,
    upstream_wire_name,
)
from mcp_expose.declare.registry import CapabilityRegistry
from mcp_expose.testing import McpTestClient

# The patterns tests/test_asking.py also holds the conformance fixtures' names to.
CLAUDE_DESKTOP = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
OPENAI_API = re.compile(r"^[a-zA-Z0-9_-]+$")
SEP_986 = re.compile(r"^[A-Za-z0-9_./-]{1,128}$")
ERAS = ["2026-07-28", "2025-11-25"]


def styled(style: str) -> Any:
    """These settings with `WIRE_NAMES` set to `style`."""
    return override_settings(MCP_EXPOSE={**settings.MCP_EXPOSE, "WIRE_NAMES": style})


def accepted_everywhere(name: str) -> bool:
    return bool(CLAUDE_DESKTOP.match(name) and OPENAI_API.match(name) and SEP_986.match(name))


def declare(registry: CapabilityRegistry, key: str, **options: Any) -> None:
    def tool() -> str:
        """Say hello."""
        return "hello"

    mcp_expose.tool(registry=registry, key=key, **options)(tool)


# The names a client sees -------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("endpoint", ["default", "public"])
def test_every_name_the_demo_serves_is_accepted_by_every_client(era: str, endpoint: str) -> None:
    """Tools, prompts and resources, as a caller holding every scope lists them, on each of the demo's endpoints."""
    User.objects.create_user("reader", password="pw")
    with styled("portable"):
        client = McpTestClient("reader", era=era, endpoint=endpoint)
        names = [tool.name for tool in client.list_tools().tools]
        names += [prompt.name for prompt in client.list_prompts().prompts]
        names += [resource.name for resource in client.list_resources().resources]
    assert names, "the endpoint serves something"
    assert [name for name in names if not accepted_everywhere(name)] == []
    if endpoint == "default":
        assert {"library_echo", "library_books_list", "library_catalogue_page"} <= set(names)


# The mapping ---------------------------------------------------------------------------------------------------


def test_a_name_is_served_with_underscores_for_dots_unless_dotted() -> None:
    assert served_name("library.books.list", "portable") == "library_books_list"
    assert served_name("library.books.list", "dotted") == "library.books.list"
    assert served_name("already-portable_1", "portable") == "already-portable_1"


def test_keys_and_rows_keep_the_stable_identity(registry: CapabilityRegistry) -> None:
    """Only the wire form changes: the key (the exposure row's, the usage log's) is the declaration's."""
    declare(registry, "shop.orders.refund")
    with styled("portable"):
        [entry] = compile_catalog(registry, {}).tools
    assert (entry.key, entry.name) == ("shop.orders.refund", "shop_orders_refund")


def test_two_keys_that_meet_in_the_portable_style_are_a_problem_naming_both(registry: CapabilityRegistry) -> None:
    declare(registry, "a.b_c")
    declare(registry, "a_b.c")
    with styled("portable"):
        catalog = compile_catalog(registry, {})
        [(check_id, message, hint)] = registry.problems()
    assert [entry.key for entry in catalog.tools] == ["a.b_c"]  # the first declared keeps the name
    assert catalog.problems == ("a_b.c: tool name 'a_b_c' (from 'a_b.c') is already used by a.b_c; not served.",)
    assert check_id == "mcp_expose.E003" and "'a_b_c'" in message
    assert "(declared as 'a.b_c' and 'a_b.c'; portable names serve '_' for '.')" in message
    assert hint == "Pass a distinct name= to one of the declarations."
    with styled("dotted"):
        assert registry.problems() == []  # dotted, they are two names
        assert len(compile_catalog(registry, {}).tools) == 2


def test_an_admins_override_is_served_in_the_style_and_checked_against_it(registry: CapabilityRegistry) -> None:
    from mcp_expose.declare.exposure_state import ExposureState

    declare(registry, "shop.refund")
    with styled("portable"):
        [entry] = compile_catalog(
            registry, {"shop.refund": ExposureState(key="shop.refund", wire_name="shop.give_back")}
        ).tools
    assert entry.name == "shop_give_back"  # written before the style existed: served as clients accept it


@pytest.mark.django_db
def test_a_new_override_must_be_portable_with_a_clear_error() -> None:
    from mcp_expose.models import ExposedTool

    row = ExposedTool.objects.get(key="library.echo")
    row.wire_name = "echo.back"
    with styled("portable"), pytest.raises(ValidationError) as refused:
        row.full_clean()
    assert refused.value.message_dict["wire_name"] == [
        "'echo.back' contains '.', which Claude Desktop, Codex and the OpenAI API refuse (they accept letters, "
        "digits, '_' and '-')."
    ]
    with styled("dotted"):
        row.full_clean()  # the names deployments may keep


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("a.b", "'a.b' contains '.', which Claude Desktop, Codex and the OpenAI API refuse"),
        ("a/b", "'a/b' contains '/', which Claude Desktop"),
        ("tëst", "'tëst' contains 'ë', which Claude Desktop"),
        ("x" * 65, "is 65 characters long; Claude Desktop accepts at most 64"),
    ],
)
def test_what_clients_refuse_is_said_precisely(name: str, problem: str) -> None:
    assert problem in (portable_problem(name) or "")


def test_a_portable_name_has_no_problem() -> None:
    assert portable_problem("library_books-list") is None


# Upstream tools -------------------------------------------------------------------------------------------------

SERVERS = st.from_regex(SERVER_NAME, fullmatch=True).filter(lambda name: server_name_problem(name, []) is None)
TOOLS = st.from_regex(r"[A-Za-z0-9_-]{1,40}", fullmatch=True)


@hypothesis_settings(derandomize=True, max_examples=400, deadline=None)
@given(st.tuples(SERVERS, TOOLS), st.tuples(SERVERS, TOOLS))
def test_two_upstream_tools_never_share_a_served_name(first: tuple[str, str], second: tuple[str, str]) -> None:
    """A server name never holds the separator '__' nor ends with '_', so the first '__' of a served name ends
    the server's name: distinct (server, tool) pairs give distinct names."""
    if first != second:
        assert upstream_wire_name(*first, "portable") != upstream_wire_name(*second, "portable")


@hypothesis_settings(derandomize=True, max_examples=400, deadline=None)
@given(SERVERS, TOOLS)
def test_the_server_and_tool_are_read_back_from_the_served_name(server: str, tool: str) -> None:
    served = upstream_wire_name(server, tool, "portable")
    assert served.split("__", 1) == [server, tool]


def test_the_pairs_that_would_meet_are_refused_as_server_names() -> None:
    # 'a_' + '__' + 'b' would read as 'a' + '__' + '_b'; 'a__b' + '__' + 'c' as 'a' + '__' + 'b__c'.
    for name in ("a_", "a__b", "help__desk"):
        problem = server_name_problem(name, [])
        assert problem is not None and "'__'" in problem
    assert server_name_problem("help_desk", []) is None and server_name_problem("help-desk", []) is None
    assert server_name_problem("h" * MAX_SERVER_NAME_LENGTH, []) is None


@pytest.mark.django_db
def test_an_upstream_tool_is_served_by_its_portable_name_and_a_dotted_one_is_refused_naming_it() -> None:
    from mcp_expose.models import ExposedTool, UpstreamServer, UpstreamTool

    server = UpstreamServer.objects.create(name="desk", url="https://desk.example.com/mcp")
    for name in ("lookup_ticket", "tickets.close"):
        definition = {"name": name, "description": "A ticket tool.", "input_schema": {"type": "object"}}
        tool = UpstreamTool.objects.create(
            server=server, name=name, status="approved", approved=definition, approved_digest="a" * 64
        )
        ExposedTool.objects.create(key=tool.key, enabled=True)
    with styled("portable"):
        catalog = CatalogProvider().compile_now()
    assert catalog.get("desk__lookup_ticket") is not None
    assert catalog.get("desk__tickets_close") is None and catalog.get("desk__tickets.close") is None
    [refusal] = [problem for problem in catalog.problems if "tickets.close" in problem]
    assert refusal.startswith("desk.tickets.close: not served, because 'tickets.close' contains '.'")
    assert "WIRE_NAMES" in refusal
    with styled("dotted"):
        catalog = CatalogProvider().compile_now()
    assert catalog.get("desk.lookup_ticket") is not None and catalog.get("desk.tickets.close") is not None


# The setting and its checks -----------------------------------------------------------------------------------


def test_an_unknown_style_is_an_error_and_served_as_portable() -> None:
    with styled("dots"):
        [error] = [message for message in check_settings() if message.id == "mcp_expose.E022"]
        assert served_name("a.b", "dots") == "a_b"
    assert error.msg == "MCP_EXPOSE['WIRE_NAMES'] is 'dots'." and "'portable'" in error.hint


def test_the_dotted_style_is_a_warning_naming_what_clients_refuse() -> None:
    with styled("dotted"):
        [warning] = check_wire_names()
    assert warning.id == "mcp_expose.W017"
    assert "'dotted', so" in warning.msg and "'library.add_author_form'" in warning.msg
    assert "Claude Desktop, Codex and the OpenAI API refuse" in warning.msg
    assert "SILENCED_SYSTEM_CHECKS" in warning.hint
    with styled("portable"):
        assert check_wire_names() == []


def test_discovery_refuses_a_name_too_long_to_serve_in_the_style() -> None:
    """`desk__` is one character longer than `desk.`: a name that fits one style may not fit the other."""
    from mcp_expose.upstream.reader import Refused, read_tool

    entry = {"name": "n" * 59, "inputSchema": {"type": "object"}}  # desk. + 59 = 64; desk__ + 59 = 65
    with styled("dotted"):
        assert read_tool(entry, "desk").name == "n" * 59
    with styled("portable"), pytest.raises(Refused) as refused:
        read_tool(entry, "desk")
    assert refused.value.problem == "the name is 59 characters; desk__<name> fits in 64 up to 58"


@pytest.mark.django_db
def test_an_approved_schema_that_is_not_json_schema_costs_its_own_tool_only() -> None:
    """Whatever the database holds (an approval older than discovery's metaschema check, a hand edit), one tool's
    definition never fails the catalog: it is left out and named, and the server's other tools are served."""
    from mcp_expose.models import ExposedTool, UpstreamServer, UpstreamTool

    server = UpstreamServer.objects.create(name="desk", url="https://desk.example.com/mcp")
    schemas = {"good": {"type": "object"}, "bad": {"type": "object", "required": "r"}}
    for name, schema in schemas.items():
        definition = {"name": name, "description": "A tool.", "input_schema": schema}
        tool = UpstreamTool.objects.create(
            server=server, name=name, status="approved", approved=definition, approved_digest="a" * 64
        )
        ExposedTool.objects.create(key=tool.key, enabled=True)
    with styled("portable"):
        catalog = CatalogProvider().compile_now()
    assert catalog.get("desk__good") is not None and catalog.get("desk__bad") is None
    assert (
        "desk.bad: its approved input_schema is not valid JSON Schema ('r' is not of type 'array' (at required)); not served."
        in catalog.problems
    )


@pytest.mark.django_db(transaction=True)
def test_the_demos_app_page_calls_its_tool_by_the_name_served() -> None:
    """The book card's Refresh button calls the tool again through the host: by the name the server serves."""
    User.objects.create_user("reader", password="pw")
    with styled("portable"):
        client = McpTestClient("reader", apps=True)
        [page] = [
            r.uri for r in client.list_resources().resources if r.uri.startswith("ui://") and "book_card" in r.uri
        ]
        html = client.read_resource(page).contents[0].text
    assert 'callTool("library_get_book", {' in html


@pytest.mark.django_db(transaction=True)
def test_an_assertion_given_a_name_no_tool_goes_by_fails_instead_of_passing() -> None:
    """`assert_hidden` and `assert_cannot_call` pass for any name no tool has: a dotted name on a portable
    deployment would "prove" nothing. They say so, and which name the tool goes by."""
    from mcp_expose.testing import assert_cannot_call, assert_hidden

    User.objects.create_user("reader", password="pw")
    with styled("portable"):
        client = McpTestClient("reader", ["library:read"])
        assert_hidden(client, "library_borrow_book")  # a tool this reader may not use: passes
        assert_cannot_call(client, "library_borrow_book", {"book_id": 1})
        with pytest.raises(AssertionError, match="'library.borrow_book' goes by 'library_borrow_book'"):
            assert_hidden(client, "library.borrow_book")
        with pytest.raises(AssertionError, match="No tool goes by library.nothing_here"):
            assert_cannot_call(client, "library.nothing_here")


def test_a_task_queued_under_a_name_before_a_switch_runs_the_tool_by_its_key(registry: CapabilityRegistry) -> None:
    """A task row keeps the name it was queued under; the worker finds its tool by key, so a switch of WIRE_NAMES
    (or an admin's rename) between queueing and running does not answer `Unknown tool`."""
    from mcp_expose.serving.task_worker import _current_name

    declare(registry, "shop.orders.refund")
    with styled("portable"):
        catalog = compile_catalog(registry, {})
    assert _current_name(catalog, "shop.orders.refund", "shop.orders.refund") == "shop_orders_refund"
    assert _current_name(catalog, "shop.gone", "shop.gone") == "shop.gone"  # no such key: answered as unknown
