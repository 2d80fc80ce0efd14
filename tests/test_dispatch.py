from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

import anyio
import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied, ValidationError
from pydantic import BaseModel
from typing_extensions import TypedDict

import mcp_expose
from mcp_expose import InvocationContext, Principal, ToolError
from mcp_expose.calls.dispatch import CallRequest, call_tool
from mcp_expose.catalog.compiled import Catalog, compile_catalog
from mcp_expose.core.errors import Conflict, UnknownTool
from mcp_expose.core.principal import anonymous_principal
from mcp_expose.declare.registry import CapabilityRegistry

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


class Out(TypedDict):
    n: int


class Window(TypedDict):
    start: int


class Order(BaseModel):
    item: str
    window: Window


@dataclass
class Point:
    x: int


@pytest.fixture
def catalog(registry: CapabilityRegistry) -> Catalog:
    tool = mcp_expose.tool

    @tool(registry=registry, key="t.add")
    def add(a: int, b: int = 1) -> int:
        return a + b

    @tool(registry=registry, key="t.async_hello")
    async def async_hello(name: str, context: InvocationContext) -> dict[str, Any]:
        await context.report_progress(1, 2, "half")
        return {"hello": name, "tool": context.tool_name, "protocol": context.protocol_version}

    @tool(registry=registry, key="t.secret", scopes=["admin"])
    def secret() -> str:
        return "s"

    @tool(registry=registry, key="t.perm", permissions=["library.view_loan"])
    def perm() -> str:
        return "p"

    @tool(registry=registry, key="t.crash")
    def crash() -> None:
        raise RuntimeError("password=hunter2 leaked?")

    @tool(registry=registry, key="t.refuse")
    def refuse(kind: str) -> None:
        if kind == "tool":
            raise Conflict("Already done.", details={"id": 3})
        if kind == "permission":
            raise PermissionDenied("Only librarians may do that.")
        if kind == "validation":
            raise ValidationError({"title": ["Too long."]})
        if kind == "custom":
            raise ToolError("Plain tool error.")
        if kind == "odd_details":
            raise ToolError("Odd details.", details={None: Decimal("1.50"), "on": date(2026, 1, 2), "ids": (1, 2)})
        if kind == "no_json_details":
            raise ToolError("Opaque details.", details={"thing": object()})
        if kind == "colliding_details":
            raise ToolError("Colliding details.", details={7: "secret-a", "7": "secret-b"})

    @tool(registry=registry, key="t.missing")
    def missing() -> None:
        from django.contrib.auth.models import User

        User.objects.get(pk=-1)

    @tool(registry=registry, key="t.colliding")
    def colliding() -> dict[Any, str]:
        return {1: "secret-a", "1": "secret-b"}

    @tool(registry=registry, key="t.nan")
    def nan() -> float:
        return float("nan")

    @tool(registry=registry, key="t.bad_output")
    def bad_output() -> Out:
        return {"n": "not a number"}  # type: ignore[typeddict-item]

    @tool(registry=registry, key="t.injected")
    def injected(principal: Principal, request: Any, x: int = 0) -> dict[str, Any]:
        return {
            "user": request.user.get_username(),
            "same": request.user is principal.user,
            "has_auth_header": "HTTP_AUTHORIZATION" in request.META,
            "agent": request.META.get("HTTP_USER_AGENT"),
        }

    @tool(registry=registry, key="t.shapes")
    def shapes(order: Order, where: Point) -> dict[str, Any]:
        return {"item": order.item, "window": order.window, "x": where.x}

    return compile_catalog(registry, {}, "r")


def principal(scopes: frozenset[str] = frozenset(), **extra: Any) -> Principal:
    return Principal(user=AnonymousUser(), scopes=scopes, method="local", **extra)


async def test_a_sync_tool_returns_its_value(catalog: Catalog) -> None:
    outcome = await call_tool(catalog, principal(), "t.add", {"a": 2})
    assert outcome.ok and outcome.value == 3


async def test_an_async_tool_gets_the_context_and_reports_progress(catalog: Catalog) -> None:
    reports: list[tuple[Any, ...]] = []

    async def progress(*args: Any) -> None:
        reports.append(args)

    outcome = await call_tool(
        catalog,
        principal(),
        "t.async_hello",
        {"name": "Ada"},
        CallRequest(protocol_version="2026-07-28", report_progress=progress),
    )
    assert outcome.value == {"hello": "Ada", "tool": "t.async_hello", "protocol": "2026-07-28"}
    assert reports == [(1, 2, "half")]


