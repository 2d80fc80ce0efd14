"""Run a function capability within its timeout; unwind it when abandoned.

Async functions run on the event loop under a deadline. Sync functions run in
one worker-thread hop together with the projection of their result (so lazy
querysets resolve where the ORM may run), inside a transaction unless the tool
is read-only. When the caller stops waiting (timeout, or the client went away),
the thread's next query raises and the transaction rolls back: no half-done
write survives an abandoned call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Literal

import anyio
from django.db import connection, transaction

from mcp_expose.calls.results import to_json_value
from mcp_expose.catalog.compiled import ToolEntry
from mcp_expose.core.content import CONTENT_TYPES, as_bundle
from mcp_expose.core.context import InvocationContext
from mcp_expose.core.db import in_worker_thread, tidies_connections
from mcp_expose.core.errors import McpExposeError


class CallAbandoned(McpExposeError):
    """Raised inside an abandoned sync call, to roll its transaction back."""


# What became of a timed-out call's writes: rolled back with its transaction, committed just before the
# deadline, written outside any transaction (async tools), or a read-only sync tool (no transaction either).
Writes = Literal["rolled_back", "committed", "no_transaction", "read_only"]

_WRITES_TOLD: dict[Writes, str] = {
    "rolled_back": "It ran in a transaction, which is rolled back: nothing it wrote is kept.",
    "committed": "It finished its writes just before the deadline; they were kept.",
    "no_transaction": "It is async, so it ran outside a transaction: anything it wrote may have been kept.",
    "read_only": "",
}


class ToolTimeout(McpExposeError):
    """The caller stopped waiting. `writes` says what became of what the tool wrote, so that the answer
    claims only what is true (only a writing sync tool's transaction is rolled back)."""

    def __init__(self, seconds: float, writes: Writes) -> None:
        super().__init__(f"The tool did not finish within {seconds:g} seconds.")
        self.seconds = seconds
        self.writes = writes

    @property
    def message(self) -> str:
        """The whole text for the client: the deadline, and what became of the writes."""
        return f"{self} {_WRITES_TOLD[self.writes]}".rstrip()


class Abandonment:
    """Who got there first: the call committing its transaction, or the caller giving up on it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.abandoned = False
        self.committed = False
        # Set while the call's transaction rolls back: inside a caller's own transaction (a test's) that is a
        # savepoint's rollback, sent as a query, which the refusal of abandoned queries must let through.
        self.unwinding = False

    def abandon(self) -> bool:
        """Give up on the call; False when it had already committed."""
        with self._lock:
            if not self.committed:
                self.abandoned = True
            return self.abandoned

    def commit(self, atomic: Any) -> None:
        """Commit, unless the caller gave up first (then roll back)."""
        with self._lock:
            if self.abandoned:
                raise CallAbandoned("the caller stopped waiting for this call")
            atomic.__exit__(None, None, None)
            self.committed = True


def _prompt_value(value: Any) -> Any:
    """A prompt's messages as `calls.reading.messages` takes them: content items kept as they are (an image in a
    (role, content) pair included), every other value projected to JSON."""
    if isinstance(value, list):
        return [_prompt_message(item) for item in value]
    return _prompt_message(value)


def _prompt_message(item: Any) -> Any:
    if isinstance(item, list | tuple) and len(item) == 2:
        return (to_json_value(item[0]), _prompt_content(item[1]))
    if isinstance(item, Mapping) and "content" in item:
        return {"role": to_json_value(item.get("role", "user")), "content": _prompt_content(item["content"])}
    return _prompt_content(item)


def _prompt_content(value: Any) -> Any:
    return value if isinstance(value, CONTENT_TYPES) else to_json_value(value)


def _project(entry: ToolEntry, value: Any) -> Any:
    if entry.capability.kind == "resource" and isinstance(value, str | bytes | bytearray):
        return value  # resource contents travel as text or blob, as they are
    if entry.capability.kind == "prompt":
        return _prompt_value(value)
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


def _refuse_when_abandoned(state: Abandonment) -> Callable[..., Any]:
    def wrapper(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        if state.abandoned and not state.unwinding:
            raise CallAbandoned("the caller stopped waiting for this call")
        return execute(sql, params, many, context)

    return wrapper


def _call_target(entry: ToolEntry, arguments: Mapping[str, Any], context: InvocationContext) -> Any:
    capability = entry.capability
    if capability.call_style == "mapping":
        return capability.target(dict(arguments), context)
    return capability.target(**arguments, **_injected(entry, context))


@tidies_connections
def _call_sync(entry: ToolEntry, arguments: Mapping[str, Any], context: InvocationContext, state: Abandonment) -> Any:
    with connection.execute_wrapper(_refuse_when_abandoned(state)):
        # Whether it writes is the code's declaration: an admin's hint for clients must not drop the transaction.
        if entry.capability.annotations.read_only:
            value = _project(entry, _call_target(entry, arguments, context))
            if state.abandoned:
                raise CallAbandoned("the caller stopped waiting for this call")
            return value
        atomic = transaction.atomic()
        atomic.__enter__()
        try:
            value = _project(entry, _call_target(entry, arguments, context))
        except BaseException as exc:
            _roll_back(atomic, exc, state)
            raise
        try:
            state.commit(atomic)
        except CallAbandoned as exc:
            _roll_back(atomic, exc, state)
            raise
        return value


def _roll_back(atomic: Any, exc: BaseException, state: Abandonment) -> None:
    state.unwinding = True
    atomic.__exit__(type(exc), exc, exc.__traceback__)


# Made once: building the wrapper costs about as much as the rest of the hop's Python.
_call_sync_in_thread = in_worker_thread(_call_sync)


async def invoke(entry: ToolEntry, arguments: Mapping[str, Any], context: InvocationContext) -> Any:
    """Call the capability and return its result as a plain JSON value.

    Raises `ToolTimeout` past the entry's timeout; cancellation propagates as is.
    """
    if entry.capability.is_async:
        with anyio.move_on_after(entry.timeout):
            value = await _call_target(entry, arguments, context)
            return _project(entry, value)
        raise ToolTimeout(entry.timeout, "no_transaction")
    state = Abandonment()
    try:
        with anyio.move_on_after(entry.timeout):
            return await _call_sync_in_thread(entry, arguments, context, state)
    except BaseException:
        state.abandon()
        raise
    abandoned = state.abandon()
    if entry.capability.annotations.read_only:
        raise ToolTimeout(entry.timeout, "read_only")
    raise ToolTimeout(entry.timeout, "rolled_back" if abandoned else "committed")
