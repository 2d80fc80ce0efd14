"""OpenTelemetry on every path, against the in-process live server and the SDK's client over HTTP: one server span
per request (ours on the fast path, the SDK's on its path, never both), the MCP conventions' names and attributes,
the client's trace continued from `_meta` or the `traceparent` header, children for the steps of a call, the
metrics, and no secret in anything exported."""

from __future__ import annotations

import io
import json
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from wsgiref.util import setup_testing_defaults

import anyio
import httpx2
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.test import override_settings
from mcp import MCPError
from mcp_types import CallToolResult
from opentelemetry import metrics, trace
from opentelemetry.instrumentation.django import DjangoInstrumentor
from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased, Sampler, SamplingResult
from opentelemetry.trace import SpanKind, StatusCode

import mcp_expose
from mcp_expose.core import telemetry
from mcp_expose.core.context import InvocationContext
from mcp_expose.core.principal import Principal
from mcp_expose.declare.registry import CapabilityRegistry
from mcp_expose.models import ExposedTool, ToolTask
from mcp_expose.serving import task_worker
from mcp_expose.testing.client import ERA_MODES, McpTestClient
from mcp_expose.testing.live import LiveMcpServer
from mcp_expose.upstream.calling import UpstreamCall, breaker, call_upstream, close_connections
from mcp_expose.upstream.discovery import UpstreamTarget

from .live import LiveServer, jsonrpc_body, modern_headers
from .task_client import TasksExtension
from .upstream_servers import run_upstream

pytestmark = pytest.mark.anyio

EXPORTER = InMemorySpanExporter()
# Delta points: each collection says what happened since the one before (the fixture collects at the start).
READER = InMemoryMetricReader(
    preferred_temporality={Counter: AggregationTemporality.DELTA, Histogram: AggregationTemporality.DELTA}
)


class WhileATestRuns(Sampler):
    """Records only while a test of this module runs. The API's proxy tracers (ours, the SDK's) keep the provider
    they first found; without this, every later test of the process would record into the exporter."""

    on = False

    def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
        # Off, a span follows its parent's decision (as the default sampler does), so that a client elsewhere in the
        # process that sends a sampled trace context has it continued; with no parent, nothing is recorded.
        return ALWAYS_ON.should_sample(*args, **kwargs) if self.on else OTHERWISE.should_sample(*args, **kwargs)

    def get_description(self) -> str:
        return "WhileATestRuns"


OTHERWISE = ParentBased(ALWAYS_OFF)
SAMPLER = WhileATestRuns()
TRACER_PROVIDER = TracerProvider(sampler=SAMPLER)
TRACER_PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))
METER_PROVIDER = MeterProvider(metric_readers=[READER])


