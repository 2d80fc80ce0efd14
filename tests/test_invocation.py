"""Safe invocation against live servers: confirmation, call chains, rate limits, timeouts, cancellation,
result limits, progress and the usage log."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from mcp_expose.testing.live import mcp_http_client

from .live import (
    LIVE_SETTINGS,
    LiveServer,
    create_api_key,
    jsonrpc_body,
    modern_headers,
    run_server,
    run_snippet,
)
from .mcp_client import MODES, connect
from .oauth_client import Browser

pytestmark = [pytest.mark.anyio, pytest.mark.live]

LIVE = LIVE_SETTINGS


def shell(data: Path, code: str) -> str:
    return run_snippet(data, code).stdout.strip().splitlines()[-1]


def settled_usage(data: Path, conversation: str, expected: int, what: str) -> str:
    """Print `what` (an expression over `rows`) about the usage rows of a conversation, once `expected` have
    arrived: a running server writes them in batches, within USAGE_BATCH_SECONDS (10 s at most here)."""
    return shell(
        data,
        "import json, time; from django.db.models import Count; from mcp_expose.models import ToolCall\n"
        f"rows = ToolCall.objects.filter(conversation_id={conversation!r})\n"
        "deadline = time.monotonic() + 10\n"
        f"while rows.count() < {expected} and time.monotonic() < deadline: time.sleep(0.05)\n"
        "time.sleep(0.3)\n"
        f"print({what})",
    )


def authors_named(data: Path, name: str) -> int:
    return int(
        shell(data, f"from project.library.models import Author; print(Author.objects.filter(name={name!r}).count())")
    )


def elicitation_client(url: str, key: str, answer: types.ElicitResult, seen: list[str] | None = None) -> Any:
    async def callback(ctx: Any, params: Any) -> types.ElicitResult:
        if seen is not None:
            seen.append(params.message)
            seen.append(json.dumps(params.requested_schema, sort_keys=True))
        return answer

    http = mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    return http, Client(streamable_http_client(url, http_client=http), elicitation_callback=callback)


ACCEPT = types.ElicitResult(action="accept", content={"confirm": True})


# Confirmation through the client (2026-07-28 form elicitation) ------------------------------------------------


async def test_confirmation_round_trip_accept(server: LiveServer, key: str, data: Path) -> None:
    seen: list[str] = []
    http, client = elicitation_client(server.mcp_url, key, ACCEPT, seen)
    async with http, client:
        result = await client.call_tool("toolbox.launch", {"target": "accepted"})
    assert result.structured_content == {"result": "launched accepted"}
    assert seen[0].startswith("Run the tool toolbox.launch?") and 'Arguments: {"target":"accepted"}' in seen[0]
    assert json.loads(seen[1])["required"] == ["confirm"]
    assert authors_named(data, "launched-accepted") == 1


@pytest.mark.parametrize(
    "answer",
    [
        types.ElicitResult(action="decline"),
        types.ElicitResult(action="cancel"),
        types.ElicitResult(action="accept", content={"confirm": False}),
    ],
)
async def test_confirmation_round_trip_decline(server: LiveServer, key: str, data: Path, answer: Any) -> None:
    target = f"declined-{answer.action}-{bool(answer.content)}"
    http, client = elicitation_client(server.mcp_url, key, answer)
    async with http, client:
        result = await client.call_tool("toolbox.launch", {"target": target})
    assert result.is_error and result.structured_content["error"]["code"] == "confirmation_declined"
    assert authors_named(data, f"launched-{target}") == 0


async def first_round(url: str, key: str, arguments: dict[str, Any]) -> types.InputRequiredResult:
    http, client = elicitation_client(url, key, ACCEPT)
    async with http, client:
        result = await client.session.call_tool("toolbox.launch", arguments, allow_input_required=True)
    assert isinstance(result, types.InputRequiredResult)
    return result


async def continue_round(url: str, key: str, arguments: dict[str, Any], state: str) -> Any:
    """The second round: the answer and the echoed state. A protocol error is returned, not raised."""
    http, client = elicitation_client(url, key, ACCEPT)
    async with http, client:
        try:
            return await client.session.call_tool(
                "toolbox.launch",
                arguments,
                input_responses={"confirm": ACCEPT},
                request_state=state,
                allow_input_required=True,
            )
        except MCPError as exc:
            return exc


def assert_refused_state(outcome: Any) -> None:
    assert isinstance(outcome, MCPError), outcome
    assert outcome.code == -32602 and outcome.message == "Invalid or expired requestState"


async def test_tampered_foreign_changed_and_replayed_state_are_refused(
    server: LiveServer, key: str, data: Path
) -> None:
    arguments = {"target": "guarded"}
    pending = await first_round(server.mcp_url, key, arguments)
    state = pending.request_state
    assert state is not None and "guarded" not in state  # sealed, not readable

    tampered = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
    other_key = create_api_key(data, "admin", "library:read library:write")
    for attempt_key, attempt_arguments, attempt_state in [
        (key, arguments, tampered),
        (other_key, arguments, state),  # the same user, but another credential: another principal
        (key, {"target": "something else"}, state),
    ]:
        assert_refused_state(await continue_round(server.mcp_url, attempt_key, attempt_arguments, attempt_state))
    assert authors_named(data, "launched-guarded") == 0

    done = await continue_round(server.mcp_url, key, arguments, state)
    assert done.structured_content == {"result": "launched guarded"}
    assert_refused_state(await continue_round(server.mcp_url, key, arguments, state))
    assert authors_named(data, "launched-guarded") == 1


async def test_expired_state_is_refused(data: Path, key: str) -> None:
    with run_server(data, MCP_TEST_CONFIRMATION_TTL="1", **LIVE) as short:
        arguments = {"target": "too-late"}
        pending = await first_round(short.mcp_url, key, arguments)
        await anyio.sleep(1.5)
        assert_refused_state(await continue_round(short.mcp_url, key, arguments, pending.request_state))
    assert authors_named(data, "launched-too-late") == 0


async def test_a_continuation_lands_on_another_process(data: Path, server: LiveServer, key: str) -> None:
    arguments = {"target": "elsewhere"}
    pending = await first_round(server.mcp_url, key, arguments)
    with run_server(data, **LIVE) as other:
        done = await continue_round(other.mcp_url, key, arguments, pending.request_state)
    assert done.structured_content == {"result": "launched elsewhere"}


# Confirmation on the approval page (clients without elicitation, and 2025-11-25) --------------------------------


def approval_url(result: Any) -> str:
    assert result.is_error, result
    error = result.structured_content["error"]
    assert error["code"] == "confirmation_required"
    assert error["details"]["approval_url"] in error["message"]
    return error["details"]["approval_url"]


def answer_on_page(browser: Browser, url: str, button: str) -> str:
    page = browser.http.get(url)
    assert page.status_code == 200
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    answered = browser.http.post(url, data={"csrfmiddlewaretoken": token, button: "1"}, headers={"Referer": url})
    assert answered.status_code == 200
    return answered.text


@pytest.mark.parametrize("mode", list(MODES))
async def test_the_approval_page_flow(server: LiveServer, key: str, data: Path, mode: str) -> None:
    target = f"approved-{mode}"
    async with connect(server.mcp_url, key, mode) as client:
        first = await client.call_tool("toolbox.launch", {"target": target})
        url = approval_url(first)
        again = await client.call_tool("toolbox.launch", {"target": target})
        assert approval_url(again) == url  # still waiting: the same question, not a new one
        with Browser.logged_in(server.base_url, "reader", "reader") as stranger:
            assert stranger.http.get(url).status_code == 404
        with Browser.logged_in(server.base_url, "admin", "admin") as owner:
            page = owner.http.get(url).text
            assert "toolbox.launch" in page and f"&quot;target&quot;: &quot;{target}&quot;" in page
            assert "Approved." in answer_on_page(owner, url, "approve")
        ran = await client.call_tool("toolbox.launch", {"target": target})
        assert ran.structured_content == {"result": f"launched {target}"}
        # The approval was used up: the next call asks again.
        assert approval_url(await client.call_tool("toolbox.launch", {"target": target})) != url
    assert authors_named(data, f"launched-{target}") == 1


async def test_declined_on_the_approval_page(server: LiveServer, key: str, data: Path) -> None:
    async with connect(server.mcp_url, key, "legacy") as client:
        url = approval_url(await client.call_tool("toolbox.launch", {"target": "refused"}))
        with Browser.logged_in(server.base_url, "admin", "admin") as owner:
            assert "Declined." in answer_on_page(owner, url, "decline")
        declined = await client.call_tool("toolbox.launch", {"target": "refused"})
    assert declined.structured_content["error"]["code"] == "confirmation_declined"
    assert authors_named(data, "launched-refused") == 0


async def test_an_expired_approval_is_declined(data: Path, key: str) -> None:
    with run_server(data, MCP_TEST_CONFIRMATION_TTL="1", **LIVE) as short:
        async with connect(short.mcp_url, key, "legacy") as client:
            approval_url(await client.call_tool("toolbox.launch", {"target": "lapsed"}))
            await anyio.sleep(1.5)
            lapsed = await client.call_tool("toolbox.launch", {"target": "lapsed"})
    assert lapsed.structured_content["error"]["code"] == "confirmation_declined"
    statuses = shell(
        data,
        "from mcp_expose.models import Confirmation;"
        "print(sorted(Confirmation.objects.filter(arguments__target='lapsed').values_list('status', flat=True)))",
    )
    assert statuses == "['expired']"


# Call chains ---------------------------------------------------------------------------------------------------


def chain_call(server: LiveServer, key: str, name: str, arguments: dict[str, Any], **headers: str) -> httpx2.Response:
    return httpx2.post(
        server.mcp_url,
        content=jsonrpc_body("tools/call", {"name": name, "arguments": arguments}),
        headers={**modern_headers("tools/call", key, name=name), **headers},
        timeout=30,
    )


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({"X-Agent-Depth": "two"}, "X-Agent-Depth must be a non-negative whole number."),
        ({"X-Agent-Depth": "-1"}, "X-Agent-Depth must be a non-negative whole number."),
        ({"X-Conversation-Id": "has space"}, "X-Conversation-Id must be 1-128 characters"),
        ({"X-Agent-Depth": "6"}, "X-Agent-Depth is 6; calls deeper than 5 agents are refused."),
    ],
)
def test_malformed_or_too_deep_chains_are_refused_before_anything_runs(
    server: LiveServer, key: str, data: Path, headers: dict[str, str], message: str
) -> None:
    response = chain_call(server, key, "toolbox.slow_write", {"marker": "never", "seconds": 0}, **headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32602 and response.json()["error"]["message"].startswith(message)
    listing = httpx2.post(
        server.mcp_url, content=jsonrpc_body("tools/list"), headers={**modern_headers("tools/list", key), **headers}
    )
    assert listing.status_code == 400
    assert authors_named(data, "never") == 0


def test_chains_are_read_and_forwarded_one_deeper(server: LiveServer, key: str) -> None:
    plain = chain_call(server, key, "toolbox.chain_info", {})
    assert plain.json()["result"]["structuredContent"] == {"depth": 0, "conversation": None}
    relayed = chain_call(
        server,
        key,
        "toolbox.relay",
        {"url": server.mcp_url, "api_key": key},
        **{"X-Conversation-Id": "conv-42", "X-Agent-Depth": "3"},
    )
    assert relayed.json()["result"]["structuredContent"] == {"downstream": {"depth": 4, "conversation": "conv-42"}}
    at_cap = chain_call(
        server,
        key,
        "toolbox.relay",
        {"url": server.mcp_url, "api_key": key},
        **{"X-Conversation-Id": "conv-43", "X-Agent-Depth": "5"},
    )
    error = at_cap.json()["result"]["structuredContent"]["error"]
    assert error["code"] == "depth_exceeded" and "limit is 5" in error["message"]


# Rate limits, timeouts, cancellation, truncation, progress ------------------------------------------------------


async def test_a_rate_limit_is_shared_by_two_processes(data: Path, server: LiveServer) -> None:
    key = create_api_key(data, "reader", "library:read")
    with run_server(data, **LIVE) as other:
        results = []
        for target in (server, other, server, other):
            async with connect(target.mcp_url, key, "auto") as client:
                results.append(await client.call_tool("toolbox.limited", {}))
    assert [r.is_error for r in results] == [False, False, False, True]
    error = results[-1].structured_content["error"]
    assert error["code"] == "rate_limited" and 1 <= error["details"]["retry_after"] <= 86400


def set_row_rate_limit(data: Path, key: str, rate: str) -> None:
    """As the admin form does: validated, then saved, which moves the catalog revision every server watches."""
    shell(
        data,
        "from mcp_expose.models import ExposedTool\n"
        f"row = ExposedTool.objects.get(key={key!r}); row.rate_limit = {rate!r}; row.full_clean(); row.save()\n"
        "print('saved')",
    )


async def test_a_rate_limit_set_on_the_admin_row_applies(data: Path, server: LiveServer) -> None:
    key = create_api_key(data, "reader", "library:read")
    # library.library_stats declares no limit: the row's is the only one. A day, so no window ends mid-test.
    set_row_rate_limit(data, "library.library_stats", "2/day")
    try:
        async with connect(server.mcp_url, key, "auto") as client:
            results = [await client.call_tool("library.library_stats", {}) for _ in range(3)]
    finally:
        set_row_rate_limit(data, "library.library_stats", "")
    assert [r.is_error for r in results] == [False, False, True]
    error = results[-1].structured_content["error"]
    assert error["code"] == "rate_limited" and 1 <= error["details"]["retry_after"] <= 86400
    assert error["message"] == f"Too many calls. Try again in {error['details']['retry_after']} seconds."


async def test_a_timeout_gives_a_timeout_result_and_keeps_no_write(server: LiveServer, key: str, data: Path) -> None:
    async with connect(server.mcp_url, key, "auto") as client:
        result = await client.call_tool("toolbox.slow_write", {"marker": "timed-out", "seconds": 5})
    error = result.structured_content["error"]
    assert error["code"] == "timeout" and error["details"] == {"timeout_seconds": 1.0}
    assert error["message"].endswith("It ran in a transaction, which is rolled back: nothing it wrote is kept.")
    assert authors_named(data, "timed-out") == 0


async def test_a_disconnect_cancels_and_unwinds_the_call(server: LiveServer, key: str, data: Path) -> None:
    payload = json.loads(
        jsonrpc_body(
            "tools/call", {"name": "toolbox.write_then_wait", "arguments": {"marker": "abandoned", "seconds": 10}}
        )
    )
    payload["params"]["_meta"]["progressToken"] = "p1"  # progress makes the answer a stream we can walk away from
    headers = modern_headers("tools/call", key, name="toolbox.write_then_wait")
    async with httpx2.AsyncClient(timeout=30) as http:
        async with http.stream("POST", server.mcp_url, content=json.dumps(payload), headers=headers) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            async for line in response.aiter_lines():
                if "notifications/progress" in line:
                    break  # the row is written and the tool is working: hang up now
    for _ in range(50):
        outcome = shell(
            data,
            "from mcp_expose.models import ToolCall;"
            "print(ToolCall.objects.filter(tool_name='toolbox.write_then_wait').values_list('outcome', flat=True).last())",
        )
        if outcome != "None":
            break
        await anyio.sleep(0.2)
    assert outcome == "cancelled"
    await anyio.sleep(0.5)
    assert authors_named(data, "abandoned") == 0


async def test_a_result_over_the_limit_is_refused_naming_the_limit_never_cut(server: LiveServer, key: str) -> None:
    async with connect(server.mcp_url, key, "auto") as client:
        result = await client.call_tool("toolbox.big", {"count": 50})
        small = await client.call_tool("toolbox.big", {"count": 5})
    assert result.is_error
    error = result.structured_content["error"]
    assert error["code"] == "result_too_large" and "incident" not in error
    assert error["details"]["limit_bytes"] == 2000 < error["details"]["size_bytes"]
    assert "over this tool's limit of 2000 bytes" in error["message"] and "Ask for less" in error["message"]
    assert "0000" not in result.content[0].text  # nothing of the result was sent
    assert not small.is_error and len(small.structured_content["result"]) == 5


async def test_progress_reaches_the_client(server: LiveServer, key: str) -> None:
    updates: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total, message))

    async with connect(server.mcp_url, key, "auto") as client:
        result = await client.call_tool("toolbox.count_up", {"steps": 4}, progress_callback=on_progress)
        inventory = await client.call_tool("library.inventory", {}, progress_callback=on_progress)
    assert result.structured_content == {"result": 4}
    assert updates[:4] == [(1, 4, "step 1"), (2, 4, "step 2"), (3, 4, "step 3"), (4, 4, "step 4")]
    assert inventory.structured_content["books"] == 8 and len(updates) == 12


# The usage log ---------------------------------------------------------------------------------------------------


async def test_concurrent_calls_leave_exactly_one_row_each(data: Path) -> None:
    with run_server(data, **LIVE) as fresh:
        key = create_api_key(data, "admin", "library:read")
        marker = "burst-7"

        async def one(index: int, http: httpx2.AsyncClient) -> int:
            arguments = {"message": marker} if index % 4 else {"message": 7}
            response = await http.post(
                fresh.mcp_url,
                content=jsonrpc_body("tools/call", {"name": "library.echo", "arguments": arguments}),
                headers={**modern_headers("tools/call", key, name="library.echo"), "X-Conversation-Id": marker},
            )
            return response.status_code

        async with httpx2.AsyncClient(timeout=120, limits=httpx2.Limits(max_connections=200)) as http:
            statuses: list[int] = []
            async with anyio.create_task_group() as group:
                for index in range(200):
                    group.start_soon(lambda i=index: _collect(statuses, one(i, http)))
    assert statuses == [200] * 200
    counts = settled_usage(data, marker, 200, "dict(rows.values_list('outcome').annotate(n=Count('pk')))")
    assert counts == "{'invalid_input': 50, 'ok': 150}"


async def _collect(into: list[int], call: Any) -> None:
    into.append(await call)


def test_rows_record_who_what_and_how(server: LiveServer, key: str, data: Path) -> None:
    chain_call(
        server,
        key,
        "library.search_books",
        {"query": "sagan"},
        **{"X-Conversation-Id": "audit-1", "X-Agent-Depth": "2"},
    )
    row = json.loads(
        settled_usage(
            data,
            "audit-1",
            1,
            "json.dumps(rows.values("
            "'tool_name','tool_key','username','auth_method','api_key_prefix','scopes','outcome',"
            "'argument_keys','argument_values','depth','protocol_version','result_bytes').get())",
        )
    )
    assert row["tool_name"] == "library.search_books" and row["username"] == "admin" and row["auth_method"] == "api_key"
    assert row["api_key_prefix"] == key.split("_")[1] and "library:read" in row["scopes"]
    assert row["outcome"] == "ok" and row["argument_keys"] == ["query"] and row["argument_values"] is None
    assert row["depth"] == 2 and row["protocol_version"] == "2026-07-28" and row["result_bytes"] > 0


def test_tools_never_see_the_callers_credentials(server: LiveServer, key: str) -> None:
    names = chain_call(server, key, "toolbox.header_names", {}).json()["result"]["structuredContent"]["result"]
    assert "authorization" not in names and "cookie" not in names and "mcp-method" in names


async def test_a_confirmation_answer_is_not_counted_twice_by_the_rate_limit(server: LiveServer, data: Path) -> None:
    key = create_api_key(data, "admin", "mcp")
    http, client = elicitation_client(server.mcp_url, key, ACCEPT)
    async with http, client:
        result = await client.call_tool("toolbox.launch_once", {"target": "a"})
        again = await client.call_tool("toolbox.launch_once", {"target": "b"})
    assert result.structured_content == {"result": "launched a"}
    assert again.structured_content["error"]["code"] == "rate_limited"
