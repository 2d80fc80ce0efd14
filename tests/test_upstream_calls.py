"""Calls to upstream tools, against real upstream processes: pinned, bounded both ways, every failure a tool error."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from django.test import override_settings

from mcp_expose.core.chain import CallChain, DepthExceeded
from mcp_expose.core.conf import changed_settings
from mcp_expose.core.content import ContentBundle
from mcp_expose.core.context import InvocationContext
from mcp_expose.core.errors import ToolError, UpstreamError, UpstreamUnavailable
from mcp_expose.core.principal import Principal
from mcp_expose.upstream.breaker import CircuitBreaker
from mcp_expose.upstream.calling import UpstreamCall, UpstreamTimeout, breaker, call_upstream, close_connections
from mcp_expose.upstream.discovery import UpstreamTarget
from mcp_expose.upstream.pool import pool
from mcp_expose.upstream.results import OutputCheck
from tests.live import LiveServer
from tests.upstream_servers import run_upstream

SETTINGS = changed_settings(
    UPSTREAM_ALLOW_LOOPBACK=True, UPSTREAM_BREAKER_THRESHOLD=3, UPSTREAM_MAX_RESULT_BYTES=1024 * 1024
)
OUTPUT = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("upstream-calls")


@pytest.fixture(scope="module")
def hostile(files: Path) -> Iterator[LiveServer]:
    with run_upstream(files, "hostile_server") as server:
        yield server


@pytest.fixture(scope="module")
def bare(files: Path) -> Iterator[LiveServer]:
    with run_upstream(files, "bare_server") as server:
        yield server


@pytest.fixture(autouse=True)
def fresh_breaker() -> Iterator[None]:
    with override_settings(MCP_EXPOSE=SETTINGS):
        breaker().reset()
        yield
        breaker().reset()


def context(depth: int = 0, progress: list[Any] | None = None) -> InvocationContext:
    async def report(value: float, total: float | None, message: str | None) -> None:
        if progress is not None:
            progress.append((value, total, message))

    return InvocationContext(
        tool_name="up.tool",
        principal=Principal(user=None, method="api_key"),
        chain=CallChain(conversation_id="conv-1", depth=depth),
        report_progress_callback=report,
    )


def call(
    url: str,
    tool: str,
    arguments: dict[str, Any] | None = None,
    *,
    pk: int = 1,
    protocol: str = "2026-07-28",
    output: dict[str, Any] | None = None,
    timeout: float = 2.0,
    ctx: InvocationContext | None = None,
) -> Any:
    target = UpstreamTarget(
        pk,
        "up",
        url,
        protocol,
        connect_timeout=2.0,
        call_timeout=timeout,
        headers={"Authorization": "Bearer upstream-secret"},
    )
    planned = UpstreamCall(target, tool, OutputCheck(output) if output is not None else None)

    async def run() -> Any:
        try:
            return await call_upstream(planned, arguments or {}, ctx or context())
        finally:
            await close_connections()

    return anyio.run(run)


def calls_url(hostile: LiveServer) -> str:
    return f"{hostile.base_url}/mcp/calls"


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25", "auto"])
def test_a_call_reaches_the_bare_server_in_each_era(bare: LiveServer, protocol: str) -> None:
    value = call(bare.mcp_url, "add", {"a": 2, "b": 3}, protocol=protocol)
    # The SDK server returns the int as structured content ({"result": 5}) and as text.
    assert value == {"result": 5}


def test_the_call_carries_the_rows_headers_and_the_chain_one_deeper_never_the_callers(hostile: LiveServer) -> None:
    value = call(calls_url(hostile), "fine_call", {"text": "hi"}, ctx=context(depth=1))
    assert isinstance(value, ContentBundle)
    echoed = json.loads(value.items[0].text)
    assert echoed["arguments"] == {"text": "hi"}
    assert echoed["headers"] == {
        "x-agent-depth": "2",
        "x-conversation-id": "conv-1",
        "authorization": "Bearer upstream-secret",
    }


def test_a_call_past_the_depth_cap_is_refused_before_it_leaves(hostile: LiveServer) -> None:
    with override_settings(MCP_EXPOSE={**SETTINGS, "MAX_AGENT_DEPTH": 2}):
        with pytest.raises(DepthExceeded):
            call(calls_url(hostile), "fine_call", ctx=context(depth=2))
        assert breaker().failures(1) == 0


@pytest.mark.parametrize(
    ("tool", "error", "words"),
    [
        ("hang", UpstreamTimeout, "did not answer within 1 seconds"),
        ("oversized", UpstreamError, "over 1048576 bytes"),
        ("error5xx", UpstreamUnavailable, "HTTP 502"),
        ("closed", UpstreamUnavailable, "could not be used"),
        ("malformed", UpstreamError, "cannot be read"),
        ("deep_result", UpstreamError, "cannot be read"),
        ("unknown_content", UpstreamError, "cannot be read"),
    ],
)
def test_each_hostile_answer_ends_as_a_tool_error_and_counts_against_the_server(
    hostile: LiveServer, tool: str, error: type[ToolError], words: str
) -> None:
    with pytest.raises(error) as raised:
        call(calls_url(hostile), tool, timeout=1.0)
    assert words in raised.value.message
    assert raised.value.details["upstream"] == "up"
    assert "Traceback" not in raised.value.message and "upstream-secret" not in raised.value.message
    assert breaker().failures(1) == 1


@pytest.mark.parametrize(
    ("tool", "error", "words"),
    [
        ("oversized", UpstreamError, "its answer is over 1048576 bytes"),
        ("malformed", UpstreamError, "cannot be read"),
        ("unknown_content", UpstreamError, "cannot be read"),
        ("error5xx", UpstreamUnavailable, "HTTP 502"),
    ],
)
def test_a_2025_11_25_upstream_fails_as_a_2026_one_does_with_no_traceback_logged(
    hostile: LiveServer, tool: str, error: type[ToolError], words: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG), pytest.raises(error) as raised:
        call(calls_url(hostile), tool, protocol="2025-11-25")
    assert words in raised.value.message
    assert breaker().failures(1) == 1
    # The SDK's own records of what the upstream sent say so in a line, never with a traceback.
    assert [record.getMessage() for record in caplog.records if record.exc_info or record.exc_text] == []


def test_an_upstream_tool_error_is_passed_on_bounded_marked_and_not_counted(hostile: LiveServer) -> None:
    with pytest.raises(UpstreamError) as raised:
        call(calls_url(hostile), "is_error")
    message = raised.value.message
    assert message.startswith("The upstream server 'up' reported an error: Ticket 12 is locked.")
    assert "\x1b" not in message and len(message) < 2100
    assert raised.value.details == {"source": "upstream", "upstream": "up"}
    assert breaker().failures(1) == 0


def test_structured_content_is_checked_against_the_approved_output_schema(hostile: LiveServer) -> None:
    assert call(calls_url(hostile), "good_output", output=OUTPUT) == {"n": 7}
    with pytest.raises(UpstreamError) as raised:
        call(calls_url(hostile), "bad_output", output=OUTPUT)
    assert "$.n: fails the 'type' rule of the approved output schema" in raised.value.message
    assert "seven" not in raised.value.message


def test_the_breaker_opens_after_repeated_failures_and_fails_fast(hostile: LiveServer) -> None:
    for _ in range(3):
        with pytest.raises(UpstreamUnavailable):
            call(calls_url(hostile), "error5xx")
    assert breaker().state(1) == "open"
    with pytest.raises(UpstreamUnavailable) as raised:
        call(calls_url(hostile), "fine_call")  # would succeed: the breaker answers first
    assert "failed repeatedly just now" in raised.value.message
    assert 0 < raised.value.retry_after <= 30
    # Another server is not affected.
    assert isinstance(call(calls_url(hostile), "fine_call", pk=2), ContentBundle)


def test_a_half_open_breaker_lets_one_probe_through_and_closes_on_success() -> None:
    now = [0.0]
    guard = CircuitBreaker(2, 10, clock=lambda: now[0])
    guard.failed(7)
    assert guard.retry_after(7) is None  # one failure: still closed
    assert guard.failed(7) is True
    assert guard.retry_after(7) == 10
    now[0] = 10.0
    assert guard.retry_after(7) is None  # the probe
    assert guard.retry_after(7) == 10  # others wait for it
    guard.succeeded(7)
    assert guard.state(7) == "closed" and guard.retry_after(7) is None
    guard.failed(7), guard.failed(7)
    now[0] = 20.0
    assert guard.retry_after(7) is None
    assert guard.failed(7) is True  # a failed probe opens it again
    assert guard.state(7) == "open"


def test_closing_the_pools_survives_each_failure(bare: LiveServer, caplog: pytest.LogCaptureFixture) -> None:
    targets = [UpstreamTarget(pk, f"s{pk}", bare.mcp_url, "2026-07-28") for pk in (11, 12, 13)]

    class Broken(Exception):
        pass

    async def run() -> int:
        for target in targets:
            async with pool.leased(target):
                pass
        transport = pool.of_this_loop()[12].transport

        async def fail() -> None:
            raise Broken("cannot close")

        transport.aclose = fail  # type: ignore[method-assign]
        return await pool.aclose()

    assert anyio.run(run) == 2
    assert "Closing the connections to upstream s12 failed: Broken" in caplog.text
    assert not pool._pools  # the loop's pools are gone with it


@pytest.fixture(scope="module")
def talkative(files: Path) -> Iterator[LiveServer]:
    with run_upstream(files, "bare_server", UPSTREAM_CANCEL_DIR=str(files)) as server:
        yield server


def test_the_upstreams_progress_reaches_our_caller(talkative: LiveServer) -> None:
    progress: list[Any] = []
    assert call(talkative.mcp_url, "slow", {"steps": 3}, ctx=context(progress=progress)) == {"result": "done"}
    assert progress == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


def test_cancelling_our_call_cancels_the_upstream_request(talkative: LiveServer, files: Path) -> None:
    marker = files / "cancelled-1"
    target = UpstreamTarget(5, "up", talkative.mcp_url, "2026-07-28", call_timeout=30.0)

    async def run() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(call_upstream, UpstreamCall(target, "wait"), {"marker": marker.name}, context())
            # Cancel once the upstream runs the tool (it says so in a file).
            with anyio.fail_after(10):
                while not (files / f"{marker.name}.started").exists():
                    await anyio.sleep(0.05)
            group.cancel_scope.cancel()
        with anyio.fail_after(10):
            while not marker.exists():
                await anyio.sleep(0.05)
        await close_connections()

    anyio.run(run)
    assert marker.read_text() == "cancelled"


def test_a_probe_the_upstream_answers_with_an_error_closes_the_breaker(hostile: LiveServer) -> None:
    for _ in range(3):
        with pytest.raises(UpstreamUnavailable):
            call(calls_url(hostile), "error5xx")
    breaker()._states[1].opened_at -= 60  # the cooldown has passed (the breaker's own clock, moved back)
    with pytest.raises(UpstreamError, match="refused the call: Unknown tool: nope"):
        call(calls_url(hostile), "nope")  # the probe: an answer, so the upstream is up
    assert breaker().state(1) == "closed"
    assert isinstance(call(calls_url(hostile), "fine_call"), ContentBundle)


def test_a_cancelled_probe_lets_the_next_call_probe() -> None:
    guard = CircuitBreaker(1, 10, clock=lambda: 100.0)
    guard.failed(3)
    guard._states[3].opened_at = 0.0
    assert guard.retry_after(3) is None  # the probe
    guard.released(3)  # cancelled before it said anything
    assert guard.retry_after(3) is None  # the next call probes instead of waiting for ever
