"""One path for every tool call: lookup, policy, rate limit, validation, confirmation, invocation,
projection, and the usage row.

It knows nothing about HTTP or the MCP SDK; the server and the management
commands both call `call_tool` and render its `ToolOutcome`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import anyio

from mcp_expose.access.policy import decide
from mcp_expose.calls import confirmation, ratelimit, usage, usage_writer
from mcp_expose.calls.confirmation import StaleConfirmation
from mcp_expose.calls.failures import (
    ToolFailure,
    failure_for,
)
from mcp_expose.calls.invoke import ToolTimeout, invoke
from mcp_expose.calls.results import ResultTooLarge, compact_json, json_size
from mcp_expose.calls.tasks import TaskRefused, TaskView, owner_key
from mcp_expose.catalog.compiled import Catalog, ToolEntry
from mcp_expose.core import asking, telemetry
from mcp_expose.core.asking import (
    ClientInput,
    Elicit,
    InputRequired,
    MissingClientCapability,
    TaskRequired,
    read_state,
)
from mcp_expose.core.caller_credential import tool_facing
from mcp_expose.core.chain import CallChain
from mcp_expose.core.content import ContentBundle
from mcp_expose.core.context import (
    ContinueAsTask,
    InvocationContext,
    LogSender,
    ProgressReporter,
    no_log,
    no_progress,
)
from mcp_expose.core.db import in_worker_thread, tidies_connections
from mcp_expose.core.errors import InvalidInput, UnknownTool
from mcp_expose.core.outage import outage
from mcp_expose.core.principal import Principal
from mcp_expose.declare.apps import apps_negotiated
from mcp_expose.declare.registry import APPROVAL_PAGE_CHANNEL, Signature

logger = logging.getLogger("mcp_expose.dispatch")

# Outcome codes a usage row keeps; anticipated errors of other codes are recorded as "tool_error".
RECORDED_CODES = frozenset(
    {
        "invalid_input",
        "permission_denied",
        "not_found",
        "conflict",
        "rate_limited",
        "timeout",
        "confirmation_required",
        "input_required",
        "internal",
    }
)
# A call that became a task records no row of its own: its worker's run is the call's row.
TASK_STARTED = "task_started"
# The most of a call's argument values its span carries (where its row logs them), in characters of their JSON.
MAX_TRACED_ARGUMENTS = 4096
# What the metrics call a tool that is not in the catalog (or not for this caller).
UNKNOWN_TOOL_NAME = "_unknown"
# Raised through the dispatcher to the transport, which answers them in protocol terms.
CLIENT_QUESTIONS = (InputRequired, MissingClientCapability)


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    entry: ToolEntry
    value: Any = None
    failure: ToolFailure | None = None
    # Set when the client must answer questions first (2026-07-28): a confirmation, or the tool's own.
    input_required: InputRequired | None = None
    # The value's compact JSON when it was made to measure the value (the text block, when it is an object).
    text: str | None = None
    # Set when the call became an MCP task: the task, as the client is told of it.
    task: TaskView | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None and self.input_required is None and self.task is None


@dataclass(frozen=True, slots=True)
class CallRequest:
    """What the transport knows about a call, beyond name and arguments."""

    protocol_version: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    report_progress: ProgressReporter = no_progress
    send_log: LogSender = no_log
    # Closes this call's SSE stream for a polling client (2025-11-25 stateful sessions only).
    close_stream: Callable[[], Awaitable[None]] | None = None
    chain: CallChain = field(default_factory=CallChain)
    # How this call may ask its client for input, and the answers it already has.
    client: ClientInput = field(default_factory=ClientInput)
    # The unsealed request state of a repeated call (None on a first round).
    request_state: str | None = None
    # scheme://host of this server, for links (the approval page).
    base_url: str = ""
    client_address: str | None = None
    # How this call becomes an MCP task, when the client supports them (None: it cannot).
    start_task: StartTask | None = None
    # The task this run is, in a worker: its rate limit and confirmation were passed when it was made.
    task_id: str | None = None
    # The entry the transport already found and the policy allowed for this caller (the fast path decides before
    # it chooses to answer), so that a call is decided once.
    allowed: ToolEntry | None = None

    @property
    def can_elicit(self) -> bool:
        """Whether the client can answer a form in an `input_required` result on this request."""
        return self.client.rounds and not self.client.missing_capabilities({"form": CONFIRM_QUESTION})


CONFIRM_QUESTION = Elicit(message="", schema={})
# Makes the task for a call (entry, principal, arguments, request) and says what it is; raises `TaskRefused`.
StartTask = Callable[["ToolEntry", Principal, Mapping[str, Any], "CallRequest"], Awaitable[TaskView]]


def invocation_context(entry: ToolEntry, principal: Principal, request: CallRequest) -> InvocationContext:
    return InvocationContext(
        tool_name=entry.name,
        principal=tool_facing(principal),
        protocol_version=request.protocol_version,
        headers=request.headers,
        report_progress_callback=request.report_progress,
        chain=request.chain,
        client_address=request.client_address,
        client=request.client,
        send_log=request.send_log,
        close_stream_callback=request.close_stream,
        base_url=request.base_url,
        task_id=request.task_id,
        may_continue_as_task=entry.capability.task_starts_in_call and request.start_task is not None,
    )


def resolve_tool(
    catalog: Catalog, principal: Principal, name: str, *, apps: bool = False, allowed: ToolEntry | None = None
) -> ToolEntry:
    """The entry the caller may call, or `UnknownTool`: missing, disabled and forbidden look alike (and, for a
    client without MCP Apps, a tool only an app may call). `allowed`: the entry of `name` the policy already
    allowed for this caller, on this catalog, which is not decided again."""
    if allowed is not None and allowed.name == name and catalog.get(name) is allowed:
        entry: ToolEntry | None = allowed
    else:
        entry = catalog.get(name)
        if entry is not None and not decide(principal, entry).allowed:
            entry = None
    if entry is None or not entry.offered(apps):
        raise UnknownTool(name)
    return entry


async def call_tool(
    catalog: Catalog,
    principal: Principal,
    name: str,
    arguments: Mapping[str, Any] | None,
    request: CallRequest | None = None,
) -> ToolOutcome:
    """Run one call and record it. Raises `UnknownTool` and `StaleConfirmation`; every other failure
    becomes the outcome's `failure`. Cancellation propagates, and is recorded too."""
    request = request or CallRequest()
    started = time.perf_counter()
    record = usage.CallRecord(
        tool_name=name,
        principal=principal,
        depth=request.chain.depth,
        conversation_id=request.chain.conversation_id or "",
        protocol_version=request.protocol_version or "",
    )
    try:
        # Decided here unless the transport decided already (and timed it there).
        with telemetry.span("mcp_expose.policy") if request.allowed is None else telemetry.NOTHING:
            entry = resolve_tool(
                catalog, principal, name, apps=apps_negotiated(request.client.capabilities), allowed=request.allowed
            )
        record.tool_key = entry.key
        record.argument_bytes, record.argument_keys, record.argument_values = usage.describe_arguments(
            arguments, entry.log_argument_values
        )
        if entry.log_argument_values:  # the span carries them where the usage log does, redacted alike, bounded
            shown = json.dumps(record.argument_values, default=str)
            telemetry.annotate({"mcp_expose.tool.arguments": shown[:MAX_TRACED_ARGUMENTS]})
        if entry.task_support == "required" and request.start_task is None and request.task_id is None:
            raise TaskRequired()
        outcome = await _run(entry, principal, arguments or {}, request)
        if outcome.ok:
            outage.ended()
        _describe_outcome(record, outcome)
        return outcome
    except UnknownTool:
        record.outcome = "unknown_tool"
        raise
    except MissingClientCapability:
        record.outcome, record.error_code = "tool_error", "missing_client_capability"
        raise
    except StaleConfirmation:
        record.outcome, record.error_code = "declined", "stale_confirmation"
        raise
    except BaseException:
        record.outcome = "cancelled"
        raise
    finally:
        record.duration_ms = (time.perf_counter() - started) * 1000
        _count(record)
        # A call that became a task has no row of its own (its worker's run writes it); without a batching
        # writer in this process, the row is written now.
        if record.outcome != TASK_STARTED and not usage_writer.queue_or_none(record):
            with anyio.CancelScope(shield=True):
                await _write_usage_in_thread(record)


