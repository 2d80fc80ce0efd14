"""The MCP tasks extension on the official SDK client's side, as a client that supports tasks would write it.

`TasksExtension` declares io.modelcontextprotocol/tasks in every request's client capabilities and claims the
`CreateTaskResult` a tools/call may answer with: it polls tasks/get (at the server's pollIntervalMs) until the
task ends, hands pending questions to `answer` and sends what it returns with tasks/update, and returns the
task's inlined `CallToolResult` as the call's result (a failed task raises its JSON-RPC error). The requests it
sends carry Mcp-Name: <taskId>, as the extension asks. `created` keeps every task it saw made.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar, Literal

import anyio
import mcp_types as types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict, TypeAdapter

TASKS = "io.modelcontextprotocol/tasks"
TERMINAL = ("completed", "failed", "cancelled")
# Every poll ends on the task's state; this only stops a hang.
POLL_GUARD_SECONDS = 120.0
ANY_RESULT = TypeAdapter(dict[str, Any])
Answerer = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class CreatedTask(types.Result):
    """The flat `CreateTaskResult` (resultType "task")."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None
    status_message: str | None = None


class TaskParams(types.RequestParams):
    task_id: str


class UpdateTaskParams(TaskParams):
    input_responses: dict[str, Any]


class GetTask(types.Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams
    name_param: ClassVar[str | None] = "taskId"


class UpdateTask(types.Request[UpdateTaskParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateTaskParams
    name_param: ClassVar[str | None] = "taskId"


class CancelTask(types.Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskParams
    name_param: ClassVar[str | None] = "taskId"


async def get_task(session: ClientSession, task_id: str) -> dict[str, Any]:
    return await session.send_request(GetTask(params=TaskParams(task_id=task_id)), ANY_RESULT)


async def update_task(session: ClientSession, task_id: str, responses: dict[str, Any]) -> dict[str, Any]:
    request = UpdateTask(params=UpdateTaskParams(task_id=task_id, input_responses=responses))
    return await session.send_request(request, ANY_RESULT)


async def cancel_task(session: ClientSession, task_id: str) -> dict[str, Any]:
    return await session.send_request(CancelTask(params=TaskParams(task_id=task_id)), ANY_RESULT)


async def wait_for(session: ClientSession, task_id: str, statuses: Sequence[str] = TERMINAL) -> dict[str, Any]:
    """Poll tasks/get until the task is in one of `statuses` (or has ended), at its poll interval."""
    with anyio.fail_after(POLL_GUARD_SECONDS):
        while True:
            task = await get_task(session, task_id)
            if task["status"] in statuses or task["status"] in TERMINAL:
                return task
            await anyio.sleep(min(task.get("pollIntervalMs", 100), 100) / 1000)


class TasksExtension(ClientExtension):
    identifier = TASKS

    def __init__(self, answer: Answerer | None = None, *, follow: bool = True) -> None:
        self.answer = answer
        self.follow = follow
        self.created: list[CreatedTask] = []

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self._resolve)]

    async def _resolve(self, created: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
        self.created.append(created)
        if not self.follow:
            return types.CallToolResult(content=[types.TextContent(text=f"task {created.task_id}")])
        while True:
            task = await wait_for(ctx.session, created.task_id, ("input_required",))
            if task["status"] == "input_required" and self.answer is not None:
                await update_task(ctx.session, created.task_id, await self.answer(task["inputRequests"]))
                continue
            if task["status"] == "completed":
                return types.CallToolResult.model_validate(task["result"])
            if task["status"] == "failed":
                error = task["error"]
                raise MCPError(code=error["code"], message=error["message"], data=error.get("data"))
            raise AssertionError(f"task {created.task_id} ended {task['status']}: {task}")


__all__ = [
    "CreatedTask",
    "TasksExtension",
    "cancel_task",
    "get_task",
    "update_task",
    "wait_for",
]
