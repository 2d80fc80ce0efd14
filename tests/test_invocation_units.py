"""The invocation pieces that need no server: chains, rates, truncation, redaction, confirmation states,
the approval page, the usage report and its retention command."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client, override_settings
from django.utils import timezone

import mcp_expose
from mcp_expose.calls.confirmation import (
    CONFIRMED_KEY,
    STATE_KEY,
    ConfirmationDeclined,
    ConfirmationRequired,
    StaleConfirmation,
    answer_from_client,
    ask_in_client,
    check_approval_page,
    continue_confirmed,
)
from mcp_expose.calls.ratelimit import hit
from mcp_expose.calls.usage import describe_arguments
from mcp_expose.catalog.compiled import compile_catalog
from mcp_expose.core.asking import read_state, write_state
from mcp_expose.core.chain import CallChain, DepthExceeded, InvalidChain, read_chain
from mcp_expose.core.principal import principal_for_user
from mcp_expose.core.rates import parse_rate, stricter_rate
from mcp_expose.declare.registry import CapabilityRegistry
from mcp_expose.models import Confirmation, ToolCall
from mcp_expose.operator.usage_report import percentile, summary


def test_chain_headers() -> None:
    assert read_chain({}) == CallChain(None, 0)
    assert read_chain({"x-conversation-id": "c-1:a.b", "x-agent-depth": "5"}) == CallChain("c-1:a.b", 5)
    bad_headers = (
        {"x-agent-depth": "1.5"},
        {"x-agent-depth": ""},
        {"x-conversation-id": "x" * 129},
        {"x-agent-depth": "6"},
        {"x-agent-depth": "\u00b9"},
    )  # a digit to str.isdigit, not to int
    for bad in bad_headers:
        with pytest.raises(InvalidChain):
            read_chain(bad)
    forwarded = CallChain("c", 2).forward()
    assert forwarded == {"X-Conversation-Id": "c", "X-Agent-Depth": "3"}
    assert len(CallChain(None, 0).forward()["X-Conversation-Id"]) == 32  # a new conversation starts
    with pytest.raises(DepthExceeded):
        CallChain("c", 5).forward()
    with override_settings(MCP_EXPOSE={"MAX_AGENT_DEPTH": 1}):
        with pytest.raises(InvalidChain, match="deeper than 1"):
            read_chain({"x-agent-depth": "2"})


@pytest.mark.parametrize(
    ("rate", "parsed"),
    [
        ("60/min", (60, 60)),
        ("1000/day", (1000, 86400)),
        ("5/10s", (5, 10)),
        ("2/hours", (2, 7200 // 2)),
        ("1/sec", (1, 1)),
    ],
)
def test_rates_parse(rate: str, parsed: tuple[int, int]) -> None:
    if rate == "2/hours":
        parsed = (2, 3600)
    assert parse_rate(rate) == parsed


@pytest.mark.parametrize("bad", ["", "60", "0/min", "ten/min", "5/fortnight", "-1/s", "5/0s"])
def test_bad_rates_are_refused_with_examples(bad: str) -> None:
    with pytest.raises(ValueError, match="60/min"):
        parse_rate(bad)


def test_the_stricter_rate_wins() -> None:
    assert stricter_rate("60/min", "2/sec") == (60, 60)
    assert stricter_rate("", "10/min") == (10, 60)
    assert stricter_rate("", "") is None


def test_fixed_windows_count_per_tool_and_caller() -> None:
    now = 1_000_000.0
    assert [hit("t", "a", (2, 60), now).allowed for _ in range(3)] == [True, True, False]
    assert hit("t", "b", (2, 60), now).allowed  # another caller
    assert hit("u", "a", (2, 60), now).allowed  # another tool
    refused = hit("t", "a", (2, 60), now + 10)
    assert not refused.allowed and refused.retry_after == 60 - (now + 10) % 60
    assert hit("t", "a", (2, 60), now + 60).allowed  # the next window


def test_argument_values_are_recorded_only_when_allowed_and_secrets_never() -> None:
    arguments = {"query": "x", "api_key": "k", "Password": "p", "nested": {"a": 1, "headers": [{"Authorization": "B"}]}}
    size, keys, values = describe_arguments(arguments, with_values=False)
    assert size == len(json.dumps(arguments)) and keys == ["Password", "api_key", "nested", "query"] and values is None
    _, _, values = describe_arguments(arguments, with_values=True)
    assert values == {
        "query": "x",
        "api_key": "[redacted]",
        "Password": "[redacted]",
        "nested": {"a": 1, "headers": [{"Authorization": "[redacted]"}]},
    }


def test_percentiles() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 50 and percentile(values, 0.95) == 95
    assert percentile([], 0.5) == 0.0 and percentile([7.0], 0.95) == 7.0


# Confirmation states, against the database ------------------------------------------------------------------


@pytest.fixture
def confirmed_entry(registry: CapabilityRegistry) -> Any:
    def fire(target: str) -> None: ...

    mcp_expose.tool(registry=registry, key="t.fire", requires_confirmation=True)(fire)
    return compile_catalog(registry, {}).get("t.fire")


@pytest.fixture
def owner(db: None) -> Any:
    return principal_for_user(User.objects.create_user("owner", password="pw"), frozenset(), "api_key")


def test_client_answers_are_single_use(confirmed_entry: Any, owner: Any) -> None:
    prompt = ask_in_client(confirmed_entry, owner, {"target": "x"})
    with pytest.raises(StaleConfirmation):
        answer_from_client(confirmed_entry, owner, {"target": "y"}, prompt.state, True)
    assert answer_from_client(confirmed_entry, owner, {"target": "x"}, prompt.state, True) is True
    with pytest.raises(StaleConfirmation):
        answer_from_client(confirmed_entry, owner, {"target": "x"}, prompt.state, True)
    assert Confirmation.objects.get().status == "consumed"
    declined = ask_in_client(confirmed_entry, owner, {"target": "x"})
    assert answer_from_client(confirmed_entry, owner, {"target": "x"}, declined.state, False) is False
    assert Confirmation.objects.filter(status="declined").count() == 1
    with pytest.raises(StaleConfirmation):
        answer_from_client(confirmed_entry, owner, {"target": "x"}, '{"confirmation": "not-a-uuid"}', True)


def test_no_yes_from_a_client_confirms_an_approval_page_tool(registry: CapabilityRegistry, owner: Any) -> None:
    def wipe(target: str) -> None: ...

    mcp_expose.tool(registry=registry, key="t.wipe", requires_confirmation="approval_page")(wipe)
    on_page = compile_catalog(registry, {}).get("t.wipe")
    in_client = replace(on_page, confirmation_channel="client")  # as it was before the admin moved it
    arguments = {"target": "x"}
    asked = ask_in_client(in_client, owner, arguments)
    with pytest.raises(StaleConfirmation):
        answer_from_client(on_page, owner, arguments, asked.state, True)
    assert Confirmation.objects.get().status == "pending"
    # A yes given in the client does not continue the tool's later rounds once it takes the page only.
    assert answer_from_client(in_client, owner, arguments, asked.state, True) is True
    later_round = write_state({CONFIRMED_KEY: read_state(asked.state)[STATE_KEY]})
    continue_confirmed(in_client, owner, arguments, later_round)
    with pytest.raises(StaleConfirmation):
        continue_confirmed(on_page, owner, arguments, later_round)
    # An approval on the page does.
    with pytest.raises(ConfirmationRequired) as required:
        check_approval_page(on_page, owner, arguments, "")
    Confirmation.objects.filter(channel="approval_page").update(status="approved")
    approved = check_approval_page(on_page, owner, arguments, "")
    assert approved in required.value.details["approval_url"]
    continue_confirmed(on_page, owner, arguments, write_state({CONFIRMED_KEY: approved}))


def test_an_elapsed_client_question_cannot_be_answered(confirmed_entry: Any, owner: Any) -> None:
    prompt = ask_in_client(confirmed_entry, owner, {"target": "x"})
    Confirmation.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(StaleConfirmation):
        answer_from_client(confirmed_entry, owner, {"target": "x"}, prompt.state, True)


def test_anonymous_callers_cannot_confirm(confirmed_entry: Any, db: None) -> None:
    from mcp_expose.core.errors import AccessDenied
    from mcp_expose.core.principal import anonymous_principal

    with pytest.raises(AccessDenied):
        check_approval_page(confirmed_entry, anonymous_principal(), {"target": "x"}, "http://h")


def test_the_approval_page_gate(confirmed_entry: Any, owner: Any) -> None:
    with pytest.raises(ConfirmationRequired) as first:
        check_approval_page(confirmed_entry, owner, {"target": "x"}, "http://mcp.example")
    url = first.value.details["approval_url"]
    assert re.fullmatch(r"http://mcp\.example/mcp/approve/[0-9a-f-]{36}/", url)
    Confirmation.objects.update(status="approved")
    check_approval_page(confirmed_entry, owner, {"target": "x"}, "http://mcp.example")  # runs, once
    assert Confirmation.objects.get().status == "consumed"
    with pytest.raises(ConfirmationRequired):
        check_approval_page(confirmed_entry, owner, {"target": "x"}, "http://mcp.example")
    Confirmation.objects.filter(status="pending").update(status="declined")
    with pytest.raises(ConfirmationDeclined):
        check_approval_page(confirmed_entry, owner, {"target": "x"}, "http://mcp.example")
    assert Confirmation.objects.filter(status="closed").count() == 1


def test_approval_page_needs_the_owner_and_csrf(confirmed_entry: Any, owner: Any) -> None:
    with pytest.raises(ConfirmationRequired) as asked:
        check_approval_page(confirmed_entry, owner, {"target": "x"}, "")
    url = asked.value.details["approval_url"]
    assert Client().get(url).status_code == 302  # login first
    User.objects.create_user("other", password="pw")
    stranger = Client()
    stranger.login(username="other", password="pw")
    assert stranger.get(url).status_code == 404
    browser = Client(enforce_csrf_checks=True)
    browser.login(username="owner", password="pw")
    page = browser.get(url).content.decode()
    assert "Approve a call to t.fire?" in page and "&quot;target&quot;: &quot;x&quot;" in page
    assert browser.post(url, {"approve": "1"}).status_code == 403
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    assert "Approved." in browser.post(url, {"approve": "1", "csrfmiddlewaretoken": token}).content.decode()
    assert Confirmation.objects.get().status == "approved"
    # Answering twice changes nothing.
    browser.post(url, {"decline": "1", "csrfmiddlewaretoken": token})
    assert Confirmation.objects.get().status == "approved"


def test_an_expired_request_shows_as_expired(confirmed_entry: Any, owner: Any) -> None:
    with pytest.raises(ConfirmationRequired) as asked:
        check_approval_page(confirmed_entry, owner, {"target": "x"}, "")
    Confirmation.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    client = Client()
    client.login(username="owner", password="pw")
    assert "expired without an answer" in client.get(asked.value.details["approval_url"]).content.decode()
    assert Confirmation.objects.get().status == "expired"


# Usage report, admin pages and retention ------------------------------------------------------------------------


def make_calls(db: None) -> None:
    now = timezone.now()
    rows = [("a", "ok", 10.0)] * 18 + [("a", "internal", 100.0), ("a", "permission_denied", 1.0), ("b", "ok", 5.0)]
    ToolCall.objects.bulk_create(
        ToolCall(tool_name=tool, outcome=outcome, duration_ms=ms, auth_method="api_key", created_at=now)
        for tool, outcome, ms in rows
    )
    ToolCall.objects.create(
        tool_name="old", outcome="ok", duration_ms=1, auth_method="api_key", created_at=now - timedelta(days=30)
    )


def test_summary_per_tool(db: None) -> None:
    make_calls(db)
    report = summary()
    day = {stat["tool"]: stat for stat in report["windows"]["day"]["tools"]}
    assert set(day) == {"a", "b"}
    assert day["a"]["calls"] == 20 and day["a"]["error_rate"] == 0.05 and day["a"]["denial_rate"] == 0.05
    assert day["a"]["p50_ms"] == 10.0 and day["a"]["p95_ms"] == 10.0
    assert {stat["tool"] for stat in report["windows"]["week"]["tools"]} == {"a", "b"}


def test_summary_per_upstream_server(db: None) -> None:
    from mcp_expose.models import UpstreamServer

    tickets = UpstreamServer.objects.create(name="tickets", url="https://tickets.example/mcp")
    now = timezone.now()
    rows = [
        ("tickets.echo", f"upstream.{tickets.pk}.echo", "ok", 20.0),
        ("renamed", f"upstream.{tickets.pk}.add", "tool_error", 40.0),
        ("gone.echo", "upstream.999.echo", "ok", 1.0),
        ("a", "app.a", "ok", 5.0),
    ]
    ToolCall.objects.bulk_create(
        ToolCall(tool_name=name, tool_key=key, outcome=outcome, duration_ms=ms, auth_method="api_key", created_at=now)
        for name, key, outcome, ms in rows
    )
    servers = {stat["tool"]: stat for stat in summary()["windows"]["day"]["servers"]}
    # By the server the tool was served from (its key), whatever name the admin served it under.
    assert set(servers) == {"tickets", "(removed server #999)", "(this site)"}
    assert servers["tickets"]["calls"] == 2 and servers["tickets"]["errors"] == 1
    assert servers["tickets"]["p95_ms"] == 40.0
    assert servers["(this site)"]["calls"] == 1


def test_summary_json_needs_staff_and_the_view_permission(db: None) -> None:
    from django.contrib.auth.models import Permission

    make_calls(db)
    assert Client().get("/mcp/usage/summary.json").status_code == 302
    staff = User.objects.create_user("staff", password="pw", is_staff=True)
    client = Client()
    client.login(username="staff", password="pw")
    assert client.get("/mcp/usage/summary.json").status_code == 403
    staff.user_permissions.add(Permission.objects.get(codename="view_toolcall"))
    data = client.get("/mcp/usage/summary.json").json()
    assert data["windows"]["day"]["tools"][0]["tool"] == "a"


def test_admin_usage_changelist_and_summary(db: None) -> None:
    make_calls(db)
    User.objects.create_superuser("boss", "b@example.com", "pw")
    client = Client()
    client.login(username="boss", password="pw")
    changelist = client.get("/admin/mcp_expose/toolcall/", {"outcome__exact": "internal"}).content.decode()
    assert "1 tool call" in changelist and "/admin/mcp_expose/toolcall/summary/" in changelist
    page = client.get("/admin/mcp_expose/toolcall/summary/").content.decode()
    assert "Last 24 hours" in page and "?tool_name=a" in page
    assert client.get("/admin/mcp_expose/toolcall/add/").status_code == 403
    tools = client.get("/admin/mcp_expose/exposedtool/").content.decode()
    assert "Calls (24 h)" in tools


def test_prune_deletes_old_rows_in_batches_and_marks_lapsed_confirmations(
    db: None, confirmed_entry: Any, owner: Any
) -> None:
    make_calls(db)
    ask_in_client(confirmed_entry, owner, {"target": "x"})
    Confirmation.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    out = StringIO()
    call_command("mcp_prune_usage", "--days", "7", "--batch-size", "2", stdout=out)
    assert "Deleted 1 tool calls" in out.getvalue() and "1 unanswered confirmations marked expired" in out.getvalue()
    assert not ToolCall.objects.filter(tool_name="old").exists() and ToolCall.objects.count() == 21
    assert Confirmation.objects.get().status == "expired"


@pytest.mark.django_db(transaction=True)
def test_a_usage_log_that_cannot_be_written_never_fails_the_call(caplog: pytest.LogCaptureFixture) -> None:
    """The table really disappears for a moment: not an outage, so the row is tried once, then logged whole."""
    import logging

    from asgiref.sync import async_to_sync
    from django.contrib.auth.models import AnonymousUser
    from django.db import connection

    from mcp_expose.calls.dispatch import call_tool
    from mcp_expose.catalog.compiled import provider
    from mcp_expose.core.principal import Principal

    principal = Principal(user=AnonymousUser(), scopes=frozenset({"mcp"}), method="local")
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE mcp_expose_toolcall RENAME TO mcp_expose_toolcall_away")
    try:
        with caplog.at_level(logging.ERROR, logger="mcp_expose.usage"):
            outcome = async_to_sync(call_tool)(
                provider.get_sync(), principal, "library.echo", {"message": "still here"}
            )
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE mcp_expose_toolcall_away RENAME TO mcp_expose_toolcall")
    assert outcome.ok and outcome.value == {"message": "still here", "caller": "anonymous"}
    record = caplog.records[-1]
    assert record.getMessage().startswith("Lost the usage row for library.echo (caller anonymous (local), outcome ok")
    assert "no such table" in record.getMessage() and record.exc_info is not None
    assert sum("Lost the usage row" in entry.getMessage() for entry in caplog.records) == 1


def test_persistent_connections_stay_open_between_units(confirmed_entry: Any, transactional_db: None) -> None:
    """With CONN_MAX_AGE > 0 a unit of work keeps its thread's connection for the next one (no churn)."""
    from django.db import connection

    caller = principal_for_user(User.objects.create_user("keep", password="pw"), frozenset(), "api_key")
    connection.close()
    connection.settings_dict["CONN_MAX_AGE"] = 60
    try:
        ask_in_client(confirmed_entry, caller, {"target": "x"})
        kept = connection.connection
        assert kept is not None
        ask_in_client(confirmed_entry, caller, {"target": "y"})
        assert connection.connection is kept
    finally:
        connection.settings_dict["CONN_MAX_AGE"] = 0
        connection.close()


def test_a_unit_of_database_work_leaves_no_connection_behind(confirmed_entry: Any, transactional_db: None) -> None:
    """With CONN_MAX_AGE = 0 a worker thread must not hold an idle connection after its job (nor drop it
    unclosed when it dies)."""
    from django.db import connection

    caller = principal_for_user(User.objects.create_user("tidy", password="pw"), frozenset(), "api_key")
    connection.ensure_connection()
    prompt = ask_in_client(confirmed_entry, caller, {"target": "x"})
    assert connection.connection is None
    assert answer_from_client(confirmed_entry, caller, {"target": "x"}, prompt.state, True) is True
    assert connection.connection is None
    with pytest.raises(ConfirmationRequired):
        check_approval_page(confirmed_entry, caller, {"target": "y"}, "http://mcp.example")
    assert connection.connection is None