@pytest.mark.parametrize("name", ["nope", "t.secret", "t.perm"])
async def test_unknown_and_forbidden_tools_look_alike(catalog: Catalog, name: str) -> None:
    with pytest.raises(UnknownTool) as caught:
        await call_tool(catalog, principal(), name, {})
    assert str(caught.value) == f"Unknown tool: {name}"


async def test_scopes_and_permissions_open_tools(catalog: Catalog) -> None:
    assert (await call_tool(catalog, principal(frozenset({"admin"})), "t.secret", {})).value == "s"
    user = type("U", (), {"is_active": True, "is_anonymous": False})()
    librarian = Principal(user=user, method="local", permissions=frozenset({"library.view_loan"}))
    assert (await call_tool(catalog, librarian, "t.perm", {})).value == "p"
    inactive = Principal(
        user=type("U", (), {"is_active": False})(), method="local", permissions=frozenset({"library.view_loan"})
    )
    with pytest.raises(UnknownTool):
        await call_tool(catalog, inactive, "t.perm", {})


async def test_bad_arguments_are_invalid_input(catalog: Catalog) -> None:
    outcome = await call_tool(catalog, principal(), "t.add", {"a": "two", "c": 1})
    assert outcome.failure is not None and outcome.failure.code == "invalid_input"
    assert {d["path"] for d in outcome.failure.details} == {"$.a", "$.c"}


async def test_unknown_nested_keys_and_long_strings_are_invalid_input(catalog: Catalog) -> None:
    good = {"order": {"item": "pen", "window": {"start": 1}}, "where": {"x": 2}}
    assert (await call_tool(catalog, principal(), "t.shapes", good)).value == {
        "item": "pen",
        "window": {"start": 1},
        "x": 2,
    }
    bad = {"order": {"item": "p" * 1001, "window": {"start": 1, "zzz": 2}, "zzz": 2}, "where": {"x": 2, "zzz": 2}}
    outcome = await call_tool(catalog, principal(), "t.shapes", bad)
    assert outcome.failure is not None and outcome.failure.code == "invalid_input"
    assert [(p["path"], p["message"]) for p in outcome.failure.details] == [
        ("$.order.item", "At most 1000 characters."),
        ("$.order.window.zzz", "Unexpected argument; allowed here: start."),
        ("$.order.zzz", "Unexpected argument; allowed here: item, window."),
        ("$.where.zzz", "Unexpected argument; allowed here: x."),
    ]


@pytest.mark.parametrize(
    ("kind", "code", "message", "details"),
    [
        ("tool", "conflict", "Already done.", {"id": 3}),
        ("permission", "permission_denied", "Only librarians may do that.", None),
        ("validation", "invalid_input", "The arguments are not valid.", [{"path": "$.title", "message": "Too long."}]),
        ("custom", "tool_error", "Plain tool error.", None),
    ],
)
async def test_anticipated_failures_carry_a_code_and_safe_message(
    catalog: Catalog, kind: str, code: str, message: str, details: Any
) -> None:
    outcome = await call_tool(catalog, principal(), "t.refuse", {"kind": kind})
    assert outcome.failure is not None
    assert (outcome.failure.code, outcome.failure.message, outcome.failure.details) == (code, message, details)


async def test_object_does_not_exist_is_not_found(catalog: Catalog) -> None:
    outcome = await call_tool(catalog, principal(), "t.missing", {})
    assert outcome.failure is not None and outcome.failure.as_dict() == {
        "code": "not_found",
        "message": "User not found.",
    }


@pytest.mark.parametrize("name", ["t.crash", "t.nan", "t.bad_output", "t.colliding"])
async def test_unexpected_failures_are_redacted_and_logged(
    catalog: Catalog, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="mcp_expose.dispatch"):
        outcome = await call_tool(catalog, principal(), name, {})
    failure = outcome.failure
    assert failure is not None and failure.code == "internal" and failure.incident
    assert "hunter2" not in repr(failure.as_dict()) and "incident id" in failure.message
    assert failure.incident in caplog.text
    assert caplog.records[-1].exc_info is not None


async def test_injected_principal_and_request(catalog: Catalog) -> None:
    outcome = await call_tool(
        catalog,
        anonymous_principal(),
        "t.injected",
        {},
        CallRequest(headers={"authorization": "Bearer secret", "user-agent": "agent/1"}),
    )
    assert outcome.value == {"user": "", "same": True, "has_auth_header": False, "agent": "agent/1"}


