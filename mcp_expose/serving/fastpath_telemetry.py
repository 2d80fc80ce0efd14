"""The fast path's server span and duration, made as the SDK's `OpenTelemetryMiddleware` makes them for the
requests it answers: the same name, attributes and error types, the client's trace continued from `_meta` (or the
`traceparent` header), and the steps timed before it (authentication, the policy) as its children. A request the
fast path hands to the SDK gets the SDK's span instead, never both."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.trace import Span, StatusCode
from starlette.types import Scope

from mcp_expose.core import telemetry
from mcp_expose.core.telemetry import Lap
from mcp_expose.serving.fastpath_requests import PlainRequest

TRACE_HEADERS = (b"traceparent", b"tracestate")


@dataclass(slots=True)
class Traced:
    """The request's span (None when tracing is off), and what its answer was: an error type, when it failed."""

    span: Span | None
    error_type: str | None = None

    def failed(self, error_type: str) -> None:
        self.error_type = error_type


@contextmanager
def server_span(plain: PlainRequest, target: str | None, scope: Scope, laps: Sequence[Lap] = ()) -> Iterator[Traced]:
    """The span of one request the fast path answers, current for the block; and its operation duration."""
    started = time.perf_counter()
    traced = Traced(None)
    if not telemetry.timed(scope):  # not traced when it arrived
        try:
            yield traced
        finally:
            telemetry.record_operation(started, plain.method, target, plain.version, traced.error_type)
        return
    laps = (*telemetry.laps_of(scope), *laps)
    parent = telemetry.incoming_context(plain.params.get("_meta"), _trace_headers(scope))
    attributes = telemetry.server_attributes(plain.method, target, plain.version, _request_id(plain))
    traced.span = telemetry.start_server_span(
        plain.method, target, attributes, parent, start=laps[0].start if laps else None
    )
    telemetry.replay(laps, traced.span)
    try:
        with trace.use_span(traced.span, record_exception=False, set_status_on_exception=False):
            yield traced
    except BaseException as exc:
        traced.failed(type(exc).__qualname__)
        raise
    finally:
        if traced.error_type is not None:
            traced.span.set_attribute("error.type", traced.error_type)
            if telemetry.is_protocol_error(traced.error_type):
                traced.span.set_attribute("rpc.response.status_code", traced.error_type)
            traced.span.set_status(StatusCode.ERROR)
        traced.span.end()
        telemetry.record_operation(started, plain.method, target, plain.version, traced.error_type)


def _trace_headers(scope: Scope) -> dict[str, str]:
    return {name.decode(): value.decode("latin-1") for name, value in scope["headers"] if name in TRACE_HEADERS}


def _request_id(plain: PlainRequest) -> str | None:
    if not plain.id_json:
        return None
    value = json.loads(plain.id_json)
    return value if isinstance(value, str) else str(value)
