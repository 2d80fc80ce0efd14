"""MCP tasks as rows: made when a call becomes a task, moved by the worker that runs it and by its owner's
tasks/update and tasks/cancel, and read by any process for tasks/get.

Every change is one conditional UPDATE on the row's status and run, so that a cancellation, a worker finishing,
a second delivery of the same job and a dead worker's lease running out never overwrite one another: whichever
comes first wins, and the later one changes nothing. Sync: call these in a worker thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from mcp_expose.core.conf import get_settings
from mcp_expose.core.endpoints import DEFAULT_ENDPOINT
from mcp_expose.core.errors import McpExposeError
from mcp_expose.core.principal import Principal
from mcp_expose.core.task_states import ACTIVE, TaskRun, TaskStatus

if TYPE_CHECKING:
    from mcp_expose.models import ToolTask

logger = logging.getLogger("mcp_expose.tasks")


Status = TaskStatus
Run = TaskRun
# A JSON-RPC error object as a failed task carries it.
DEAD_WORKER_ERROR = {"code": -32603, "message": "The worker running this task stopped before it finished."}
UNCLAIMED_ERROR = {"code": -32603, "message": "No worker started this task in time; it was not run."}
# The longest task id looked up: longer ones are unknown without a query.
MAX_TASK_ID_LENGTH = 64
STATUS_MESSAGE_LENGTH = 500


class TaskRefused(McpExposeError):
    """No task was made: the caller has too many, or the queue could not take it."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class TaskView:
    """A task as its owner sees it (tasks/get): the protocol layer puts it on the wire."""

    task_id: str
    status: str
    status_message: str
    created_at: datetime
    updated_at: datetime
    ttl_seconds: int | None
    poll_interval: float
    input_requests: Mapping[str, Any] | None = None
    result: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, row: ToolTask) -> TaskView:
        conf = get_settings()
        return cls(
            task_id=row.id,
            status=row.status,
            status_message=row.status_message,
            created_at=row.created_at,
            updated_at=row.updated_at,
            ttl_seconds=conf.TASK_TTL,
            poll_interval=conf.TASK_POLL_INTERVAL,
            input_requests=row.input_requests if row.status == Status.INPUT_REQUIRED else None,
            result=row.result if row.status == Status.COMPLETED else None,
            error=row.error if row.status == Status.FAILED else None,
        )


def _tasks() -> Any:
    from mcp_expose.models import ToolTask

    return ToolTask.objects


def owner_key(principal: Principal, endpoint: str = DEFAULT_ENDPOINT) -> str:
    """Who may follow a task: the same API key, or the same OAuth client for the same user, at the endpoint the
    task was made at."""
    return _caller_key(principal) + ("" if endpoint == DEFAULT_ENDPOINT else f"@{endpoint}")


def _caller_key(principal: Principal) -> str:
    if principal.method == "api_key":
        return f"key:{principal.api_key_id}"
    user_pk = getattr(principal.user, "pk", None)
    if principal.method == "oauth":
        return f"oauth:{principal.client_id}:{user_pk}"
    if principal.authenticator:
        return f"{principal.method}:{principal.authenticator}:{user_pk}"
    return f"{principal.method}:{user_pk}"


def create(
    tool_name: str, tool_key: str, principal: Principal, call: Mapping[str, Any], enqueue: Callable[[str], None]
) -> TaskView:
    """Make the task and queue its run; the row is committed before this returns (a tasks/get for it answers).
    Raises `TaskRefused` when the caller has too many active tasks or the queue refuses it (no row is left)."""
    conf = get_settings()
    owner = owner_key(principal, str(call.get("endpoint") or DEFAULT_ENDPOINT))
    limit = conf.MAX_ACTIVE_TASKS_PER_CALLER
    now = timezone.now()
    active = _tasks().filter(owner=owner, status__in=ACTIVE).filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
    if limit is not None and active.count() >= limit:
        raise TaskRefused(
            "rate_limited", f"You have {limit} tasks working or waiting for input; wait for one to finish."
        )
    row = _tasks().create(
        tool_name=tool_name,
        tool_key=tool_key,
        owner=owner,
        user=principal.user if getattr(principal.user, "pk", None) is not None else None,
        credential_method=principal.method,
        api_key_id=principal.api_key_id,
        client_id=principal.client_id or "",
        access_token_id=_access_token_id(principal),
        scopes=sorted(principal.scopes),
        call=dict(call),
        expires_at=now + timedelta(seconds=conf.TASK_TTL) if conf.TASK_TTL is not None else None,
    )
    try:
        enqueue(row.id)
    except Exception as exc:
        row.delete()
        logger.warning("Could not queue a task for %s: %s", tool_name, type(exc).__name__)
        raise TaskRefused("unavailable", "The task queue is unavailable; try again shortly.") from exc
    return TaskView.of(row)