async def test_error_details_are_sent_as_json_values_or_left_out(
    catalog: Catalog, caplog: pytest.LogCaptureFixture
) -> None:
    """Details are projected like results, so every path renders the same JSON; details with no JSON form
    are left out (and logged) rather than turning the tool's own error into an internal one."""
    from mcp_expose.serving.wire import render_outcome

    outcome = await call_tool(catalog, principal(), "t.refuse", {"kind": "odd_details"})
    assert outcome.failure is not None
    assert outcome.failure.details == {"null": "1.50", "on": "2026-01-02", "ids": [1, 2]}
    assert render_outcome(outcome).structured_content["error"]["details"] == outcome.failure.details

    opaque = await call_tool(catalog, principal(), "t.refuse", {"kind": "no_json_details"})
    assert opaque.failure is not None and opaque.failure.code == "tool_error"
    assert opaque.failure.message == "Opaque details." and "details" not in opaque.failure.as_dict()
    assert "gave error details with no JSON form" in caplog.text


async def test_colliding_keys_are_refused_redacted_and_named_in_the_log(
    catalog: Catalog, caplog: pytest.LogCaptureFixture
) -> None:
    """A result whose keys collide as strings is an internal failure, as a cycle is; error details whose keys
    collide are left out, as details with a cycle are. Either way the log names the key, not the values."""
    with caplog.at_level(logging.INFO, logger="mcp_expose.dispatch"):
        result = await call_tool(catalog, principal(), "t.colliding", {})
        refused = await call_tool(catalog, principal(), "t.refuse", {"kind": "colliding_details"})
    assert result.failure is not None and result.failure.code == "internal" and result.failure.incident
    assert refused.failure is not None and refused.failure.as_dict() == {
        "code": "tool_error",
        "message": "Colliding details.",
    }
    assert 'same JSON key "1"' in caplog.text and 'same JSON key "7"' in caplog.text
    assert "secret" not in caplog.text


def _work_until_abandoned() -> None:
    """Query in small steps, as real work would: the first query after the deadline raises."""
    from django.db import connection

    for _ in range(1000):
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        time.sleep(0.01)


async def test_a_timed_out_writing_sync_tool_keeps_nothing_and_says_so(registry: CapabilityRegistry) -> None:
    from project.library.models import Author

    ended: list[str] = []
    done = threading.Event()

    @mcp_expose.tool(registry=registry, key="t.slow_write", timeout=0.2)
    def slow_write() -> None:
        try:
            Author.objects.create(name="timed-out-sync")
            _work_until_abandoned()
        except BaseException as exc:
            ended.append(type(exc).__name__)
            raise
        finally:
            done.set()

    outcome = await call_tool(compile_catalog(registry, {}, "r"), principal(), "t.slow_write", {})
    assert await anyio.to_thread.run_sync(done.wait, 10)
    assert outcome.failure is not None and outcome.failure.as_dict() == {
        "code": "timeout",
        "details": {"timeout_seconds": 0.2},
        "message": "The tool did not finish within 0.2 seconds. "
        "It ran in a transaction, which is rolled back: nothing it wrote is kept.",
    }
    assert ended == ["CallAbandoned"] and not await Author.objects.filter(name="timed-out-sync").aexists()


async def test_a_timed_out_async_tool_says_its_writes_may_have_been_kept(registry: CapabilityRegistry) -> None:
    """No transaction wraps an async tool: what it wrote before the deadline stays, and the answer says it may."""
    from project.library.models import Author

    @mcp_expose.tool(registry=registry, key="t.async_write", timeout=0.2)
    async def async_write() -> None:
        await Author.objects.acreate(name="timed-out-async")
        await anyio.Event().wait()  # never set: only the deadline ends this

    outcome = await call_tool(compile_catalog(registry, {}, "r"), principal(), "t.async_write", {})
    assert outcome.failure is not None and outcome.failure.code == "timeout"
    assert outcome.failure.message == (
        "The tool did not finish within 0.2 seconds. "
        "It is async, so it ran outside a transaction: anything it wrote may have been kept."
    )
    assert await Author.objects.filter(name="timed-out-async").aexists()


async def test_a_timed_out_read_only_sync_tool_claims_nothing_about_writes(registry: CapabilityRegistry) -> None:
    @mcp_expose.tool(registry=registry, key="t.slow_read", timeout=0.2, read_only=True)
    def slow_read() -> None:
        _work_until_abandoned()

    outcome = await call_tool(compile_catalog(registry, {}, "r"), principal(), "t.slow_read", {})
    assert outcome.failure is not None and outcome.failure.code == "timeout"
    assert outcome.failure.message == "The tool did not finish within 0.2 seconds."