def _count(record: usage.CallRecord) -> None:
    """The call's outcome on its span, and in `mcp_expose.tool.calls`."""
    outcome = {"mcp_expose.outcome": record.outcome}
    if record.error_code:
        outcome["mcp_expose.error.code"] = record.error_code
    telemetry.annotate(outcome)
    if telemetry.metering():
        # A name no tool has is the caller's text: counted under one value, so it cannot grow the metric's series.
        name = record.tool_name if record.tool_key else UNKNOWN_TOOL_NAME
        telemetry.tool_calls.add(1, {"gen_ai.tool.name": name, **outcome})


def _describe_outcome(record: usage.CallRecord, outcome: ToolOutcome) -> None:
    if outcome.task is not None:
        record.outcome = TASK_STARTED
    elif outcome.input_required is not None:
        asked = outcome.input_required.questions
        record.outcome = (
            "confirmation_required"
            if confirmation.CONFIRM_FIELD in asked and outcome.entry.requires_confirmation
            else "input_required"
        )
    elif outcome.failure is not None:
        code = outcome.failure.code
        record.error_code = code
        record.incident = outcome.failure.incident or ""
        record.outcome = (
            "declined" if code == "confirmation_declined" else code if code in RECORDED_CODES else "tool_error"
        )
    else:
        record.outcome = "ok"
        value = outcome.value
        record.result_bytes = (
            value.size
            if isinstance(value, ContentBundle)
            else len(outcome.text.encode())
            if outcome.text is not None
            else json_size(value)
        )