def _access_token_id(principal: Principal) -> int | None:
    return getattr(principal.credential, "pk", None) if principal.method == "oauth" else None


def find(task_id: str, principal: Principal, endpoint: str = DEFAULT_ENDPOINT) -> ToolTask | None:
    """The caller's task made at `endpoint`, or None: unknown, expired, another endpoint's and someone else's look
    alike. A running task whose worker stopped beating is failed here first."""
    if not isinstance(task_id, str) or not task_id or len(task_id) > MAX_TASK_ID_LENGTH:
        return None
    now = timezone.now()
    found = (
        _tasks()
        .filter(id=task_id, owner=owner_key(principal, endpoint))
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .first()
    )
    if found is not None and _abandoned(found, now) and fail_abandoned(id=found.id):
        found.refresh_from_db()
    return found


def _abandoned(row: ToolTask, now: datetime) -> bool:
    """Whether `fail_abandoned` would fail this row (read without a write: tasks/get is polled)."""
    conf = get_settings()
    if row.status != Status.WORKING:
        return False
    if row.run == Run.RUNNING:
        return row.heartbeat_at is not None and row.heartbeat_at < now - timedelta(seconds=conf.TASK_LEASE)
    return row.run == Run.QUEUED and row.updated_at < now - timedelta(seconds=conf.TASK_QUEUE_TIMEOUT)


def fail_abandoned(**only: Any) -> int:
    """Fail working tasks nobody will finish: a run whose worker stopped beating for TASK_LEASE seconds (it died),
    and a run no worker took within TASK_QUEUE_TIMEOUT seconds of being queued (the job was lost, or no worker
    serves the queue). The number failed; `only` narrows the rows looked at (one task's id)."""
    conf = get_settings()
    now = timezone.now()
    dead = Q(run=Run.RUNNING, heartbeat_at__lt=now - timedelta(seconds=conf.TASK_LEASE))
    unclaimed = Q(run=Run.QUEUED, updated_at__lt=now - timedelta(seconds=conf.TASK_QUEUE_TIMEOUT))
    working = _tasks().filter(status=Status.WORKING, **only)
    failed = 0
    for condition, error in ((dead, DEAD_WORKER_ERROR), (unclaimed, UNCLAIMED_ERROR)):
        count = working.filter(condition).update(
            status=Status.FAILED,
            run=Run.IDLE,
            error=error,
            status_message=error["message"],
            finished_at=now,
            updated_at=now,
            call={},
        )
        if count:
            logger.warning("%d task(s) failed: %s", count, error["message"])
        failed += count
    return failed


def cancel(row: ToolTask) -> bool:
    """Cancel an active task (its worker stops at its next heartbeat). False when it had already ended: a
    finished task stays as it finished."""
    now = timezone.now()
    return bool(
        _tasks()
        .filter(id=row.id, status__in=ACTIVE)
        .update(
            status=Status.CANCELLED,
            run=Run.IDLE,
            input_requests=None,
            finished_at=now,
            updated_at=now,
            call={},
        )
    )


