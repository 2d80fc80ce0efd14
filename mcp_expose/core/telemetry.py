"""OpenTelemetry for every layer: the tracer and meter, spans that cost nothing when no SDK is configured, trace
context from a request's `_meta` or its `traceparent` header, and the instruments of the MCP semantic conventions.

`opentelemetry-api` comes with the MCP SDK, which already makes a server span for each message it handles. This
module adds what the SDK cannot see: the fast path's span (made here, named and attributed as the SDK names its
own), the children for the steps of a call, the metrics, and the client span of a hand-built upstream request.

Nothing here records arguments, results, headers or credentials: attributes are names, codes and versions. A
tool's argument values go on its span only where its exposure row already logs them (`log_argument_values`).

The edge asks `tracing()` once per request (it looks at the global provider) and times the request only then;
what follows asks `timed(scope)`, or `recording()` (whether the current span records). Until a deployment
configures an OpenTelemetry SDK (`opentelemetry-instrument`, or its own `set_tracer_provider`), a span is a shared
`nullcontext`; a measurement is skipped unless `metering()`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.propagate import extract, inject
from opentelemetry.trace import Link, NoOpTracerProvider, ProxyTracerProvider, SpanKind, StatusCode
from opentelemetry.trace.span import Span

SCOPE = "mcp_expose"


def _installed_version() -> str:
    try:
        return version("django-mcp-expose")
    except PackageNotFoundError:  # a source tree not installed
        return ""


tracer = trace.get_tracer(SCOPE, _installed_version())
meter = metrics.get_meter(SCOPE, _installed_version())

# Our own names, beside the conventions' (`mcp.*`, `gen_ai.*`, `jsonrpc.*`, `error.type`): what
# docs/how-to/opentelemetry.md lists, which tests/test_telemetry.py holds equal to these and to what is exported.
SPANS = frozenset(
    {
        "mcp_expose.authenticate",
        "mcp_expose.policy",
        "mcp_expose.rate_limit",
        "mcp_expose.validate_arguments",
        "mcp_expose.confirmation",
        "mcp_expose.invoke",
    }
)
METRICS = frozenset(
    {
        "mcp_expose.tool.calls",
        "mcp_expose.upstream.breaker.open",
        "mcp_expose.usage.queue",
        "mcp_expose.usage.spilled",
        "mcp_expose.listen.streams",
        "mcp_expose.legacy.sessions",
    }
)
ATTRIBUTES = frozenset(
    {
        "mcp_expose.auth.method",
        "mcp_expose.outcome",
        "mcp_expose.error.code",
        "mcp_expose.tool.arguments",
        "mcp_expose.task.id",
        "mcp_expose.upstream.server",
        "mcp_expose.upstream.server_id",
    }
)
NAMES = SPANS | METRICS | ATTRIBUTES

# The scope key under which the edge keeps what it timed before the request's server span exists.
LAPS_SCOPE_KEY = "mcp_expose.laps"

# The parent of a span that starts a trace of its own whatever is current (a task's run: linked, not nested).
NEW_TRACE = otel_context.Context()
_UNSET_TRACERS = (ProxyTracerProvider, NoOpTracerProvider)
NOTHING: AbstractContextManager[None] = nullcontext()


def tracing() -> bool:
    """Whether a tracer provider is configured (spans are recorded somewhere)."""
    return not isinstance(trace.get_tracer_provider(), _UNSET_TRACERS)


def metering() -> bool:
    """Whether a meter provider is configured."""
    provider = metrics.get_meter_provider()
    return type(provider).__name__ not in ("_ProxyMeterProvider", "NoOpMeterProvider")


def recording() -> bool:
    """Whether the current span records: what a child, an attribute or an error type needs. One context-variable
    read, where `tracing()` asks the API, which reads the environment each time while no provider is set."""
    return trace.get_current_span().is_recording()


def timed(scope: Mapping[str, Any]) -> bool:
    """Whether the edge timed this request, which it does only while tracing: the rest of the request's way asks
    this instead of `tracing()` again."""
    return LAPS_SCOPE_KEY in scope


def now() -> int:
    """A timestamp as spans take them (nanoseconds since the epoch)."""
    return time.time_ns()


def span(
    name: str, attributes: Mapping[str, Any] | None = None, *, expected: tuple[type[BaseException], ...] = ()
) -> AbstractContextManager[Span | None]:
    """A child of the current span for a step that takes time; nothing when tracing is off. The step's exception
    is not recorded (its text may carry what a span must not): the status says error, the type says which.
    `expected`: exceptions that are the step's way of answering (a question for the client), not errors."""
    if not recording():
        return NOTHING
    return _step(name, attributes, expected=expected)


