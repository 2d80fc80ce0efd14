"""2025-11-25 calls over pooled sessions (`mcp_expose.upstream.legacy_sessions`), against a real upstream process
that counts the sessions opened: what is tested is how many HTTP exchanges a call costs and when a session ends."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
from django.test import override_settings

from mcp_expose.core.chain import CallChain
from mcp_expose.core.conf import changed_settings
from mcp_expose.core.content import ContentBundle
from mcp_expose.core.context import InvocationContext
from mcp_expose.core.errors import ToolError, UpstreamError, UpstreamUnavailable
from mcp_expose.core.principal import Principal
from mcp_expose.upstream.calling import UpstreamCall, breaker, call_upstream, close_connections
from mcp_expose.upstream.discovery import UpstreamTarget
from mcp_expose.upstream.legacy_sessions import sessions
from tests.live import LiveServer
from tests.upstream_servers import run_upstream

SETTINGS = changed_settings(UPSTREAM_ALLOW_LOOPBACK=True, UPSTREAM_BREAKER_THRESHOLD=100)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with run_upstream(tmp_path_factory.mktemp("legacy-sessions"), "hostile_server") as server:
        yield server


@pytest.fixture(autouse=True)
def settings() -> Iterator[None]:
    with override_settings(MCP_EXPOSE=SETTINGS):
        breaker().reset()
        yield


def opened(hostile: LiveServer) -> int:
    return int(httpx2.get(f"{hostile.base_url}/stats").json()["opened"])


def context(conversation: str, depth: int = 0) -> InvocationContext:
    return InvocationContext(
        tool_name="up.tool",
        principal=Principal(user=None, method="api_key"),
        chain=CallChain(conversation_id=conversation, depth=depth),
    )


def calls(hostile: LiveServer, plan: list[tuple[str, InvocationContext]]) -> list[Any]:
    """Each (tool, context) called in turn in one event loop, as a serving process makes them; each result or
    tool error, and how many sessions were open after each."""
    target = UpstreamTarget(1, "up", f"{hostile.base_url}/mcp/calls", "2025-11-25", call_timeout=2.0)
    seen: list[Any] = []

    async def run() -> None:
        try:
            for tool, ctx in plan:
                try:
                    seen.append(await call_upstream(UpstreamCall(target, tool), {"text": "hi"}, ctx))
                except ToolError as error:
                    seen.append(error)
                seen.append(sessions.open_count())
        finally:
            await close_connections()

    anyio.run(run)
    return seen


def test_calls_share_one_session_each_with_its_own_chain(hostile: LiveServer) -> None:
    before = opened(hostile)
    first, open_after_first, second, open_after_second = calls(
        hostile, [("fine_call", context("conv-a", 0)), ("fine_call", context("conv-b", 2))]
    )
    assert opened(hostile) == before + 1  # one initialize for both calls
    assert open_after_first == open_after_second == 1
    assert isinstance(first, ContentBundle) and isinstance(second, ContentBundle)
    headers = [json.loads(result.items[0].text)["headers"] for result in (first, second)]
    assert [(seen["x-conversation-id"], seen["x-agent-depth"]) for seen in headers] == [
        ("conv-a", "1"),
        ("conv-b", "3"),
    ]


def test_an_error_the_upstream_answered_keeps_the_session_and_a_transport_failure_ends_it(hostile: LiveServer) -> None:
    before = opened(hostile)
    seen = calls(
        hostile,
        [
            ("no_such_tool", context("c")),  # a JSON-RPC error: the session is fine
            ("fine_call", context("c")),
            ("closed", context("c")),  # the connection cut mid-answer: the session may be gone
            ("fine_call", context("c")),
        ],
    )
    refused, open_after_refusal, fine, _, cut, open_after_cut, fine_again, _ = seen
    assert isinstance(refused, UpstreamError) and open_after_refusal == 1
    assert isinstance(fine, ContentBundle)
    assert isinstance(cut, UpstreamUnavailable) and open_after_cut == 0
    assert isinstance(fine_again, ContentBundle)
    assert opened(hostile) == before + 2  # the first session, and the one after the cut


def test_a_session_the_upstream_forgot_is_replaced_and_the_call_sent_once_more(hostile: LiveServer) -> None:
    target = UpstreamTarget(1, "up", f"{hostile.base_url}/mcp/calls", "2025-11-25", call_timeout=2.0)
    results: list[Any] = []

    async def run() -> None:
        try:
            results.append(await call_upstream(UpstreamCall(target, "fine_call"), {}, context("c")))
            async with httpx2.AsyncClient() as http:
                await http.post(f"{hostile.base_url}/forget")  # as a restart of the upstream would
            results.append(await call_upstream(UpstreamCall(target, "fine_call"), {}, context("c")))
        finally:
            await close_connections()

    before = opened(hostile)
    anyio.run(run)
    assert all(isinstance(result, ContentBundle) for result in results)
    assert opened(hostile) == before + 2
    assert breaker().failures(1) == 0
