"""The workloads: what is sent, which tools each server exposes for it, and what a correct answer is.

Both servers get byte-identical request bodies (the bare server uses our wire names), so the
only difference is who answers. `check` inspects a full answer before every run; `comparable`
is what must be equal between the two servers (checked once per workload and era).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from .toolspec import BOOK_TOOL, ECHO_TOOL, MANY_TOOLS, READ_TOOL, VIEW_TOOL, gateway_name, many_tool_name

BOOK_IDS = range(1, 9)  # the demo seeds eight books
ECHO_TEXT = "hello bench"


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    method: str
    tool: str | None
    arguments: list[dict[str, Any]]
    ours_catalog: str  # a bench.catalogs profile
    bare_catalog: str  # a bench.bare_server catalog
    ok_marker: str  # must be in every response body (checked by wrk_mcp.lua)
    check: Callable[[dict[str, Any], dict[str, Any]], str | None]  # (result, arguments) -> problem
    oauth: bool = False
    # Ours serves the bare server's tools as an upstream (`bench.catalogs gateway`), as `gateway_name(name)`:
    # the bare server, called directly, is the baseline. `listed`: the names a listing must hold.
    gateway: bool = False
    listed: tuple[str, ...] = ()
    # "bare": the bare SDK server is the baseline; "http": our own server, the same view called over plain HTTP
    # (`GET {http_path}` for each argument set), is.
    baseline: str = "bare"
    http_path: str = ""
    # Ours with an OpenTelemetry SDK configured (bench/settings.py, MCP_BENCH_OTEL): every span and metric is made
    # and handed to a batch processor whose exporter drops them. Without it no SDK is configured, as by default.
    telemetry: bool = False

    def as_gateway(self) -> Workload:
        """The workload as our gateway is asked it: the same tools, under the upstream's namespace."""
        if not self.gateway:
            return self
        if self.method == "tools/list":
            names = [gateway_name(name) for name in self.listed]
            return replace(self, ok_marker=f'"{names[-1]}"', check=_listing(names))
        return replace(self, tool=gateway_name(self.tool))

    def params(self) -> list[dict[str, Any]]:
        if self.method == "tools/list":
            return [{}]
        return [{"name": self.tool, "arguments": arguments} for arguments in self.arguments]


def _listing(expected: list[str]) -> Callable[[dict[str, Any], dict[str, Any]], str | None]:
    def check(result: dict[str, Any], _: dict[str, Any]) -> str | None:
        names = sorted(tool.get("name", "") for tool in result.get("tools", []))
        return None if names == sorted(expected) else f"listed {len(names)} tools, not {sorted(expected)[:3]}…"

    return check


def _call(
    check_content: Callable[[Any, dict[str, Any]], bool],
) -> Callable[[dict[str, Any], dict[str, Any]], str | None]:
    def check(result: dict[str, Any], arguments: dict[str, Any]) -> str | None:
        if result.get("isError"):
            return f"tool error: {str(result)[:300]}"
        content = result.get("structuredContent")
        return None if check_content(content, arguments) else f"unexpected result: {str(content)[:300]}"

    return check


def _book(key: str) -> Callable[[Any, dict[str, Any]], bool]:
    return lambda content, arguments: isinstance(content, dict) and str(content.get("id")) == str(arguments[key])


def _echo(content: Any, _: dict[str, Any]) -> bool:
    return isinstance(content, dict) and content.get("message") == ECHO_TEXT


_echo_arguments = [{"message": ECHO_TEXT}]
MANY = [many_tool_name(index) for index in range(MANY_TOOLS)]