# Each hop made once (a hop's wrapper costs a little to make): the database work a call may wait for.
_hit_in_thread = in_worker_thread(ratelimit.hit)
_write_usage_in_thread = in_worker_thread(usage.write)
_claim_round_in_thread = in_worker_thread(asking.claim_round)
_continue_confirmed_in_thread = in_worker_thread(confirmation.continue_confirmed)
_check_approval_page_in_thread = in_worker_thread(confirmation.check_approval_page)
_ask_in_client_in_thread = in_worker_thread(confirmation.ask_in_client)
_answer_from_client_in_thread = in_worker_thread(confirmation.answer_from_client)


async def _run(
    entry: ToolEntry, principal: Principal, arguments: Mapping[str, Any], request: CallRequest
) -> ToolOutcome:
    try:
        await claim_round(request)
        # A later round is the same call continued (each round answerable once), counted in its first round;
        # a task's run was counted when the task was made.
        if entry.rate_limit is not None and request.request_state is None and request.task_id is None:
            with telemetry.span("mcp_expose.rate_limit"):
                decision = await _hit_in_thread(entry.key, caller_identity(principal), entry.rate_limit)
            if not decision.allowed:
                return _refused(
                    entry,
                    "rate_limited",
                    f"Too many calls. Try again in {decision.retry_after} seconds.",
                    {"retry_after": decision.retry_after},
                )
        with telemetry.span("mcp_expose.validate_arguments"):
            validated = await validate(entry, principal, arguments, request)
        if entry.requires_confirmation and request.task_id is None:
            with telemetry.span("mcp_expose.confirmation", expected=CLIENT_QUESTIONS):
                await _confirm(entry, principal, arguments, request)
        if _starts_task_now(entry, request):
            assert request.start_task is not None  # (checked by _starts_task_now)
            return ToolOutcome(entry, task=await request.start_task(entry, principal, arguments, request))
        try:
            with telemetry.span("mcp_expose.invoke", {"gen_ai.tool.name": entry.name}):
                value = await invoke(entry, validated, invocation_context(entry, principal, request))
        except ContinueAsTask:
            assert request.start_task is not None  # (only then may the context raise it)
            return ToolOutcome(entry, task=await request.start_task(entry, principal, arguments, request))
        if isinstance(value, ContentBundle):
            if value.size > entry.max_result_bytes:
                raise ResultTooLarge(value.size, entry.max_result_bytes, "content")
            return ToolOutcome(entry, value=value)
        text = compact_json(value)  # made once: its size decides the answer, and it is the text block of an object
        if (size := len(text.encode())) > entry.max_result_bytes:
            raise ResultTooLarge(size, entry.max_result_bytes)
        return ToolOutcome(entry, value=value, text=text)
    except ToolTimeout as exc:
        return _refused(entry, "timeout", exc.message, {"timeout_seconds": exc.seconds})
    except TaskRefused as exc:
        return _refused(entry, exc.code, exc.message, None)
    except ResultTooLarge as exc:
        message = (
            f"The {exc.what} is {exc.size} bytes, over this tool's limit of {exc.limit} bytes, so nothing of it was "
            "sent. Ask for less (a filter, a smaller page or limit), or ask an operator to raise the tool's result "
            "size limit."
        )
        return _refused(entry, "result_too_large", message, {"size_bytes": exc.size, "limit_bytes": exc.limit})
    except InputRequired as exc:
        return ToolOutcome(entry, input_required=exc)
    except (StaleConfirmation, MissingClientCapability):
        raise
    except Exception as exc:  # noqa: BLE001  (the edge of the capability: everything else is a bug)
        return ToolOutcome(entry, failure=failure_for(entry, exc))