def answer(
    row: ToolTask, responses: Mapping[str, Any], enqueue: Callable[[str], None], principal: Principal | None = None
) -> None:
    """Take the client's answers to the task's pending questions. Answers to keys not pending, and answers that
    are not objects (every answer type is one), are ignored. When none is left pending, the task works again:
    its run is queued, and it starts from the top with every answer (and with the OAuth token the last answer
    came with: a refreshed token carries the grant on)."""
    with transaction.atomic():
        locked = _tasks().select_for_update().filter(id=row.id, status=Status.INPUT_REQUIRED).first()
        if locked is None:
            return
        pending = dict(locked.input_requests or {})
        taken = {key: value for key, value in responses.items() if key in pending and isinstance(value, dict)}
        if not taken:
            return
        call = dict(locked.call)
        call["responses"] = {**(call.get("responses") or {}), **taken}
        remaining = {key: request for key, request in pending.items() if key not in taken}
        changes: dict[str, Any] = {"call": call, "updated_at": timezone.now()}
        if principal is not None and _access_token_id(principal) is not None:
            changes["access_token_id"] = _access_token_id(principal)
        # Still waiting (a cancellation in between wins).
        waiting = _tasks().filter(id=row.id, status=Status.INPUT_REQUIRED)
        if remaining:
            waiting.update(input_requests=remaining, **changes)
            return
        if not waiting.update(input_requests=None, status=Status.WORKING, run=Run.QUEUED, status_message="", **changes):
            return
    try:
        enqueue(row.id)
    except Exception as exc:
        logger.warning("Could not queue task %s again: %s", row.id[:8], type(exc).__name__)
        fail(row.id, {"code": -32603, "message": "The task queue is unavailable, so the task could not go on."})


def claim(task_id: str) -> ToolTask | None:
    """The run of a queued task, now this worker's; None when it is not queued (cancelled, or delivered twice)."""
    now = timezone.now()
    claimed = (
        _tasks()
        .filter(id=task_id, status=Status.WORKING, run=Run.QUEUED)
        .update(run=Run.RUNNING, heartbeat_at=now, updated_at=now)
    )
    if not claimed:
        return None
    row = _tasks().get(id=task_id)
    if row.started_at is None:
        _tasks().filter(id=task_id).update(started_at=now)
    return row


def beat(task_id: str, status_message: str | None) -> bool:
    """The running worker is alive (with the latest progress message); False when the task was cancelled or
    failed meanwhile, and the run must stop."""
    now = timezone.now()
    changes: dict[str, Any] = {"heartbeat_at": now}
    if status_message is not None:
        changes.update(status_message=status_message[:STATUS_MESSAGE_LENGTH], updated_at=now)
    return bool(_tasks().filter(id=task_id, status=Status.WORKING, run=Run.RUNNING).update(**changes))


def complete(task_id: str, result: Mapping[str, Any]) -> bool:
    """The run ended with the tools/call result (a tool error included). False when the task ended before."""
    return _finish(task_id, status=Status.COMPLETED, result=dict(result), status_message="")


def fail(task_id: str, error: Mapping[str, Any]) -> bool:
    """The run ended with a JSON-RPC error, as a direct call would have. False when the task ended before."""
    message = str(error.get("message", ""))[:STATUS_MESSAGE_LENGTH]
    return _finish(task_id, status=Status.FAILED, error=dict(error), status_message=message)


def _finish(task_id: str, **changes: Any) -> bool:
    now = timezone.now()
    return bool(
        _tasks()
        .filter(id=task_id, status=Status.WORKING)
        .exclude(run=Run.IDLE)
        .update(run=Run.IDLE, finished_at=now, updated_at=now, call={}, **changes)
    )


def park(task_id: str, input_requests: Mapping[str, Any], state: str, status_message: str = "") -> bool:
    """The run stopped at questions for the client: the task waits (input_required) with them pending."""
    now = timezone.now()
    with transaction.atomic():
        row = _tasks().select_for_update().filter(id=task_id, status=Status.WORKING, run=Run.RUNNING).first()
        if row is None:
            return False
        call = {**row.call, "state": state, "responses": {}}
        _tasks().filter(id=task_id, status=Status.WORKING, run=Run.RUNNING).update(
            status=Status.INPUT_REQUIRED,
            run=Run.IDLE,
            input_requests=dict(input_requests),
            call=call,
            status_message=status_message[:STATUS_MESSAGE_LENGTH],
            updated_at=now,
        )
    return True


def counts_since(since: datetime) -> dict[str, int]:
    """Tasks created since `since`, by status (for the usage dashboard)."""
    counts = dict.fromkeys(Status.values, 0)
    rows = _tasks().filter(created_at__gte=since).values("status").annotate(n=Count("id"))
    counts.update({row["status"]: row["n"] for row in rows})
    return counts
