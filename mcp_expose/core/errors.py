"""The error taxonomy.

Declaration mistakes raise `ImproperlyConfigured` subclasses at startup. Inside a
call, a `ToolError` is a failure the capability anticipated: the client gets an
`isError` result carrying its code and message. Anything else is unexpected and
reaches the client only as `internal` with an incident id.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured

__all__ = [
    "AccessDenied",
    "Conflict",
    "DeclarationError",
    "InvalidInput",
    "McpExposeError",
    "NotFound",
    "ToolError",
    "Unavailable",
    "UnknownTool",
    "UpstreamError",
    "UpstreamUnavailable",
]


class McpExposeError(Exception):
    """Base class of every error this package raises on purpose."""


class DeclarationError(McpExposeError, ImproperlyConfigured):
    """A capability was declared in a way that cannot be served."""


class UnknownTool(McpExposeError):
    """The tool does not exist for this caller: unknown, disabled or not permitted.

    All three are answered identically so a caller cannot probe what exists.
    """

    def __init__(self, name: str) -> None:
        super().__init__(f"Unknown tool: {name}")
        self.name = name


class ToolError(McpExposeError):
    """A failure the capability anticipated; its message is shown to the client.

    Raise it (or a subclass) from a tool with a message that is safe to show.
    """

    code = "tool_error"
    default_message = "The tool could not complete the request."

    def __init__(self, message: str | None = None, *, details: Any = None) -> None:
        self.message = message or self.default_message
        self.details = details
        super().__init__(self.message)


class InvalidInput(ToolError):
    code = "invalid_input"
    default_message = "The arguments are not valid."


class AccessDenied(ToolError):
    code = "permission_denied"
    default_message = "You do not have permission to perform this action."


class NotFound(ToolError):
    code = "not_found"
    default_message = "Not found."


class Conflict(ToolError):
    code = "conflict"
    default_message = "The request conflicts with the current state."


class Unavailable(ToolError):
    """Something the call needs (the database) cannot serve it right now; retrying later may succeed.
    Like `rate_limited`, it says when: `details.retry_after`, in seconds."""

    code = "unavailable"
    default_message = "A service the tool needs is unavailable right now."

    def __init__(self, message: str | None = None, *, retry_after: int) -> None:
        super().__init__(message, details={"retry_after": retry_after})
        self.retry_after = retry_after


class UpstreamError(ToolError):
    """An upstream server's tool answered with an error (or with what cannot be read as an answer). Its
    text is the upstream's, bounded, and `details.source` says it came from the upstream."""

    code = "upstream_error"
    default_message = "The upstream server's tool failed."


class UpstreamUnavailable(ToolError):
    """The upstream server cannot be reached, or failed so often just now that calls to it wait; retrying
    later may succeed. `details.retry_after` says when, in seconds."""

    code = "upstream_unavailable"
    default_message = "The upstream server is unavailable right now."

    def __init__(self, message: str | None = None, *, server: str, retry_after: int) -> None:
        super().__init__(message, details={"upstream": server, "retry_after": retry_after})
        self.retry_after = retry_after
