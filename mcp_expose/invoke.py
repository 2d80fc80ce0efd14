"""Run a function capability within its timeout; unwind it when abandoned.

Async functions run on the event loop under a deadline. Sync functions run in
one worker-thread hop together with the projection of their result (so lazy
querysets resolve where the ORM may run), inside a transaction unless the tool
is read-only. When the caller stops waiting (timeout, or the client went away),
the thread's next query raises and the transaction rolls back: no half-done
write survives an abandoned call.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from asgiref.sync import sync_to_async
from django.db import connection, transaction

from .catalog import ToolEntry
from .content import as_bundle
from .context import InvocationContext
from .db import close_stale_connections
from .results import to_json_value


class CallAbandoned(Exception):
    """Raised inside an abandoned sync call, to roll its transaction back."""


class ToolTimeout(Exception):
    def __init__(self, seconds: float) -> None:
        super().__init__(f"The tool did not finish within {seconds:g} seconds.")
        self.seconds = seconds


def _project(entry: ToolEntry, value: Any) -> Any:
    if entry.capability.kind == "resource" and isinstance(value, str | bytes | bytearray):
        return value  # resource contents travel as text or blob, as they are
    bundle = as_bundle(value)
    if bundle is not None:
        return bundle
    signature = entry.capability.signature
    if signature.output_adapter is not None:
        value = signature.validate_result(value)
    return to_json_value(value)


def _injected(entry: ToolEntry, context: InvocationContext) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for parameter, kind in entry.capability.signature.injections.items():
        if kind == "context":
            values[parameter] = context
        elif kind == "principal":
            values[parameter] = context.principal
        else:
            values[parameter] = context.build_request()
    return values


def _refuse_when_abandoned(abandoned: threading.Event) -> Callable[..., Any]:
    def wrapper(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        if abandoned.is_set():
            raise CallAbandoned("the caller stopped waiting for this call")
        return execute(sql, params, many, context)

    return wrapper


def _call_target(entry: ToolEntry, arguments: Mapping[str, Any], context: InvocationContext) -> Any:
    capability = entry.capability
    if capability.call_style == "mapping":
        return capability.target(dict(arguments), context)
    return capability.target(**arguments, **_injected(entry, context))


def _call_sync(
    entry: ToolEntry, arguments: Mapping[str, Any], context: InvocationContext, abandoned: threading.Event
) -> Any:
    # MCP traffic never passes Django's request signals, so connection upkeep is done here.
    close_stale_connections()
    try:
        writes = contextlib.nullcontext() if entry.annotations.read_only else transaction.atomic()
        with connection.execute_wrapper(_refuse_when_abandoned(abandoned)), writes:
            value = _project(entry, _call_target(entry, arguments, context))
            if abandoned.is_set():
                raise CallAbandoned("the caller stopped waiting for this call")
            return value
    finally:
        close_stale_connections()


async def invoke(entry: ToolEntry, arguments: Mapping[str, Any], context: InvocationContext) -> Any:
    """Call the capability and return its result as a plain JSON value.

    Raises `ToolTimeout` past the entry's timeout; cancellation propagates as is.
    """
    if entry.capability.is_async:
        with anyio.move_on_after(entry.timeout):
            value = await _call_target(entry, arguments, context)
            return _project(entry, value)
        raise ToolTimeout(entry.timeout)
    abandoned = threading.Event()
    try:
        with anyio.move_on_after(entry.timeout):
            return await sync_to_async(_call_sync, thread_sensitive=False)(entry, arguments, context, abandoned)
    except BaseException:
        abandoned.set()
        raise
    abandoned.set()
    raise ToolTimeout(entry.timeout)