@pytest.fixture
def exported(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The SDK's in-memory exporter and reader behind the global providers, for this test only: the other tests of
    this process run with no provider, as a deployment without OpenTelemetry does. (The API lets a process set its
    globals once; the test swaps the globals it reads, and puts back none afterwards.)"""
    from opentelemetry.metrics import _internal as metrics_globals

    monkeypatch.setattr(trace, "_TRACER_PROVIDER", TRACER_PROVIDER)
    monkeypatch.setattr(metrics_globals, "_METER_PROVIDER", None)
    if not METER_PROVIDER_SET:
        metrics.set_meter_provider(METER_PROVIDER)  # the first time: binds the instruments made before it
        METER_PROVIDER_SET.append(True)
    metrics_globals._METER_PROVIDER = METER_PROVIDER
    EXPORTER.clear()
    READER.get_metrics_data()  # forget what earlier tests measured
    SAMPLER.on = True
    try:
        yield EXPORTER
    finally:
        SAMPLER.on = False
        EXPORTER.clear()


# Whether the meter provider was set in this process (the API's one `set_meter_provider`).
METER_PROVIDER_SET: list[bool] = []


def spans_named(name: str, kind: SpanKind | None = None) -> list[ReadableSpan]:
    return [span for span in EXPORTER.get_finished_spans() if span.name == name and (kind is None or span.kind == kind)]


def children_of(parent: ReadableSpan) -> dict[str, ReadableSpan]:
    assert parent.context is not None
    return {
        span.name: span
        for span in EXPORTER.get_finished_spans()
        if span.parent is not None and span.parent.span_id == parent.context.span_id
    }


def scope_of(span: ReadableSpan) -> str | None:
    """Who made the span: `mcp_expose`, or the SDK (`mcp-python-sdk`)."""
    return span.instrumentation_scope.name if span.instrumentation_scope is not None else None


def assert_only_our_listed_names() -> None:
    """Every span and attribute name of ours that was exported is one the how-to page lists (`telemetry.NAMES`)."""
    for span in EXPORTER.get_finished_spans():
        if span.name.startswith("mcp_expose."):
            assert span.name in telemetry.SPANS
        assert {key for key in span.attributes or {} if key.startswith("mcp_expose.")} <= telemetry.ATTRIBUTES


def only_server_span(name: str) -> ReadableSpan:
    servers = [span for span in EXPORTER.get_finished_spans() if span.kind == SpanKind.SERVER]
    assert [span.name for span in servers] == [name], [span.name for span in servers]
    return servers[0]


@asynccontextmanager
async def reader_client(mcp_live: Any, settings: Any, fast_path: bool = True, **options: Any) -> AsyncIterator[Any]:
    """The SDK's client, as a reader holding library:read, with the fast path on or off."""
    settings.MCP_EXPOSE = {**settings.MCP_EXPOSE, "FAST_PATH": fast_path}
    reader = await sync_to_async(User.objects.get_or_create)(username="reader")
    async with mcp_live.connect(reader[0], ["library:read"], **options) as client:
        yield client


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "sdk-path"])
@pytest.mark.parametrize("era", sorted(ERA_MODES))
async def test_a_call_has_one_server_span_by_the_conventions_with_its_steps_as_children(
    mcp_live: Any, settings: Any, exported: InMemorySpanExporter, era: str, fast_path: bool
) -> None:
    async with reader_client(mcp_live, settings, fast_path, era=era) as client:
        await client.list_tools()
        EXPORTER.clear()
        echoed = await client.call_tool("library.echo", {"message": "traced"})
    assert echoed.structured_content["message"] == "traced"

    server = only_server_span("tools/call library.echo")
    assert scope_of(server) == ("mcp_expose" if fast_path else "mcp-python-sdk")  # one span: whoever answered
    attributes = dict(server.attributes or {})
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["mcp.protocol.version"] == era
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["gen_ai.tool.name"] == "library.echo"
    assert attributes["jsonrpc.request.id"]
    assert attributes["mcp_expose.outcome"] == "ok"
    assert "error.type" not in attributes
    # The SDK client's own span sent it, and the server's continues that trace (`_meta`'s traceparent).
    (sent,) = spans_named("MCP send tools/call library.echo", SpanKind.CLIENT)
    assert server.parent is not None and sent.context is not None
    assert (server.parent.trace_id, server.parent.span_id) == (sent.context.trace_id, sent.context.span_id)
    steps = children_of(server)
    assert {
        "mcp_expose.authenticate",
        "mcp_expose.policy",
        "mcp_expose.validate_arguments",
        "mcp_expose.invoke",
    } <= set(steps), sorted(steps)
    assert steps["mcp_expose.authenticate"].attributes == {"mcp_expose.auth.method": "api_key"}
    assert_only_our_listed_names()
    assert dict(steps["mcp_expose.invoke"].attributes or {}) == {"gen_ai.tool.name": "library.echo"}


TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
CLIENT_SPAN_ID = "b7ad6b7169203331"


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "sdk-path"])
async def test_a_traceparent_header_continues_the_clients_trace_when_meta_has_none(
    mcp_live: Any, settings: Any, exported: InMemorySpanExporter, fast_path: bool
) -> None:
    settings.MCP_EXPOSE = {**settings.MCP_EXPOSE, "FAST_PATH": fast_path}
    key = await sync_to_async(mcp_live.create_key)(await sync_to_async(User.objects.create_user)("reader"))
    headers = {
        **modern_headers("tools/call", key, name="library.echo"),
        "traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN_ID}-01",
    }
    async with httpx2.AsyncClient() as http:
        answer = await http.post(
            mcp_live.url,
            content=jsonrpc_body("tools/call", {"name": "library.echo", "arguments": {"message": "hi"}}),
            headers=headers,
        )
    assert answer.status_code == 200, answer.text
    server = only_server_span("tools/call library.echo")
    assert scope_of(server) == ("mcp_expose" if fast_path else "mcp-python-sdk")
    assert server.parent is not None
    assert (f"{server.parent.trace_id:032x}", f"{server.parent.span_id:016x}") == (TRACE_ID, CLIENT_SPAN_ID)
    assert server.parent.is_remote


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "sdk-path"])
async def test_a_tool_error_and_a_protocol_error_are_error_types_as_the_sdk_records_them(
    mcp_live: Any, settings: Any, exported: InMemorySpanExporter, fast_path: bool
) -> None:
    async with reader_client(mcp_live, settings, fast_path) as client:
        await client.list_tools()
        EXPORTER.clear()
        missing = await client.call_tool("library.get_book", {"book_id": 987654})
        assert missing.is_error
        failed = only_server_span("tools/call library.get_book")
        EXPORTER.clear()
        with pytest.raises(MCPError):
            await client.call_tool("library.no_such_tool", {})
        refused = only_server_span("tools/call library.no_such_tool")
    assert failed.attributes is not None and failed.attributes["error.type"] == "tool_error"
    assert failed.attributes["mcp_expose.outcome"] == "not_found"
    assert failed.status.status_code == StatusCode.ERROR
    assert refused.attributes is not None and refused.attributes["error.type"] == "-32602"
    assert refused.status.status_code == StatusCode.ERROR


def measured() -> dict[str, list[Any]]:
    """Each metric's points since the last collection, by name."""
    data = READER.get_metrics_data()
    points: dict[str, list[Any]] = {}
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points.setdefault(metric.name, []).extend(metric.data.data_points)
    return points


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "sdk-path"])
async def test_calls_are_measured_by_duration_and_by_outcome(
    mcp_live: Any, settings: Any, exported: InMemorySpanExporter, fast_path: bool
) -> None:
    async with reader_client(mcp_live, settings, fast_path) as client:
        await client.call_tool("library.echo", {"message": "one"})
        await client.call_tool("library.echo", {"message": "two"})
        await client.call_tool("library.get_book", {"book_id": 987654})
        with pytest.raises(MCPError):
            await client.call_tool("library.no_such_tool", {})
    points = measured()
    durations = {
        (point.attributes.get("gen_ai.tool.name"), point.attributes.get("error.type")): point.count
        for point in points["mcp.server.operation.duration"]
        if point.attributes.get("mcp.method.name") == "tools/call"
    }
    # A name no tool has is not a series of its own.
    assert durations == {("library.echo", None): 2, ("library.get_book", "tool_error"): 1, (None, "-32602"): 1}
    (echo,) = [
        point
        for point in points["mcp.server.operation.duration"]
        if point.attributes.get("gen_ai.tool.name") == "library.echo"
    ]
    assert echo.attributes["mcp.protocol.version"] == "2026-07-28"
    assert 0 < echo.sum < 30
    calls = {
        (point.attributes["gen_ai.tool.name"], point.attributes["mcp_expose.outcome"]): point.value
        for point in points["mcp_expose.tool.calls"]
    }
    assert calls == {("library.echo", "ok"): 2, ("library.get_book", "not_found"): 1, ("_unknown", "unknown_tool"): 1}
    assert [point.value for point in points["mcp_expose.usage.queue"]] == [0]
    assert [point.value for point in points["mcp_expose.usage.spilled"]] == [0]


SECRET = "s3cr3t-Zebra-9741"