@contextmanager
def _step(
    name: str,
    attributes: Mapping[str, Any] | None,
    kind: SpanKind = SpanKind.INTERNAL,
    expected: tuple[type[BaseException], ...] = (),
) -> Iterator[Span]:
    with tracer.start_as_current_span(
        name, kind=kind, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as current:
        try:
            yield current
        except expected:
            raise
        except Exception as exc:
            current.set_attribute("error.type", type(exc).__qualname__)
            current.set_status(StatusCode.ERROR)
            raise


@dataclass(frozen=True, slots=True)
class Lap:
    """A step timed before the span it belongs under existed (authentication, at the edge): replayed as a child
    once that span is open, with its own times."""

    name: str
    start: int
    end: int
    attributes: Mapping[str, Any]


def replay(laps: Iterable[Lap], parent: Span | None = None) -> None:
    """Each lap as a finished child of `parent` (by default, the current span)."""
    parent_context = trace.set_span_in_context(parent) if parent is not None else None
    for lap in laps:
        child = tracer.start_span(lap.name, context=parent_context, attributes=lap.attributes, start_time=lap.start)
        child.end(end_time=lap.end)


def laps_of(scope: Mapping[str, Any]) -> Sequence[Lap]:
    return scope.get(LAPS_SCOPE_KEY, ())


def incoming_context(meta: Any, headers: Mapping[str, str] | None = None) -> otel_context.Context | None:
    """The client's trace context: from the request's `params._meta` (the MCP way), else from its `traceparent`
    header; None when neither carries a valid one (the span then starts a trace, or nests under the ambient
    span)."""
    for carrier in (meta, headers):
        if not isinstance(carrier, Mapping) or "traceparent" not in carrier:
            continue
        try:
            found = extract({key: carrier[key] for key in ("traceparent", "tracestate") if _is_text(carrier, key)})
        except (ValueError, TypeError):
            continue
        if trace.get_current_span(found).get_span_context().is_valid:
            return found
    return None


def _is_text(carrier: Mapping[str, Any], key: str) -> bool:
    value = carrier.get(key)
    return isinstance(value, str) and len(value) <= MAX_CONTEXT_HEADER


# A traceparent is 55 characters; a tracestate at most 32 members of 256: anything longer is not a trace context.
MAX_CONTEXT_HEADER = 8192


@contextmanager
def attached(parent: otel_context.Context | None) -> Iterator[None]:
    """Within this block, `parent` is the current context (when there is one)."""
    if parent is None:
        yield
        return
    token = otel_context.attach(parent)
    try:
        yield
    finally:
        otel_context.detach(token)


def server_attributes(method: str, target: str | None, protocol_version: str | None, request_id: Any) -> dict[str, Any]:
    """A server span's attributes, as the MCP semantic conventions (and the SDK's own middleware) set them, for
    what we answer without the SDK (calls, listings, a task's run)."""
    attributes: dict[str, Any] = {"mcp.method.name": method}
    if protocol_version:
        attributes["mcp.protocol.version"] = protocol_version
    if request_id is not None:
        attributes["jsonrpc.request.id"] = str(request_id)
    if method == "tools/call":
        attributes["gen_ai.operation.name"] = "execute_tool"
        if target is not None:
            attributes["gen_ai.tool.name"] = target
    return attributes


def span_name(method: str, target: str | None) -> str:
    """`{mcp.method.name} {target}`, the conventions' span name."""
    return f"{method} {target}" if target else method


def start_server_span(
    method: str,
    target: str | None,
    attributes: Mapping[str, Any],
    parent: otel_context.Context | None,
    start: int | None = None,
    links: Sequence[Link] | None = None,
    kind: SpanKind = SpanKind.SERVER,
) -> Span:
    """A server span the fast path (or a task's run) makes where the SDK does not; the caller ends it."""
    return tracer.start_span(
        span_name(method, target), context=parent, kind=kind, attributes=attributes, start_time=start, links=links
    )


@contextmanager
def client_span(method: str, target: str, protocol_version: str, server: str) -> Iterator[dict[str, str]]:
    """A request this server sends upstream, by hand (the SDK's client makes its own span): a client span, current
    for the block, and the trace context to put in the request's `_meta` (empty when tracing is off)."""
    if not recording():
        yield {}
        return
    attributes = server_attributes(method, target, protocol_version, None)
    attributes["mcp_expose.upstream.server"] = server
    with _step(span_name(method, target), attributes, SpanKind.CLIENT):
        carrier: dict[str, str] = {}
        inject(carrier)
        yield carrier


def link_to(traceparent: str | None) -> list[Link]:
    """A link to the span a `traceparent` names (a task's run to the call that made it); none when invalid."""
    if not traceparent:
        return []
    found = incoming_context({"traceparent": traceparent})
    if found is None:
        return []
    return [Link(trace.get_current_span(found).get_span_context())]


def current_traceparent() -> str | None:
    """The current span's `traceparent`, to be kept with work that runs later (a task); None when it records
    nothing."""
    if not recording():
        return None
    carrier: dict[str, str] = {}
    inject(carrier)
    return carrier.get("traceparent")


def failed(error_type: str) -> None:
    """The current span ended in an error of this type (a code or a kind, never a message)."""
    current = trace.get_current_span()
    if current.is_recording():
        current.set_attribute("error.type", error_type)
        current.set_status(StatusCode.ERROR)


def annotate(attributes: Mapping[str, Any]) -> None:
    """Attributes on the current span: the request's server span (ours or the SDK's), or a task's run."""
    current = trace.get_current_span()
    if current.is_recording():
        current.set_attributes(attributes)


# Instruments. The conventions' names where they have one; ours under `mcp_expose.`.
operation_duration = meter.create_histogram(
    "mcp.server.operation.duration",
    unit="s",
    description="Duration of an MCP request as the server handled it.",
    explicit_bucket_boundaries_advisory=[0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
)
client_operation_duration = meter.create_histogram(
    "mcp.client.operation.duration",
    unit="s",
    description="Duration of an MCP request this server sent to an upstream server.",
    explicit_bucket_boundaries_advisory=[0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
)
tool_calls = meter.create_counter(
    "mcp_expose.tool.calls",
    unit="{call}",
    description="Tool calls by outcome (ok, tool_error, rate_limited, ...) and error code.",
)


def record_operation(
    started: float, method: str, target: str | None, protocol_version: str | None, error_type: str | None
) -> None:
    """One request's `mcp.server.operation.duration` (`started`: its `time.perf_counter()`)."""
    if not metering():
        return
    attributes = {"mcp.method.name": method}
    if protocol_version:
        attributes["mcp.protocol.version"] = protocol_version
    # A call refused with a protocol error may name no tool at all (any text a caller sends): no series of its own.
    if method == "tools/call" and target is not None and not is_protocol_error(error_type):
        attributes["gen_ai.tool.name"] = target
    if error_type is not None:
        attributes["error.type"] = error_type
    operation_duration.record(time.perf_counter() - started, attributes)


def is_protocol_error(error_type: str | None) -> bool:
    """Whether an error type is a JSON-RPC error code (as the SDK's span records one)."""
    return error_type is not None and error_type.lstrip("-").isdigit()


Observer = Callable[[], Iterable[tuple[float, Mapping[str, Any]]]]


def observe(name: str, observer: Observer, *, unit: str, description: str) -> None:
    """A gauge read when the metrics are collected: `observer` says its values now, each with its attributes.
    Registered by the layer that owns the state (the usage writer, the listen streams, the breakers)."""

    def collect(options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(value, dict(attributes)) for value, attributes in observer()]

    meter.create_observable_gauge(name, callbacks=[collect], unit=unit, description=description)
