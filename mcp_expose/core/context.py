"""What a running capability may ask for besides its arguments."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcp_expose.core.asking import Answer, ClientInput, Question
from mcp_expose.core.chain import CallChain
from mcp_expose.core.errors import McpExposeError

if TYPE_CHECKING:
    from django.http import HttpRequest

    from mcp_expose.core.principal import Principal

ProgressReporter = Callable[[float, float | None, str | None], Awaitable[None]]


LogSender = Callable[[str, Any], Awaitable[None]]


async def no_progress(progress: float, total: float | None, message: str | None) -> None:
    return None


async def no_log(level: str, data: Any) -> None:
    return None


class ContinueAsTask(McpExposeError):  # noqa: N818  (a signal to the dispatcher, not an error)
    """Raised by `InvocationContext.continue_as_task()` in a call that becomes a task there."""


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
    client: ClientInput = field(default_factory=ClientInput)
    send_log: LogSender = no_log
    close_stream_callback: Callable[[], Awaitable[None]] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    # This site's address, for requests that came without a Host (stdio, mcp_call --base-url).
    base_url: str = ""
    # The MCP task this run is (in a worker), or None for a direct call.
    task_id: str | None = None
    # A tool declared with task_starts_in_call, called by a client that supports tasks: `continue_as_task()`
    # turns the call into a task there.
    may_continue_as_task: bool = False

    @property
    def user(self) -> Any:
        return self.principal.user

    @property
    def wants_progress(self) -> bool:
        """Whether the client asked to hear how the call goes (a call onwards then asks for progress too)."""
        return self.report_progress_callback is not no_progress

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Tell the client how far the call has got (sent only when the client asked for progress)."""
        await self.report_progress_callback(progress, total, message)

    def report_progress_sync(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """`report_progress` for sync tools, which run in a worker thread."""
        from asgiref.sync import async_to_sync

        async_to_sync(self.report_progress_callback)(progress, total, message)

    async def ask(self, questions: Mapping[str, Question]) -> dict[str, Answer]:
        """Ask the client (its user, its model, or for its roots) and return the answers by key.

        On 2026-07-28 the call stops here and runs again from the top once the client has answered,
        so do nothing irreversible before the last `ask`. See `mcp_expose.core.asking` for the details.
        """
        return await self.client.ask(questions)

    def can_ask(self, question: Question) -> bool:
        """Whether this connection can carry `question` and the client declared what it needs."""
        return self.client.can_ask(question)

    def ask_sync(self, questions: Mapping[str, Question]) -> dict[str, Answer]:
        """`ask` for sync tools, which run in a worker thread."""
        from asgiref.sync import async_to_sync

        return async_to_sync(self.client.ask)(questions)

    def continue_as_task(self) -> None:
        """For tools declared with `task_starts_in_call=True`: what follows runs as an MCP task.

        In the call, this stops the function: the call is answered with a task, and a worker runs the
        function again from the top, with the answers the call gathered (so its `ask` calls return at once)
        and this call returning. In that worker, and for a client without tasks, it returns at once and the
        function goes on. Sync and async tools alike; do nothing irreversible before it."""
        if self.may_continue_as_task and self.task_id is None:
            raise ContinueAsTask()

    @property
    def in_task(self) -> bool:
        """Whether this run is an MCP task's, in a worker (no client is waiting on it)."""
        return self.task_id is not None

    async def log(self, level: str, message: Any) -> None:
        """Send a log message to the client: on 2026-07-28 only when the request asked for that level,
        on 2025-11-25 at or above the level the client set."""
        if level not in LOG_LEVELS:
            raise ValueError(f"Unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}.")
        await self.send_log(level, message)

    async def close_stream(self) -> bool:
        """Close this call's SSE stream now and go on working: a 2025-11-25 client on a stateful
        session reconnects and receives the rest (polling, SEP-1699). False when the connection
        has no such stream (then nothing happens)."""
        if self.close_stream_callback is None:
            return False
        await self.close_stream_callback()
        return True

    def outbound_headers(self) -> dict[str, str]:
        """Headers for calling another MCP server from this tool: same conversation, one agent deeper.

        Raises `DepthExceeded` (a tool error) before anything leaves the process when that is too deep.
        """
        return self.chain.forward()

    def build_request(self) -> HttpRequest:
        """A Django `HttpRequest` carrying the caller, for code that expects one."""
        from mcp_expose.core.requests import build_http_request

        return build_http_request(self.principal, self.headers, base_url=self.base_url)


LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