def everything_exported() -> str:
    """Every span and metric point of this test, as the SDK's exporters would write them."""
    spans = "\n".join(span.to_json() for span in EXPORTER.get_finished_spans())
    data = READER.get_metrics_data()
    return spans + (data.to_json() if data is not None else "")


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "sdk-path"])
async def test_no_secret_reaches_a_span_or_a_metric_unless_the_row_logs_arguments(
    mcp_live: Any, settings: Any, exported: InMemorySpanExporter, fast_path: bool
) -> None:
    """A secret in the credential, a header, the arguments, `_meta`, the result and a tool's error: none is
    exported. With the row's argument logging on, the arguments are, redacted as the usage log redacts them."""
    settings.MCP_EXPOSE = {**settings.MCP_EXPOSE, "FAST_PATH": fast_path}
    reader = await sync_to_async(User.objects.create_user)("reader")
    key = await sync_to_async(mcp_live.create_key)(reader)
    headers = {
        **modern_headers("tools/call", key, name="library.echo"),
        "X-Shop-Token": SECRET,
        "traceparent": f"00-{SECRET}-{SECRET}-01",
        "Cookie": f"sessionid={SECRET}",
    }
    calls = [
        ("library.echo", {"message": SECRET}),  # in the arguments, and so in the result
        ("library.get_book", {"book_id": SECRET}),  # refused: the arguments' error quotes the value
        ("library.search_books", {"query": SECRET}),
    ]
    async with httpx2.AsyncClient() as http:
        for name, arguments in calls:
            body = json.loads(jsonrpc_body("tools/call", {"name": name, "arguments": arguments}))
            body["params"]["_meta"]["traceparent"] = SECRET
            body["params"]["_meta"]["note"] = SECRET
            answer = await http.post(mcp_live.url, json=body, headers={**headers, "Mcp-Name": name})
            assert answer.status_code in (200, 400), answer.text
    exported_text = everything_exported()
    assert "tools/call library.echo" in exported_text
    assert SECRET not in exported_text
    assert key not in exported_text

    row = await sync_to_async(ExposedTool.objects.get)(key="library.echo")
    row.log_argument_values = True
    await sync_to_async(row.save)()
    EXPORTER.clear()
    async with mcp_live.connect(reader) as client:
        await client.call_tool("library.echo", {"message": "shown"})
    (server,) = spans_named("tools/call library.echo", SpanKind.SERVER)
    assert server.attributes is not None
    assert json.loads(str(server.attributes["mcp_expose.tool.arguments"])) == {"message": "shown"}


async def test_a_tasks_run_is_a_span_of_its_own_linked_to_the_call_that_made_it(
    mcp_live: Any, exported: InMemorySpanExporter
) -> None:
    reader = await sync_to_async(User.objects.create_user)("reader")
    tasks = TasksExtension(follow=False)
    async with mcp_live.connect(reader, ["library:read"], extensions=[tasks]) as client:
        await client.call_tool("library.shelf_report", {})
    [created] = tasks.created
    (made,) = spans_named("tools/call library.shelf_report", SpanKind.SERVER)
    EXPORTER.clear()
    await task_worker.run(created.task_id)  # what the Tasks framework's worker runs

    (run,) = spans_named("tools/call library.shelf_report", SpanKind.CONSUMER)
    assert run.attributes is not None and run.attributes["mcp_expose.task.id"] == created.task_id
    assert run.attributes["gen_ai.tool.name"] == "library.shelf_report"
    assert run.parent is None  # a trace of its own, linked to the call that made the task
    assert made.context is not None
    assert [(link.context.trace_id, link.context.span_id) for link in run.links] == [
        (made.context.trace_id, made.context.span_id)
    ]
    assert "mcp_expose.invoke" in children_of(run)
    assert (await sync_to_async(ToolTask.objects.get)(id=created.task_id)).status == "completed"


@pytest.fixture(scope="module")
def traced_upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The bare SDK server as a real process, with its `traced` tool (it says back the trace context it got): the
    hop is the subject, and what arrives must have crossed a real HTTP connection into another interpreter, whose
    own OpenTelemetry state cannot be the test's."""
    with run_upstream(tmp_path_factory.mktemp("traced-upstream"), "bare_server", UPSTREAM_TRACE_TOOL="1") as server:
        yield server


