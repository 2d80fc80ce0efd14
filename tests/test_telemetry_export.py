"""The demo as a team runs it under OpenTelemetry's zero-code distro: `opentelemetry-instrument python manage.py
demo`, exporting OTLP over HTTP to a receiver this test runs. Real processes are the subject: the distro configures
the SDK at interpreter start, before Django, and the demo's helpdesk upstream is a process of its own (started by
the demo, under the same instrumentation), so one proxied call's trace crosses three processes."""

from __future__ import annotations

import shutil
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.trace import TracerProvider

from .live import ROOT, LiveServer, free_port, launch, manage, stop_server
from .mcp_client import MODES, connect

# The test's own client traces with an SDK of its own (sampled, exported nowhere), not the process's global one.
CLIENT_TRACER = TracerProvider().get_tracer("tests.client")
SERVER = Span.SpanKind.SPAN_KIND_SERVER
CLIENT = Span.SpanKind.SPAN_KIND_CLIENT
# Every wait below ends on the spans arriving; this only stops a hang.
ARRIVAL_GUARD_SECONDS = 60.0


class Receiver:
    """An OTLP/HTTP trace receiver on 127.0.0.1: keeps every span it is sent, with its service's name."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, Span]] = []
        self.changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802  (the name http.server calls)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path == "/v1/traces":
                    receiver.received(ExportTraceServiceRequest.FromString(body))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def received(self, request: ExportTraceServiceRequest) -> None:
        with self.changed:
            for resource in request.resource_spans:
                service = next(
                    (a.value.string_value for a in resource.resource.attributes if a.key == "service.name"), ""
                )
                self.spans.extend((service, span) for scope in resource.scope_spans for span in scope.spans)
            self.changed.notify_all()

    def wait_for(self, found: Callable[[list[tuple[str, Span]]], bool]) -> list[tuple[str, Span]]:
        with self.changed:
            assert self.changed.wait_for(lambda: found(self.spans), timeout=ARRIVAL_GUARD_SECONDS), "\n".join(
                self.names()
            )
            return list(self.spans)

    def names(self) -> list[str]:
        return [f"{service}: {span.name} ({Span.SpanKind.Name(span.kind)})" for service, span in self.spans]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    receiver.thread.start()
    yield receiver
    receiver.server.shutdown()
    receiver.server.server_close()


def instrumented_demo(data_dir: Path, receiver: Receiver) -> LiveServer:
    """`opentelemetry-instrument python manage.py demo`, as the how-to page runs it (OTLP instead of the console)."""
    instrument = shutil.which("opentelemetry-instrument", path=str(Path(sys.executable).parent))
    assert instrument is not None, "the otel extra installs opentelemetry-instrument"
    env = {
        "OTEL_SERVICE_NAME": "library",
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }
    upstream_port = str(free_port())
    return launch(
        data_dir,
        lambda port: [
            instrument,
            sys.executable,
            str(ROOT / "manage.py"),
            "demo",
            "--noinput",
            "--addrport",
            f"127.0.0.1:{port}",
            "--upstream-port",
            upstream_port,
        ],
        env,
    )


NO_CONFIRMATION = """
from mcp_expose.models import ExposedTool, UpstreamTool
row = ExposedTool.objects.get(key=UpstreamTool.objects.get(name="lookup_ticket").key)
row.requires_confirmation = False
row.save()
"""


def server_spans(spans: list[tuple[str, Span]], name: str) -> list[Span]:
    return [span for _, span in spans if span.name == name and span.kind == SERVER]


def attributes(span: Span) -> dict[str, str]:
    return {a.key: a.value.string_value or str(a.value.int_value) for a in span.attributes}


@pytest.mark.parametrize("mode", list(MODES))
def test_the_demo_under_opentelemetry_instrument_traces_each_call_and_its_upstream_hop(
    tmp_path: Path, receiver: Receiver, mode: str
) -> None:
    demo = instrumented_demo(tmp_path, receiver)
    try:
        key = (tmp_path / "demo-api-key.txt").read_text().strip()
        manage(tmp_path, "shell", "-c", NO_CONFIRMATION)  # the demo asks a person before any upstream call

        async def calls() -> None:
            # A client that traces: its sampled context goes in each request's `_meta` (the SDK's client puts it).
            with CLIENT_TRACER.start_as_current_span("client work") as work:
                traced_by.append(work.get_span_context().trace_id)
                await calls_in_trace()

        async def calls_in_trace() -> None:
            async with connect(demo.mcp_url, key, mode) as client:
                echoed = await client.call_tool("library_echo", {"message": "traced"})
                looked_up = await client.call_tool("helpdesk__lookup_ticket", {"ticket_id": 1})
                assert not echoed.is_error and not looked_up.is_error, (echoed, looked_up)

        traced_by: list[int] = []
        anyio.run(calls)
        spans = receiver.wait_for(
            lambda spans: (
                len(server_spans(spans, "tools/call library_echo")) == 1
                and len(server_spans(spans, "tools/call helpdesk__lookup_ticket")) == 1
                and len(server_spans(spans, "tools/call lookup_ticket")) == 1
            )
        )
    finally:
        stop_server(demo)
    version = MODES[mode]
    (echo,) = server_spans(spans, "tools/call library_echo")
    echoed = attributes(echo)
    assert echoed["mcp.method.name"] == "tools/call"
    assert echoed["gen_ai.tool.name"] == "library_echo"
    assert echoed["gen_ai.operation.name"] == "execute_tool"
    assert echoed["mcp.protocol.version"] == version
    assert int.from_bytes(echo.trace_id, "big") == traced_by[0]  # the client's trace, continued in the server
    children = {span.name for _, span in spans if span.parent_span_id == echo.span_id}
    assert {"mcp_expose.authenticate", "mcp_expose.policy", "mcp_expose.invoke"} <= children

    # The proxied call: our server span, our hop to the helpdesk (a client span), the helpdesk's own server span.
    (proxied,) = server_spans(spans, "tools/call helpdesk__lookup_ticket")
    trace = [(service, span) for service, span in spans if span.trace_id == proxied.trace_id]
    hops = [span for _, span in trace if span.kind == CLIENT and "lookup_ticket" in span.name]
    assert len(hops) == 1, tree(trace)
    (upstream,) = server_spans(trace, "tools/call lookup_ticket")
    assert upstream.parent_span_id == hops[0].span_id, tree(trace)


def tree(trace: list[tuple[str, Span]]) -> str:
    """A trace as the how-to page draws it: each span under its parent, with its kind and duration."""
    spans = sorted((span for _, span in trace), key=lambda span: span.start_time_unix_nano)
    ids = {span.span_id for span in spans}
    lines: list[str] = []

    def draw(parent: bytes, depth: int) -> None:
        for span in spans:
            if span.parent_span_id == parent or (depth == 0 and not parent and span.parent_span_id not in ids):
                took = (span.end_time_unix_nano - span.start_time_unix_nano) / 1e6
                kind = Span.SpanKind.Name(span.kind).removeprefix("SPAN_KIND_").lower()
                lines.append(f"{'    ' * depth}{span.name}  [{kind}, {took:.1f} ms]")
                draw(span.span_id, depth + 1)

    draw(b"", 0)
    return "\n".join(lines)
