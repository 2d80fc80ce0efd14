"""One path for every tool call: lookup, policy, validation, invocation, projection.

It knows nothing about HTTP or the MCP SDK; the server and the management
commands both call `call_tool` and render its `ToolOutcome`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError

from .catalog import Catalog, ToolEntry
from .context import InvocationContext, ProgressReporter, no_progress
from .errors import AccessDenied, InvalidInput, NotFound, ToolError, UnknownTool
from .invoke import invoke
from .policy import decide
from .principal import Principal
from .results import ProjectionError

logger = logging.getLogger("mcp_expose.dispatch")

INTERNAL_MESSAGE = "The tool failed unexpectedly. Quote the incident id when reporting this."


@dataclass(frozen=True, slots=True)
class ToolFailure:
    code: str
    message: str
    details: Any = None
    incident: str | None = None

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details is not None:
            data["details"] = self.details
        if self.incident is not None:
            data["incident"] = self.incident
        return data


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    entry: ToolEntry
    value: Any = None
    failure: ToolFailure | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


@dataclass(frozen=True, slots=True)
class CallRequest:
    """What the transport knows about a call, beyond name and arguments."""

    protocol_version: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    report_progress: ProgressReporter = no_progress


def resolve_tool(catalog: Catalog, principal: Principal, name: str) -> ToolEntry:
    """The entry the caller may call, or `UnknownTool`: missing, disabled and forbidden look alike."""
    entry = catalog.get(name)
    if entry is None or not decide(principal, entry).allowed:
        raise UnknownTool(name)
    return entry


async def call_tool(
    catalog: Catalog,
    principal: Principal,
    name: str,
    arguments: Mapping[str, Any] | None,
    request: CallRequest | None = None,
) -> ToolOutcome:
    """Run one call. Raises `UnknownTool`; every other failure becomes the outcome's `failure`."""
    entry = resolve_tool(catalog, principal, name)
    request = request or CallRequest()
    try:
        validated = entry.capability.signature.validate_arguments(arguments)
    except InvalidInput as exc:
        return ToolOutcome(entry, failure=_anticipated(entry, exc))
    context = InvocationContext(
        tool_name=entry.name,
        principal=principal,
        protocol_version=request.protocol_version,
        headers=request.headers,
        report_progress_callback=request.report_progress,
    )
    try:
        value = await invoke(entry, validated, context)
    except ToolError as exc:
        return ToolOutcome(entry, failure=_anticipated(entry, exc))
    except DjangoPermissionDenied as exc:
        return ToolOutcome(entry, failure=_anticipated(entry, AccessDenied(_safe_text(exc) or None)))
    except ObjectDoesNotExist as exc:
        return ToolOutcome(entry, failure=_anticipated(entry, NotFound(_not_found_message(exc))))
    except DjangoValidationError as exc:
        return ToolOutcome(entry, failure=_anticipated(entry, InvalidInput(details=_validation_details(exc))))
    except ProjectionError as exc:
        return ToolOutcome(entry, failure=_unexpected(entry, exc, "its result cannot be sent as JSON"))
    except Exception as exc:  # noqa: BLE001  (the edge of the capability: everything else is a bug)
        return ToolOutcome(entry, failure=_unexpected(entry, exc, "it raised"))
    return ToolOutcome(entry, value=value)


def _anticipated(entry: ToolEntry, exc: ToolError) -> ToolFailure:
    logger.info("Tool %s refused the call: %s (%s)", entry.name, exc.code, exc.message)
    return ToolFailure(code=exc.code, message=exc.message, details=exc.details)


def _unexpected(entry: ToolEntry, exc: BaseException, what: str) -> ToolFailure:
    incident = uuid.uuid4().hex[:16]
    logger.error("Tool %s failed: %s (incident %s)", entry.name, what, incident, exc_info=exc)
    return ToolFailure(code="internal", message=INTERNAL_MESSAGE, incident=incident)


def _safe_text(exc: BaseException) -> str:
    """Django's PermissionDenied message is written for the user, as in a 403 page."""
    return str(exc) if exc.args and isinstance(exc.args[0], str) else ""


def _not_found_message(exc: ObjectDoesNotExist) -> str:
    model = getattr(type(exc), "__qualname__", "").removesuffix(".DoesNotExist")
    return f"{model} not found." if model and model != "ObjectDoesNotExist" else NotFound.default_message


def _validation_details(exc: DjangoValidationError) -> list[dict[str, str]]:
    if hasattr(exc, "error_dict"):
        return [
            {"path": f"$.{field_name}" if field_name != "__all__" else "$", "message": message}
            for field_name, errors in exc.message_dict.items()
            for message in errors
        ]
    return [{"path": "$", "message": message} for message in exc.messages]