@pytest.mark.parametrize(
    ("version", "fast_path", "client_scope", "client_span"),
    [
        ("2026-07-28", True, "mcp_expose", "tools/call traced"),
        ("2026-07-28", False, "mcp-python-sdk", "MCP send tools/call traced"),
        ("2025-11-25", True, "mcp-python-sdk", "MCP send tools/call traced"),
    ],
    ids=["fast-call", "sdk-client", "legacy-upstream"],
)
def test_an_upstream_call_continues_the_trace_under_one_client_span(
    traced_upstream: LiveServer,
    exported: InMemorySpanExporter,
    version: str,
    fast_path: bool,
    client_scope: str,
    client_span: str,
) -> None:
    """The gateway's hop: a client span under the call's span (ours when the fast call sends it by hand, the SDK
    client's otherwise), whose context the upstream receives in `_meta`."""
    target = UpstreamTarget(1, "up", f"{traced_upstream.base_url}/mcp", version, connect_timeout=5.0, call_timeout=5.0)
    context = InvocationContext(tool_name="up.traced", principal=Principal(user=None, method="api_key"))

    async def call() -> Any:
        try:
            with TRACER_PROVIDER.get_tracer("test").start_as_current_span("tools/call up.traced") as server:
                return server, await call_upstream(UpstreamCall(target, "traced", None), {}, context)
        finally:
            await close_connections()

    with override_settings(
        MCP_EXPOSE={**django_settings.MCP_EXPOSE, "FAST_PATH": fast_path, "UPSTREAM_ALLOW_LOOPBACK": True}
    ):
        breaker().reset()
        server, received = anyio.run(call)
    # (A 2025-11-25 upstream's session opens with `initialize`, a request and span of its own.)
    clients = [
        span for span in EXPORTER.get_finished_spans() if span.kind == SpanKind.CLIENT and "tools/call" in span.name
    ]
    assert [(span.name, scope_of(span)) for span in clients] == [(client_span, client_scope)]
    (sent,) = clients
    assert sent.parent is not None and sent.parent.span_id == server.get_span_context().span_id
    assert received["result"].split("-")[1:3] == [f"{sent.context.trace_id:032x}", f"{sent.context.span_id:016x}"]


def test_the_wsgi_entry_answers_under_the_same_server_span(
    transactional_db: None, exported: InMemorySpanExporter
) -> None:
    """The WSGI entry drives the same gate and paths, one request at a time: the same span, the header's trace."""
    from mcp_expose.models import ApiKey
    from mcp_expose.wsgi import get_wsgi_application

    reader = User.objects.create_user("reader")
    key = ApiKey.create_key(user=reader, name="wsgi", scopes="library:read")[1]
    body = jsonrpc_body("tools/call", {"name": "library.echo", "arguments": {"message": "wsgi"}}).encode()
    headers = {
        **modern_headers("tools/call", key, name="library.echo"),
        "traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN_ID}-01",
    }
    environ: dict[str, Any] = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/mcp",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
    }
    setup_testing_defaults(environ)
    environ["CONTENT_TYPE"] = headers.pop("Content-Type")
    environ.update({"HTTP_" + name.upper().replace("-", "_"): value for name, value in headers.items()})
    started: list[str] = []
    application = get_wsgi_application(lambda environ, start_response: [])
    try:
        answer = b"".join(application(environ, lambda status, headers, exc_info=None: started.append(status)))
    finally:
        application.bridge.shutdown()
    assert started == ["200 OK"], answer
    assert json.loads(answer)["result"]["structuredContent"]["message"] == "wsgi"
    server = only_server_span("tools/call library.echo")
    assert server.parent is not None and f"{server.parent.trace_id:032x}" == TRACE_ID
    assert {"mcp_expose.authenticate", "mcp_expose.invoke"} <= set(children_of(server))


