"""The run of an MCP task, in a worker of Django's Tasks framework (`manage.py db_worker`, Celery, ...).

`run_tool_task` is the Django task. It takes the queued run (a second delivery finds nothing to take), rebuilds
the caller from the row (the API key, the OAuth grant or the row a DRF class accepted is looked up again, and the
user must be active, so a revoked one runs nothing), and runs the call through the same dispatcher as a direct
call: policy, validation, timeout, transaction and usage row. Confirmation and the rate limit were passed when the
task was made. While it runs, it beats every TASK_HEARTBEAT seconds, carrying the latest progress message into the
status message; at each beat the caller is looked up again, and the run stops when the task was cancelled, or
fails it when the credential was revoked meanwhile. Its outcome is projected exactly as a direct call's: the
`CallToolResult` (tool errors included) completes the task, a JSON-RPC error fails it, and questions park it as
input_required.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, cast

import anyio
import mcp_types as types
from asgiref.sync import async_to_sync
from django.db.models import Q
from mcp.shared.exceptions import MCPError
from mcp_types import methods as sdk_methods
from mcp_types.version import LATEST_PROTOCOL_VERSION
from opentelemetry.trace import SpanKind, use_span

from mcp_expose.access.drf_authentication import credential_reference_holds
from mcp_expose.access.protected_resource import canonical_uri
from mcp_expose.access.scopes import expand_scopes
from mcp_expose.calls import tasks
from mcp_expose.calls.confirmation import StaleConfirmation
from mcp_expose.calls.dispatch import CallRequest, ToolOutcome, call_tool
from mcp_expose.catalog.compiled import provider
from mcp_expose.core import telemetry
from mcp_expose.core.asking import ClientInput, MissingClientCapability
from mcp_expose.core.background import backend_named, task
from mcp_expose.core.chain import InvalidChain, read_chain
from mcp_expose.core.conf import get_settings
from mcp_expose.core.db import in_worker_thread, tidies_connections
from mcp_expose.core.endpoints import DEFAULT_ENDPOINT, endpoint_named
from mcp_expose.core.errors import UnknownTool
from mcp_expose.core.outage import database_unavailable, outage
from mcp_expose.core.principal import AuthMethod, Principal, anonymous_principal, principal_for_user
from mcp_expose.serving.wire import internal_error, question_error, render_outcome

if TYPE_CHECKING:
    from mcp_expose.models import ToolTask

logger = logging.getLogger("mcp_expose.tasks")

REVOKED = {"code": types.INVALID_REQUEST, "message": "The credential that started this task is no longer valid."}


def run_tool_task(task_id: str) -> None:
    """Run the MCP task `task_id` (queued by `enqueue_run`)."""
    async_to_sync(run)(task_id)


# The Django task, by this module-level name (a worker finds it by its path). A TASKS setting the framework
# refuses must not stop the server: calls that would become tasks are then refused as `unavailable`.
_declared: Any = None
try:
    _declared = task()(run_tool_task)
except Exception as exc:  # noqa: BLE001  (reported by the W015 check; logged once here)
    logger.warning("MCP tasks cannot be queued: Django's Tasks framework refused the task (%s)", type(exc).__name__)
else:
    run_tool_task = _declared


def enqueue_run(task_id: str) -> None:
    """Queue the run of a task on the TASK_BACKEND backend. Sync; raises when the backend cannot take it."""
    if _declared is None:
        raise RuntimeError("Django's Tasks framework refused the task that runs MCP tasks; see manage.py check")
    _declared.using(backend=get_settings().TASK_BACKEND).enqueue(task_id)


def backend_problem() -> str | None:
    """Why tasks cannot run on the configured backend, or None (for the system checks and the doctor)."""
    alias = get_settings().TASK_BACKEND
    try:
        backend = backend_named(alias)
    except Exception as exc:  # noqa: BLE001  (any misconfiguration is reported, not raised)
        return f"the Tasks backend {alias!r} is not configured ({type(exc).__name__}: {exc})"
    name = type(backend).__name__
    if name == "DummyBackend":
        return f"the Tasks backend {alias!r} is Django's DummyBackend, which never runs anything"
    if name == "ImmediateBackend":
        return f"the Tasks backend {alias!r} is Django's ImmediateBackend, which runs each task inside the request"
    return None


async def run(task_id: str) -> None:
    """One run of a task, to its end (or until it is cancelled)."""
    row = await in_worker_thread(tidies_connections(tasks.claim))(task_id)
    if row is None:
        return
    principal = await in_worker_thread(tidies_connections(_principal_of))(row)
    if principal is None:
        await _settle(task_id, error=REVOKED)
        return
    latest: dict[str, str | None] = {"message": None}

    async def report_progress(progress: float, total: float | None, message: str | None) -> None:
        text = message or (f"{progress:g} of {total:g}" if total else f"{progress:g}")
        latest["message"] = text

    outcome: dict[str, Any] = {}
    async with anyio.create_task_group() as group:

        async def call() -> None:
            try:
                outcome.update(await _call(row, principal, report_progress))
            except Exception:
                outcome.update(error=_error_object(internal_error("tools/call (task)")))
            finally:
                group.cancel_scope.cancel()

        async def heartbeat() -> None:
            interval = get_settings().TASK_HEARTBEAT
            while True:
                await anyio.sleep(interval)
                message, latest["message"] = latest["message"], None
                stopped = await _while_the_database_answers(_beat, task_id, message, missed=ALIVE)
                if stopped is not ALIVE:
                    logger.info("Task %s of %s stopped: %s", task_id[:8], row.tool_name, stopped)
                    group.cancel_scope.cancel()
                    return

        group.start_soon(call)
        group.start_soon(heartbeat)
    if outcome:
        await _settle(task_id, **outcome)


ALIVE = "alive"


def _beat(task_id: str, message: str | None) -> str:
    """One heartbeat: the caller's credential is checked again as it stands now (a revoked one fails the task),
    then the beat is written. ALIVE, or why the run must stop."""
    from mcp_expose.models import ToolTask

    row = ToolTask.objects.select_related("user").filter(id=task_id).first()
    if row is None:
        return "it was deleted"
    if _principal_of(row) is None:
        tasks.fail(task_id, REVOKED)
        return "the credential that started it is no longer valid"
    if not tasks.beat(task_id, message):
        return "it was cancelled"
    return ALIVE


async def _call(row: ToolTask, principal: Principal, report_progress: Any) -> dict[str, Any]:
    """Run the call under a span of its own (a consumer's: the run of queued work), linked to the call that made
    the task; what to settle the task with."""
    if not telemetry.tracing():
        return await _run_call(row, principal, report_progress)
    version = row.call.get("protocol_version") or LATEST_PROTOCOL_VERSION
    attributes = {
        **telemetry.server_attributes("tools/call", row.tool_name, version, None),
        "mcp_expose.task.id": row.id,
    }
    span = telemetry.start_server_span(
        "tools/call",
        row.tool_name,
        attributes,
        parent=telemetry.NEW_TRACE,
        links=telemetry.link_to(row.call.get("traceparent")),
        kind=SpanKind.CONSUMER,
    )
    with use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False):
        settled = await _run_call(row, principal, report_progress)
        if "error" in settled:
            telemetry.failed(str(settled["error"].get("code")))
        elif (settled.get("result") or {}).get("isError") is True:
            telemetry.failed("tool_error")
        return settled


async def _run_call(row: ToolTask, principal: Principal, report_progress: Any) -> dict[str, Any]:
    call = row.call
    headers = dict(call.get("headers") or {})
    capabilities = types.ClientCapabilities.model_validate(call.get("capabilities") or {})
    try:
        chain = read_chain(headers)
    except InvalidChain:
        chain = read_chain({})
    request = CallRequest(
        protocol_version=call.get("protocol_version") or LATEST_PROTOCOL_VERSION,
        headers=headers,
        report_progress=report_progress,
        chain=chain,
        client=ClientInput.for_round(capabilities, call.get("state"), call.get("responses") or {}, rounds=True),
        base_url=call.get("base_url") or "",
        client_address=call.get("client_address"),
        task_id=row.id,
    )
    try:
        whole = await in_worker_thread(tidies_connections(provider.get_sync))()
        endpoint = endpoint_named(str(call.get("endpoint") or DEFAULT_ENDPOINT))
        if endpoint is None:  # the endpoint it was made at left the settings: nothing is offered there
            raise UnknownTool(row.tool_name)
        catalog = whole.for_endpoint(endpoint)
        name = _current_name(catalog, row.tool_key, row.tool_name)
        outcome: ToolOutcome = await call_tool(catalog, principal, name, call.get("arguments") or {}, request)
    except UnknownTool as exc:
        return {"error": {"code": types.INVALID_PARAMS, "message": str(exc)}}
    except (MissingClientCapability, StaleConfirmation) as exc:
        return {"error": _error_object(question_error(exc))}
    except Exception:
        return {"error": _error_object(internal_error("tools/call (task)"))}
    if outcome.input_required is not None:
        asked = outcome.input_required.as_result().model_dump(mode="json", by_alias=True, exclude_none=True)
        return {"input_requests": asked.get("inputRequests") or {}, "state": outcome.input_required.state}
    rendered = render_outcome(outcome)
    dumped = rendered.model_dump(mode="json", by_alias=True, exclude_none=True)
    version = request.protocol_version or LATEST_PROTOCOL_VERSION
    return {"result": sdk_methods.serialize_server_result("tools/call", version, dumped)}


async def _settle(
    task_id: str,
    *,
    result: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
    input_requests: dict[str, Any] | None = None,
    state: str | None = None,
) -> None:
    def settle() -> None:
        try:
            if input_requests is not None and state is not None:
                tasks.park(task_id, input_requests, state)
            elif error is not None:
                tasks.fail(task_id, error)
            elif result is not None:
                tasks.complete(task_id, result)
        except Exception as exc:
            if database_unavailable(exc):
                raise
            # The outcome cannot be stored as it is (a value the database refuses): the task fails, saying so.
            tasks.fail(task_id, _error_object(internal_error("tools/call (task)")))

    with anyio.CancelScope(shield=True):
        # A database that is down is waited for, up to the lease: past it, readers fail the task as dead anyway.
        with anyio.move_on_after(get_settings().TASK_LEASE):
            while not await _while_the_database_answers(settle, missed=False):
                await anyio.sleep(get_settings().TASK_HEARTBEAT)


async def _while_the_database_answers(func: Any, *args: Any, missed: Any) -> Any:
    """`func(*args)` in a worker thread; `missed` when the database is unavailable (the outage is logged once)."""
    try:
        result = await in_worker_thread(tidies_connections(func))(*args)
    except Exception as exc:
        if not database_unavailable(exc):
            raise
        outage.refused("running a task", exc)
        return missed
    return True if result is None else result


def _error_object(error: MCPError) -> dict[str, Any]:
    return error.error.model_dump(mode="json", by_alias=True, exclude_none=True)


def _principal_of(row: ToolTask) -> Principal | None:
    """The caller the task was made by, as it stands now: None when its credential, grant or user was revoked.
    Its scopes are those it had, narrowed to what the credential still grants."""
    from mcp_expose.models import ApiKey

    scopes = frozenset(row.scopes)
    if row.credential_method == "api_key":
        if row.api_key_id is None:
            return None
        key = ApiKey.objects.select_related("user").filter(pk=row.api_key_id).first()
        if key is None or not key.is_usable:
            return None
        return principal_for_user(
            key.user,
            scopes & expand_scopes(key.scope_set),
            "api_key",
            api_key_id=key.pk,
            api_key_prefix=key.prefix,
            credential=key,
        )
    if row.credential_method == "anonymous":
        return anonymous_principal(scopes) if get_settings().ALLOW_ANONYMOUS else None
    user = row.user
    if user is None or not user.is_active:
        return None
    if row.credential_method == "oauth":
        token = _live_grant(row)
        if token is None:
            return None
        granted = expand_scopes(token.scope.split())
        return principal_for_user(user, scopes & granted, "oauth", client_id=row.client_id, credential=token)
    if row.credential_method == "local":
        return principal_for_user(user, scopes, "local", via=str(row.call.get("via") or "stdio"))
    if row.credential_method in ("drf", "session"):
        # A project's authenticator (or the session) cannot be asked again from a worker: the run acts for the
        # user while the user stays active, with the scopes the call had, and while the row the class accepted
        # (DRF's Token) still exists, when it accepted one.
        reference = row.call.get("credential_row")
        if isinstance(reference, dict) and not credential_reference_holds(reference, user):
            return None
        authenticator = str(row.call.get("authenticator") or "")
        return principal_for_user(user, scopes, cast(AuthMethod, row.credential_method), authenticator=authenticator)
    return None


# Unexpired tokens of one client and user looked at when the task's own token was refreshed away.
MAX_GRANT_CANDIDATES = 50


def _live_grant(row: ToolTask) -> Any:
    """The access token to run as: the one last presented for the task if it still exists (DOT deletes a
    revoked token), else any unexpired token of the same client for the same user (the client refreshed it);
    None when the grant is gone."""
    from django.utils import timezone
    from oauth2_provider.models import get_access_token_model

    tokens = get_access_token_model().objects.filter(application__client_id=row.client_id)
    mine = tokens.filter(Q(user=row.user) | Q(user__isnull=True, application__user=row.user))
    token = mine.filter(pk=row.access_token_id).first() if row.access_token_id is not None else None
    if token is not None:
        return token
    # Only a token for the same resource (endpoint) carries the grant on: one for another endpoint is another grant.
    if "resource" not in row.call:  # a task made before tasks remembered their resource
        return mine.filter(expires__gt=timezone.now()).order_by("-expires").first()
    resources = {canonical_uri(resource) for resource in row.call["resource"]}
    live = mine.filter(expires__gt=timezone.now()).order_by("-expires")[:MAX_GRANT_CANDIDATES]
    return next(
        (
            candidate
            for candidate in live
            if {canonical_uri(str(resource)) for resource in candidate.resource or ()} == resources
        ),
        None,
    )


def _current_name(catalog: Any, key: str, queued_as: str) -> str:
    """The name the task's tool goes by now: by its key, so a task queued before a rename (an admin's, or a
    switch of WIRE_NAMES) still runs its tool; the name it was queued under when no tool has that key."""
    entry = next((entry for entry in catalog.tools if entry.key == key), None)
    return entry.name if entry is not None else queued_as
