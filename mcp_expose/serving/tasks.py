"""The MCP tasks extension on the wire (io.modelcontextprotocol/tasks, SEP-2663, 2026-07-28 only).

A call of a tool that supports tasks, from a request whose client capabilities declare the extension, is
answered with a `CreateTaskResult` once its row is committed; `tasks/get`, `tasks/update` and `tasks/cancel`
then follow it from any process. A request that did not declare the extension gets -32021 for these methods;
another caller's task answers exactly as an unknown one (-32602). `tasks/list` and `tasks/result` do not exist
in this revision, so they are -32601 as any unknown method.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from mcp_expose.access.drf_authentication import credential_reference
from mcp_expose.calls import tasks
from mcp_expose.calls.dispatch import CallRequest
from mcp_expose.calls.tasks import TaskView
from mcp_expose.catalog.compiled import ToolEntry
from mcp_expose.core import telemetry
from mcp_expose.core.asking import ANSWERS_KEY, TASKS_EXTENSION, TaskRequired, write_state
from mcp_expose.core.conf import get_settings
from mcp_expose.core.db import in_worker_thread, tidies_connections
from mcp_expose.core.endpoints import DEFAULT_ENDPOINT
from mcp_expose.core.outage import database_unavailable, outage
from mcp_expose.core.principal import Principal
from mcp_expose.serving.request_context import Resolver
from mcp_expose.serving.task_wire import detailed_task
from mcp_expose.serving.task_worker import enqueue_run
from mcp_expose.serving.wire import question_error

UNKNOWN_TASK = "Failed to retrieve task: Task not found"
# The most answers one tasks/update may carry (a task asks a handful of questions at a time).
MAX_INPUT_RESPONSES = 64


class TaskParams(types.RequestParams):
    task_id: str = Field(max_length=1024)


class UpdateTaskParams(TaskParams):
    input_responses: dict[str, Any]


def client_supports_tasks(ctx: ServerRequestContext[Any]) -> bool:
    """Whether this request may be answered with a task: 2026-07-28, and its client capabilities (this
    request's, never an earlier one's) declare the extension."""
    if not get_settings().TASKS or ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    extensions = getattr(ctx.session.client_capabilities, "extensions", None) or {}
    return TASKS_EXTENSION in extensions


async def start_task(
    entry: ToolEntry,
    principal: Principal,
    arguments: Mapping[str, Any],
    request: CallRequest,
    endpoint: str = DEFAULT_ENDPOINT,
) -> TaskView:
    """Make the task for this call at `endpoint` and queue its run (the dispatcher's `StartTask`, with the
    endpoint bound by the server)."""
    capabilities = request.client.capabilities
    call = {
        "arguments": dict(arguments),
        "headers": dict(request.headers),
        "protocol_version": request.protocol_version,
        "capabilities": capabilities.model_dump(mode="json", by_alias=True, exclude_none=True)
        if capabilities is not None
        else {},
        # The answers the call gathered (and a confirmation given), for the run's `ask` calls.
        "state": write_state({**request.client.carried, ANSWERS_KEY: request.client.answers}),
        "responses": {},
        "base_url": request.base_url,
        "client_address": request.client_address,
        # How a local caller (stdio) came in: its run is the same user's, through the same door.
        "via": principal.via,
        # Which of the project's authenticators accepted it (a DRF class's name), for the same reason.
        "authenticator": principal.authenticator,
        # The row a DRF class accepted (its Token), by number or digest, never its key: deleting it stops the task.
        "credential_row": credential_reference(principal.credential) if principal.method == "drf" else None,
        # Where it was made: its run sees that endpoint's toolset, and only a caller there follows it.
        "endpoint": endpoint,
        # The OAuth resources its token was issued for: a refreshed token of the same grant carries it on, a
        # token of the same client for another endpoint does not.
        "resource": _token_resources(principal),
        # The span of the call that made it (W3C traceparent, identifiers only): its run's span links to it.
        "traceparent": telemetry.current_traceparent(),
    }
    return await in_worker_thread(tidies_connections(tasks.create))(entry.name, entry.key, principal, call, enqueue_run)


def _token_resources(principal: Principal) -> list[str]:
    resources = getattr(principal.credential, "resource", None) if principal.method == "oauth" else None
    return sorted(str(resource) for resource in resources or ())


def register_task_methods(server: Server[Any], resolve: Resolver, endpoint: str = DEFAULT_ENDPOINT) -> None:
    """Serve tasks/get, tasks/update and tasks/cancel of the tasks made at `endpoint`, and advertise the
    extension."""
    server.extensions[TASKS_EXTENSION] = {}

    async def owned_task(ctx: ServerRequestContext[Any], params: TaskParams) -> tuple[Any, Principal]:
        _refuse_unnegotiated(ctx, params.task_id)
        principal, _catalog = await resolve(ctx)
        row = await _in_thread(tasks.find, params.task_id, principal, endpoint)
        if row is None:
            raise MCPError(code=types.INVALID_PARAMS, message=UNKNOWN_TASK)
        return row, principal

    async def get_task(ctx: ServerRequestContext[Any], params: TaskParams) -> Any:
        row, _principal = await owned_task(ctx, params)
        return detailed_task(TaskView.of(row))

    async def update_task(ctx: ServerRequestContext[Any], params: UpdateTaskParams) -> Any:
        if len(params.input_responses) > MAX_INPUT_RESPONSES:
            raise MCPError(
                code=types.INVALID_PARAMS, message=f"At most {MAX_INPUT_RESPONSES} input responses per update."
            )
        row, principal = await owned_task(ctx, params)
        await _in_thread(tasks.answer, row, params.input_responses, enqueue_run, principal)
        return {}

    async def cancel_task(ctx: ServerRequestContext[Any], params: TaskParams) -> Any:
        row, _principal = await owned_task(ctx, params)
        await _in_thread(tasks.cancel, row)
        return {}

    server.add_request_handler("tasks/get", TaskParams, get_task)
    server.add_request_handler("tasks/update", UpdateTaskParams, update_task)
    server.add_request_handler("tasks/cancel", TaskParams, cancel_task)


async def _in_thread(func: Callable[..., Any], *args: Any) -> Any:
    """A row operation in a worker thread; a database that is down answers as unavailable (retryable), not as an
    internal error."""
    try:
        return await in_worker_thread(tidies_connections(func))(*args)
    except Exception as exc:
        if not database_unavailable(exc):
            raise
        outage.refused("following a task", exc)
        retry_after = get_settings().UNAVAILABLE_RETRY_AFTER
        raise MCPError(
            code=types.INTERNAL_ERROR,
            message=f"The database is unavailable right now; retry after {retry_after} s.",
            data={"unavailable": "database", "retry_after": retry_after},
        ) from None


def _refuse_unnegotiated(ctx: ServerRequestContext[Any], task_id: str) -> None:
    """The extension's methods exist on 2026-07-28 only, for requests that declare it, and over HTTP they name
    their task in Mcp-Name (as tools/call names its tool)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found")
    if ctx.request is not None and decode_header_value(ctx.request.headers.get(MCP_NAME_HEADER)) != task_id:
        raise MCPError(
            code=types.HEADER_MISMATCH, message="Mcp-Name header does not match the request body's 'taskId' parameter"
        )
    if not client_supports_tasks(ctx):
        raise question_error(TaskRequired(f"{ctx.method} is a method of the MCP tasks extension"))