async def test_a_views_django_span_nests_under_the_calls_invoke_span(
    mcp_live: Any, exported: InMemorySpanExporter
) -> None:
    """Where a project traces Django (opentelemetry-instrumentation-django), a view-backed call runs its tracing
    middleware too: the view's span is made as over HTTP, inside the call, and no second server span appears."""
    instrumentor = DjangoInstrumentor()
    await sync_to_async(instrumentor.instrument)(tracer_provider=TRACER_PROVIDER)
    try:
        reader = await sync_to_async(User.objects.create_user)("reader")
        async with mcp_live.connect(reader, ["library:read"]) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            (books,) = [name for name in names if name.endswith("books.list")]
            EXPORTER.clear()
            listed = await client.call_tool(books, {"page_size": 2})
    finally:
        await sync_to_async(instrumentor.uninstrument)()
    assert not listed.is_error
    server = only_server_span(f"tools/call {books}")
    invoke = children_of(server)["mcp_expose.invoke"]
    (view,) = children_of(invoke).values()
    assert scope_of(view) == "opentelemetry.instrumentation.django"
    assert view.kind == SpanKind.INTERNAL
    assert (
        view.attributes is not None
        and view.attributes.get("http.response.status_code", view.attributes.get("http.status_code")) == 200
    )


def test_the_how_to_page_lists_each_name_of_ours_and_no_other() -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "how-to" / "opentelemetry.md").read_text()
    assert set(re.findall(r"`(mcp_expose\.[\w.]+)`", page)) == telemetry.NAMES
    assert telemetry.METRICS <= set(re.findall(r"^\| `([\w.]+)`", page, re.M))


def test_without_http_as_over_stdio_the_sdks_span_holds_the_calls_steps_and_the_tools_own(
    db: None, exported: InMemorySpanExporter
) -> None:
    """The server `mcp_stdio` serves (built alike, no HTTP, a local caller): the SDK's span and our children; a
    span the tool makes itself nests under `mcp_expose.invoke`, in the thread the tool runs in."""
    registry = CapabilityRegistry()

    @mcp_expose.tool(registry=registry, key="t.traced_work")
    def traced_work() -> dict[str, str]:
        with TRACER_PROVIDER.get_tracer("project").start_as_current_span("project.work"):
            return {"done": "yes"}

    reader = User.objects.create_user("reader")
    result = McpTestClient(reader, registry=registry).call_tool("t.traced_work")
    assert isinstance(result, CallToolResult) and result.structured_content == {"done": "yes"}
    (server,) = spans_named("tools/call t.traced_work", SpanKind.SERVER)
    assert scope_of(server) == "mcp-python-sdk"
    steps = children_of(server)
    assert {"mcp_expose.policy", "mcp_expose.validate_arguments", "mcp_expose.invoke"} <= set(steps)
    assert "mcp_expose.authenticate" not in steps  # a local caller: nothing was authenticated
    assert list(children_of(steps["mcp_expose.invoke"])) == ["project.work"]


def gauge(points: dict[str, list[Any]], name: str) -> list[tuple[float, dict[str, Any]]]:
    return [(point.value, dict(point.attributes)) for point in points.get(name, [])]


async def test_the_gauges_count_open_streams_sessions_and_open_breakers(
    transactional_db: None, settings: Any, exported: InMemorySpanExporter
) -> None:
    settings.MCP_EXPOSE = {**settings.MCP_EXPOSE, "LEGACY_SESSIONS": True}  # read when a server starts
    reader = await sync_to_async(User.objects.create_user)("reader")
    with LiveMcpServer() as live:
        async with (
            live.connect(reader, ["library:read"]) as modern,
            modern.listen(tools_list_changed=True),  # entered once the server holds the stream
            live.connect(reader, ["library:read"], era="2025-11-25") as legacy,
        ):
            await legacy.list_tools()  # the session exists once a request was answered in it
            opened = measured()
    closed = measured()  # the server stopped: it ended its streams and sessions
    assert gauge(opened, "mcp_expose.listen.streams") == [(1, {})]
    assert gauge(opened, "mcp_expose.legacy.sessions") == [(1, {})]
    assert gauge(closed, "mcp_expose.listen.streams") == [(0, {})]
    assert gauge(closed, "mcp_expose.legacy.sessions") == [(0, {})]

    guard = breaker()
    guard.reset()
    for _ in range(guard.threshold):
        guard.failed(7)
    assert gauge(measured(), "mcp_expose.upstream.breaker.open") == [(1, {"mcp_expose.upstream.server_id": 7})]
    guard.succeeded(7)
    assert gauge(measured(), "mcp_expose.upstream.breaker.open") == []
