"""How an exception a capability raised becomes the failure its caller sees, and what is logged about it.

A tool error says what it says; Django's own exceptions are translated as a Django view would answer them; an
outage is retryable and logged once per outage; anything else is "internal", with an incident id in the log
beside its traceback and nothing of it in the answer."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import BadRequest, ObjectDoesNotExist, SuspiciousOperation
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404

from mcp_expose.calls.results import ProjectionError, to_json_value
from mcp_expose.catalog.compiled import ToolEntry
from mcp_expose.core.conf import get_settings
from mcp_expose.core.errors import AccessDenied, InvalidInput, NotFound, ToolError, Unavailable
from mcp_expose.core.outage import dependency_of, outage

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


def failure_for(entry: ToolEntry, exc: Exception) -> ToolFailure:
    """The client-safe failure for an exception raised by a capability (anticipated or not)."""
    if isinstance(exc, ToolError):
        return _anticipated(entry, exc)
    if isinstance(exc, DjangoPermissionDenied):
        return _anticipated(entry, AccessDenied(_safe_text(exc) or None))
    if isinstance(exc, ObjectDoesNotExist):
        return _anticipated(entry, NotFound(_not_found_message(exc)))
    if isinstance(exc, Http404):
        # A view's 404 (get_object_or_404, a DetailView, a page past the last): over HTTP a 404 page, which
        # shows its message only with DEBUG on, so the client gets the plain one.
        return _anticipated(entry, NotFound())
    if isinstance(exc, (BadRequest, SuspiciousOperation)):
        # Over HTTP a 400 page; the message may describe what a probe tried, so it stays in the log.
        logger.info("%s %s: the view refused the request: %s", entry.kind.capitalize(), entry.name, type(exc).__name__)
        return _anticipated(entry, InvalidInput("The view refused the request as malformed."))
    if isinstance(exc, DjangoValidationError):
        return _anticipated(entry, InvalidInput(details=_validation_details(exc)))
    if isinstance(exc, ProjectionError):
        return unexpected_failure(entry, exc, "its result cannot be sent as JSON")
    if dependency_of(exc) is not None:
        return _unavailable(entry, exc)
    return unexpected_failure(entry, exc, "it raised")


def _anticipated(entry: ToolEntry, exc: ToolError) -> ToolFailure:
    logger.info("%s %s refused the call: %s (%s)", entry.kind.capitalize(), entry.name, exc.code, exc.message)
    try:
        details = to_json_value(exc.details)  # as a result is: the same JSON whoever renders it
    except ProjectionError as problem:
        logger.warning(
            "%s %s gave error details with no JSON form (%s): sent without them",
            entry.kind.capitalize(),
            entry.name,
            problem,
        )
        details = None
    return ToolFailure(code=exc.code, message=exc.message, details=details)


def _unavailable(entry: ToolEntry, exc: BaseException) -> ToolFailure:
    """A database locked or unreachable, or a shared cache unreachable, right now: retryable, logged once
    per outage rather than per call (the cache's breaker logs its own)."""
    retry_after = get_settings().UNAVAILABLE_RETRY_AFTER
    logger.info("%s %s refused the call: unavailable", entry.kind.capitalize(), entry.name)
    if dependency_of(exc) == "database":
        outage.refused(f"{entry.kind} {entry.name}", exc)
        message = f"The database is busy or unreachable; retry after {retry_after} s."
    else:
        message = (
            f"The shared cache this tool needs (for its rate limit, or to answer a round once) is "
            f"unreachable; retry after {retry_after} s."
        )
    error = Unavailable(message, retry_after=retry_after)
    return ToolFailure(code=error.code, message=error.message, details=error.details)


def unexpected_failure(entry: ToolEntry, exc: BaseException, what: str) -> ToolFailure:
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
