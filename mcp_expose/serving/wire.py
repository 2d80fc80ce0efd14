"""Our definitions, outcomes and content as the SDK's wire types, and the protocol errors for what went wrong.

Shared by the SDK's handlers (`server`) and by the fast path, which must answer byte for byte alike."""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from mcp_expose.calls.confirmation import StaleConfirmation
from mcp_expose.calls.dispatch import ToolOutcome
from mcp_expose.calls.results import compact_json, structured
from mcp_expose.catalog.compiled import ToolEntry
from mcp_expose.core.asking import MissingClientCapability
from mcp_expose.core.content import Audio, ContentBundle, EmbeddedResource, Image, Text
from mcp_expose.core.db import in_worker_thread, tidies_connections
from mcp_expose.core.principal import Principal
from mcp_expose.declare.json_schemas import thaw
from mcp_expose.serving.task_wire import created_result

logger = logging.getLogger("mcp_expose.server")


def read_error(failure: Any, data: dict[str, Any]) -> MCPError:
    """A failed read or prompt: not found is -32602 (as the spec asks), anything else -32603 with a safe message."""
    if failure.code == "not_found":
        return MCPError(code=types.INVALID_PARAMS, message="Resource not found", data=data)
    detail = {**data, "code": failure.code}
    if failure.incident:
        detail["incident"] = failure.incident
    return MCPError(code=types.INTERNAL_ERROR, message=failure.message, data=detail)


def prompt_definition(entry: ToolEntry) -> types.Prompt:
    schema = entry.input_schema
    required = set(schema.get("required", ()))
    arguments = [
        types.PromptArgument(name=name, description=spec.get("description"), required=name in required)
        for name, spec in schema.get("properties", {}).items()
    ]
    return types.Prompt(
        name=entry.name, title=entry.title, description=entry.description or None, arguments=arguments or None
    )


def tool_definition(
    entry: ToolEntry, input_schema: Mapping[str, Any] | None = None, *, apps: bool = False
) -> types.Tool:
    """The tool as `tools/list` sends it; `input_schema` is the caller's, for a tool whose schema varies.
    `apps`: the client negotiated MCP Apps, so a tool shown by a page says which (`_meta.ui`); others never
    see that key."""
    annotations = entry.annotations.as_dict()
    return types.Tool(
        name=entry.name,
        title=entry.title,
        description=entry.description or None,
        input_schema=thaw(input_schema if input_schema is not None else entry.input_schema),
        output_schema=thaw(entry.output_schema) if entry.output_schema is not None else None,
        annotations=types.ToolAnnotations.model_validate(annotations) if annotations else None,
        _meta={"ui": entry.app.tool_meta()} if apps and entry.app is not None else None,
    )


@in_worker_thread
@tidies_connections
def caller_definitions(entries: Iterable[ToolEntry], principal: Principal, apps: bool) -> dict[str, types.Tool]:
    """The definitions of the tools whose schema depends on who calls, made for `principal` (in a worker
    thread: the view's code runs to tell)."""
    return {
        entry.name: tool_definition(entry, entry.input_schema_for(principal), apps=apps)
        for entry in entries
        if entry.varies_by_caller
    }


def render_outcome(outcome: ToolOutcome) -> Any:
    """A dispatcher outcome as a `CallToolResult` (structured content plus the same JSON as text),
    the questions a client must answer first, or the task the call became (a `CreateTaskResult`)."""
    if outcome.task is not None:
        return created_result(outcome.task)
    if outcome.input_required is not None:
        return outcome.input_required.as_result()
    if isinstance(outcome.value, ContentBundle):
        return types.CallToolResult(content=[content_block(item) for item in outcome.value.items])
    content, text, is_error = json_outcome(outcome)
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=content, is_error=is_error)


def json_outcome(outcome: ToolOutcome) -> tuple[dict[str, Any], str, bool]:
    """A value's or a failure's structured content, the same JSON as text, and whether it is an error."""
    if outcome.failure is not None:
        payload = {"error": outcome.failure.as_dict()}
        return payload, compact_json(payload), True
    content = structured(outcome.value)
    return (
        content,
        outcome.text if outcome.text is not None and content is outcome.value else compact_json(content),
        False,
    )


def content_block(item: Any) -> Any:
    """One of our content items as the SDK's content block."""
    if isinstance(item, Text):
        return types.TextContent(text=item.text)
    if isinstance(item, Image):
        return types.ImageContent(data=b64(item.data), mime_type=item.mime_type)
    if isinstance(item, Audio):
        return types.AudioContent(data=b64(item.data), mime_type=item.mime_type)
    if isinstance(item, EmbeddedResource):
        return types.EmbeddedResource(
            resource=resource_contents(item.uri, item.text if item.text is not None else item.blob, item.mime_type)
        )
    return types.ResourceLink(uri=item.uri, name=item.name, description=item.description, mime_type=item.mime_type)


def resource_contents(uri: str, value: Any, mime_type: str | None) -> Any:
    """Text stays text, bytes travel as base64, anything else as JSON."""
    if isinstance(value, bytes | bytearray):
        return types.BlobResourceContents(
            uri=uri, blob=b64(bytes(value)), mime_type=mime_type or "application/octet-stream"
        )
    if isinstance(value, str):
        return types.TextResourceContents(uri=uri, text=value, mime_type=mime_type or "text/plain")
    return types.TextResourceContents(uri=uri, text=compact_json(value), mime_type=mime_type or "application/json")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def internal_error(method: str) -> MCPError:
    """-32603 with an incident id, for an unexpected exception being handled (logged with its traceback)."""
    incident = uuid.uuid4().hex[:16]
    logger.exception("MCP request %s failed unexpectedly (incident %s)", method, incident)
    return MCPError(
        code=types.INTERNAL_ERROR,
        message="Internal error. Quote the incident id when reporting this.",
        data={"incident": incident},
    )


def question_error(exc: MissingClientCapability | StaleConfirmation) -> MCPError:
    """The protocol error for a question the client cannot answer, or a round already answered."""
    if isinstance(exc, MissingClientCapability):
        return MCPError(code=types.MISSING_REQUIRED_CLIENT_CAPABILITY, message=str(exc), data=exc.error_data())
    return MCPError(
        code=types.INVALID_PARAMS, message="Invalid or expired requestState", data={"reason": "invalid_request_state"}
    )


def message_content(content: Any) -> Any:
    return types.TextContent(text=content) if isinstance(content, str) else content_block(content)
