"""What a running capability may ask for besides its arguments."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .chain import CallChain

if TYPE_CHECKING:
    from django.http import HttpRequest

    from .principal import Principal

ProgressReporter = Callable[[float, float | None, str | None], Awaitable[None]]


async def no_progress(progress: float, total: float | None, message: str | None) -> None:
    return None


@dataclass(frozen=True, slots=True)
class InvocationContext:
    """Handed to a tool that declares a parameter annotated with this type.

    It never appears in the tool's input schema.
    """

    tool_name: str
    principal: Principal
    protocol_version: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    report_progress_callback: ProgressReporter = no_progress
    chain: CallChain = field(default_factory=CallChain)
    client_address: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def user(self) -> Any:
        return self.principal.user

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Tell the client how far the call has got (sent only when the client asked for progress)."""
        await self.report_progress_callback(progress, total, message)

    def report_progress_sync(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """`report_progress` for sync tools, which run in a worker thread."""
        from asgiref.sync import async_to_sync

        async_to_sync(self.report_progress_callback)(progress, total, message)

    def outbound_headers(self) -> dict[str, str]:
        """Headers for calling another MCP server from this tool: same conversation, one agent deeper.

        Raises `DepthExceeded` (a tool error) before anything leaves the process when that is too deep.
        """
        return self.chain.forward()

    def build_request(self) -> HttpRequest:
        """A Django `HttpRequest` carrying the caller, for code that expects one."""
        from .requests import build_http_request

        return build_http_request(self.principal, self.headers)
