"""The upstream fast path against the SDK's client: one corpus of upstream answers, hostile ones included, read
both ways, with equal results and equal errors (`mcp_expose.upstream.fast_call` states the contract).

A real upstream process answers: what is compared is what each path makes of real HTTP answers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from django.test import override_settings

from mcp_expose.core.chain import CallChain
from mcp_expose.core.conf import changed_settings
from mcp_expose.core.context import InvocationContext
from mcp_expose.core.errors import ToolError
from mcp_expose.core.principal import Principal
from mcp_expose.upstream import calling
from mcp_expose.upstream.calling import UpstreamCall, breaker, call_upstream, close_connections
from mcp_expose.upstream.discovery import UpstreamTarget
from mcp_expose.upstream.fast_call import is_plain, names_header_arguments
from mcp_expose.upstream.results import OutputCheck
from tests.live import LiveServer
from tests.upstream_servers import run_upstream
from tests.upstreams.hostile_server import CALL_TOOLS

SETTINGS = changed_settings(UPSTREAM_ALLOW_LOOPBACK=True, UPSTREAM_MAX_RESULT_BYTES=1024 * 1024)
OUTPUT = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
# Every tool of the corpus, and the one the call names that no tool has.
CORPUS = [tool["name"] for tool in CALL_TOOLS] + ["no_such_tool"]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with run_upstream(tmp_path_factory.mktemp("fast-call"), "hostile_server") as server:
        yield server


def outcome(url: str, tool: str, *, fast: bool) -> tuple[Any, ...]:
    """What one call gave (its value, or its error's class, code, message and details), whether it took the fast
    path, and how it counted against the breaker."""
    target = UpstreamTarget(
        1, "up", url, "2026-07-28", connect_timeout=1.0, call_timeout=1.0, headers={"Authorization": "Bearer k"}
    )
    output = OutputCheck(OUTPUT) if tool.endswith("_output") else None
    planned = UpstreamCall(target, tool, output)
    context = InvocationContext(
        tool_name="up.tool", principal=Principal(user=None, method="api_key"), chain=CallChain("c1")
    )
    taken: list[str] = []
    exchange = calling.exchange

    async def counted(*args: Any, **kwargs: Any) -> Any:
        taken.append("fast")
        return await exchange(*args, **kwargs)

    async def run() -> Any:
        try:
            return await call_upstream(planned, {"text": "hi"}, context)
        finally:
            await close_connections()

    with override_settings(MCP_EXPOSE={**SETTINGS, "FAST_PATH": fast}):
        breaker().reset()
        calling.exchange = counted  # type: ignore[assignment]  (counts, and calls the real one)
        try:
            value: tuple[Any, ...] = ("value", repr(anyio.run(run)))
        except ToolError as error:
            value = ("error", type(error).__name__, error.code, error.message, error.details)
        finally:
            calling.exchange = exchange  # type: ignore[assignment]
        return value, bool(taken), breaker().failures(1)


@pytest.mark.parametrize("tool", CORPUS)
def test_the_fast_path_and_the_sdks_client_read_every_answer_alike(hostile: LiveServer, tool: str) -> None:
    url = f"{hostile.base_url}/mcp/calls"
    fast, took_fast, fast_failures = outcome(url, tool, fast=True)
    sdk, took_fast_anyway, sdk_failures = outcome(url, tool, fast=False)
    assert took_fast and not took_fast_anyway
    assert fast == sdk
    assert fast_failures == sdk_failures


def test_the_corpus_covers_results_errors_and_each_way_an_answer_is_read(hostile: LiveServer) -> None:
    """The differential test above proves little if every case failed alike: the corpus holds successes, errors
    the upstream answered, and failures of the upstream, over JSON and event streams."""
    url = f"{hostile.base_url}/mcp/calls"
    kinds = {tool: outcome(url, tool, fast=True)[0] for tool in ("fine_call", "sse_answer", "redirect_same")}
    assert all(kind[0] == "value" for kind in kinds.values()), kinds
    assert "after the notes" in kinds["sse_answer"][1] and "redirected" in kinds["redirect_same"][1]
    errors = {tool: outcome(url, tool, fast=True)[0] for tool in ("is_error", "error5xx", "no_such_tool", "hang")}
    assert [error[1] for error in errors.values()] == [
        "UpstreamError",
        "UpstreamUnavailable",
        "UpstreamError",
        "UpstreamTimeout",
    ]


def test_only_plain_calls_take_the_fast_path() -> None:
    with override_settings(MCP_EXPOSE={"FAST_PATH": True}):
        assert is_plain("2026-07-28", header_arguments=False, wants_progress=False)
        assert not is_plain("legacy", header_arguments=False, wants_progress=False)
        assert not is_plain("auto", header_arguments=False, wants_progress=False)
        assert not is_plain("2026-07-28", header_arguments=True, wants_progress=False)
        assert not is_plain("2026-07-28", header_arguments=False, wants_progress=True)
    with override_settings(MCP_EXPOSE={"FAST_PATH": False}):
        assert not is_plain("2026-07-28", header_arguments=False, wants_progress=False)
    routed = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}
    assert names_header_arguments(routed) and not names_header_arguments({"type": "object"})
