"""Run a function capability: async ones on the loop, sync ones in one thread hop.

A sync call and the projection of its result happen in the same hop, so lazy
querysets and related objects are resolved where the ORM is allowed to run,
and nothing lazy crosses back to the event loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections

from .catalog import ToolEntry
from .context import InvocationContext
from .results import to_json_value


def _project(entry: ToolEntry, value: Any) -> Any:
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


def _call_sync(entry: ToolEntry, arguments: Mapping[str, Any], context: InvocationContext) -> Any:
    # MCP traffic never passes Django's request signals, so connection upkeep is done here.
    close_old_connections()
    try:
        return _project(entry, entry.capability.target(**arguments, **_injected(entry, context)))
    finally:
        close_old_connections()


async def invoke(entry: ToolEntry, arguments: Mapping[str, Any], context: InvocationContext) -> Any:
    """Call the capability and return its result as a plain JSON value."""
    if entry.capability.is_async:
        value = await entry.capability.target(**arguments, **_injected(entry, context))
        return _project(entry, value)
    return await sync_to_async(_call_sync, thread_sensitive=True)(entry, arguments, context)