def _starts_task_now(entry: ToolEntry, request: CallRequest) -> bool:
    """Whether this call becomes a task before the tool runs: it supports tasks, the client does, this is not
    already the task's run, and the tool does not start in the call."""
    return (
        entry.task_support is not None
        and request.start_task is not None
        and request.task_id is None
        and not entry.capability.task_starts_in_call
    )


async def validate(
    entry: ToolEntry, principal: Principal, arguments: Mapping[str, Any], request: CallRequest
) -> dict[str, Any]:
    """The arguments checked against the schema that applies to this caller. A refusal from a view's
    schema is completed with the view's own errors (as HTTP reports them all at once), in a worker thread."""
    signature: Signature = entry.capability.signature
    if signature.varies_by_caller:
        for_caller = tidies_connections(signature.for_caller)
        signature = cast("Signature", await in_worker_thread(for_caller)(principal))
    try:
        return signature.validate_arguments(arguments)
    except InvalidInput as refusal:
        if not signature.explains_refusals:
            raise
        context = invocation_context(entry, principal, request)
        explain = tidies_connections(signature.explain_refusal)
        raise await in_worker_thread(explain)(refusal, arguments, context) from None


async def claim_round(request: CallRequest) -> None:
    """A repeated call answers one round, once: a replayed request state is refused (`StaleConfirmation`)."""
    round_id = request.client.round_id
    if request.request_state is not None and round_id is not None:
        if not await _claim_round_in_thread(round_id):
            raise StaleConfirmation("this round was already answered")


async def _confirm(entry: ToolEntry, principal: Principal, arguments: Mapping[str, Any], request: CallRequest) -> None:
    """Return to run now; raise `InputRequired` for the form, or a ToolError (required, declined).

    A tool confirmed on the approval page only never reads the client's answers: an elicitation
    `accept` from a client that answers by itself is not a person's yes."""
    client = request.client
    state = read_state(request.request_state)
    if confirmation.CONFIRMED_KEY in state and request.request_state is not None:
        # A later round: the tool asked its client more after the person said yes.
        await _continue_confirmed_in_thread(entry, principal, arguments, request.request_state)
        return
    if entry.confirmation_channel == APPROVAL_PAGE_CHANNEL or not request.can_elicit:
        approved = await _check_approval_page_in_thread(entry, principal, arguments, request.base_url)
        # Questions the tool asks next carry the approval, so a later round needs no second one.
        client.carried = {confirmation.CONFIRMED_KEY: approved}
        return
    if confirmation.STATE_KEY not in state:
        raise await _ask_in_client_in_thread(entry, principal, arguments)
    assert request.request_state is not None  # the state names the question answered
    ran = await _answer_from_client_in_thread(
        entry,
        principal,
        arguments,
        request.request_state,
        _accepted(client.answers.pop(confirmation.CONFIRM_FIELD, None)),
    )
    if not ran:
        raise confirmation.ConfirmationDeclined("The user declined the call.")
    # Questions the tool asks next carry the accepted confirmation, not the answered question.
    client.carried = {confirmation.CONFIRMED_KEY: state[confirmation.STATE_KEY]}


def _accepted(given: Any) -> bool:
    """The person's yes, from the answers to the confirmation question (by question digest: there is one)."""
    answer = next(iter(given.values()), None) if isinstance(given, Mapping) else None
    if not isinstance(answer, Mapping) or answer.get("action") != "accept":
        return False
    return (answer.get("content") or {}).get(confirmation.CONFIRM_FIELD) is True


caller_identity = owner_key  # one caller for rate limits and for tasks alike


def _refused(entry: ToolEntry, code: str, message: str, details: Any) -> ToolOutcome:
    logger.info("Tool %s refused the call: %s", entry.name, code)
    return ToolOutcome(entry, failure=ToolFailure(code=code, message=message, details=details))