WORKLOADS: dict[str, Workload] = {
    workload.name: workload
    for workload in (
        Workload(
            "list2",
            "tools/list, 2 tools",
            "tools/list",
            None,
            [],
            "two",
            "two",
            f'"{BOOK_TOOL}"',
            _listing([BOOK_TOOL, ECHO_TOOL]),
        ),
        Workload(
            "list200", "tools/list, 200 tools", "tools/list", None, [], "many", "many", f'"{MANY[-1]}"', _listing(MANY)
        ),
        Workload(
            "echo",
            "tools/call echo",
            "tools/call",
            ECHO_TOOL,
            _echo_arguments,
            "calls",
            "calls",
            ECHO_TEXT,
            _call(_echo),
        ),
        Workload(
            "orm",
            "tools/call one-row read (bare: the same ORM read)",
            "tools/call",
            READ_TOOL,
            [{"book_id": book} for book in BOOK_IDS],
            "calls",
            "orm",
            '"isbn"',
            _call(_book("book_id")),
        ),
        Workload(
            "orm_raw",
            "tools/call one-row read (bare: raw sqlite3)",
            "tools/call",
            READ_TOOL,
            [{"book_id": book} for book in BOOK_IDS],
            "calls",
            "calls",
            '"isbn"',
            _call(_book("book_id")),
        ),
        Workload(
            "drf",
            "tools/call DRF view",
            "tools/call",
            VIEW_TOOL,
            [{"pk": str(book)} for book in BOOK_IDS],
            "calls",
            "calls",
            "author_detail",
            _call(_book("pk")),
        ),
        Workload(
            "drf_http",
            "tools/call DRF view (baseline: GET of the same view, same process)",
            "tools/call",
            VIEW_TOOL,
            [{"pk": str(book)} for book in BOOK_IDS],
            "calls",
            "calls",
            '"author_detail"',
            _call(_book("pk")),
            oauth=True,
            baseline="http",
            http_path="/api/books/{pk}/",
        ),
        Workload(
            "oauth",
            "tools/call echo, OAuth token",
            "tools/call",
            ECHO_TOOL,
            _echo_arguments,
            "calls",
            "oauth",
            ECHO_TEXT,
            _call(_echo),
            oauth=True,
        ),
        Workload(
            "listup",
            "tools/list, 200 upstream tools",
            "tools/list",
            None,
            [],
            "none",
            "many",
            f'"{MANY[-1]}"',
            _listing(MANY),
            gateway=True,
            listed=tuple(MANY),
        ),
    )
}


# The echo call through our gateway: the same request, the tool served by the bare server as our upstream.
WORKLOADS["proxy"] = replace(WORKLOADS["echo"], name="proxy", title="tools/call echo through our gateway", gateway=True)
# The echo call with OpenTelemetry recording: run beside `echo` (`--only echo --only echo_otel`), it says what
# tracing costs against the same bare server in the same run.
WORKLOADS["echo_otel"] = replace(
    WORKLOADS["echo"], name="echo_otel", title="tools/call echo, with an OpenTelemetry SDK configured", telemetry=True
)


def comparable(workload: Workload, result: dict[str, Any]) -> Any:
    """The part of an answer both servers must agree on."""
    if workload.method == "tools/list":
        # Through the gateway the names carry the upstream's namespace, and the upstream's hints are replaced.
        keys = ("name", "description", "inputSchema", "outputSchema") + (() if workload.gateway else ("annotations",))
        tools = [{key: tool.get(key) for key in keys} for tool in result.get("tools", [])]
        for tool in tools:
            tool["name"] = str(tool["name"]).removeprefix(gateway_name(""))
        return sorted(tools, key=str)
    content = dict(result.get("structuredContent") or {})
    content.pop("caller", None)  # who the server thinks called: ours knows the user, bare has no users
    return content


def target(workload: Workload, era: str, concurrency: int) -> tuple[float | None, str]:
    """The issue's target for ours/baseline req/s in this row, and why (None: this row has none). Where the
    harness's ceiling is below it, `report` lowers it to CEILING_SHARE of the ceiling's rate."""
    if workload.name == "echo":
        return 2.0, "echo ≥ 2× bare"
    if workload.name in ("list200", "listup"):
        if concurrency == 1:
            return None, f"≥ {CEILING_SHARE}× ceiling"  # judged against the ceiling alone
        return 20.0, "list 200 ≥ 20× bare"
    if workload.name == "orm":
        return 1.2, "ORM read ≥ 1.2× bare's ORM read"
    if workload.name == "drf_http":
        return 1.0, "≥ 1× the view over HTTP"
    if workload.name == "proxy":  # judged by CPU and added latency against the local echo (`report.gateway_rows`)
        return None, "see the gateway table"
    return None, ""


# The gateway's targets (`report.gateway_rows`): our CPU per proxied echo at most this many times our CPU per local
# echo in the same run, and a proxied call's p50 at one connection at most this many ms over calling the upstream
# directly.
PROXY_CPU_TARGET = 2.0
PROXY_ADDED_P50_MS = 1.0
# A row whose target the ceiling (the raw app sending our bytes) cannot reach is judged at this share of it.
CEILING_SHARE = 0.75
# Peers: ours must serve at least this many times each peer's rate, on every workload, era and concurrency.
PEER_TARGET = 2.0
# The leak check: RSS after LEAK_CALLS[1] calls within this share of RSS after LEAK_CALLS[0].
LEAK_CALLS = (20_000, 200_000)
LEAK_TOLERANCE = 0.02
