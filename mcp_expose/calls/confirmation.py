"""Human confirmation before a tool runs: never an argument the model could set itself.

Two channels. A 2026-07-28 client that can show forms gets one deterministic
form (an `input_required` result); its answer comes back with the sealed
request state. Every other client gets a link to an approval page, where the same
user says yes or no, and the repeated call then runs once. A tool whose entry says
`confirmation_channel == "approval_page"` always takes the approval page: a client
that answers forms by itself is not a person.

Either way a `Confirmation` row records the question and its answer, and moves
through its states by conditional UPDATEs, so nothing can be answered or used twice.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from django.urls import reverse
from django.utils import timezone

from mcp_expose.catalog.compiled import ToolEntry
from mcp_expose.core.asking import Elicit, InputRequired, next_round_state, read_state
from mcp_expose.core.conf import get_settings
from mcp_expose.core.db import tidies_connections
from mcp_expose.core.errors import AccessDenied, McpExposeError, ToolError
from mcp_expose.core.principal import Principal
from mcp_expose.declare.registry import CLIENT_CHANNEL

CONFIRM_FIELD = "confirm"
# Request-state entries: the question asked, and (once accepted) the confirmation later rounds rely on.
STATE_KEY = "confirmation"
CONFIRMED_KEY = "confirmed"


class ConfirmationRequired(ToolError):
    code = "confirmation_required"
    default_message = "A person must approve this call first."


class ConfirmationDeclined(ToolError):
    code = "confirmation_declined"
    default_message = "The call was not approved."


class StaleConfirmation(McpExposeError):
    """The confirmation in the request state was already answered or used: a replay."""


def arguments_digest(arguments: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_arguments(arguments).encode()).hexdigest()


def canonical_arguments(arguments: Mapping[str, Any]) -> str:
    return json.dumps(dict(arguments), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def summary(entry: ToolEntry, arguments: Mapping[str, Any]) -> str:
    """The same words every time for the same call, so a person reads exactly what will run."""
    lines = [f"Run the tool {entry.title or entry.name}?"]
    if entry.description:
        lines.append(entry.description.strip().splitlines()[0])
    lines.append(f"Arguments: {canonical_arguments(arguments)}")
    return "\n".join(lines)


def confirm_schema(entry: ToolEntry) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            CONFIRM_FIELD: {
                "type": "boolean",
                "title": f"Run {entry.title or entry.name}",
                "description": "Yes runs the tool once with the arguments shown; no cancels it.",
            }
        },
        "required": [CONFIRM_FIELD],
    }


def _user(principal: Principal) -> Any:
    user = principal.user
    if not getattr(user, "is_authenticated", False):
        raise AccessDenied("Only a signed-in user can confirm this tool's calls.")
    return user


def _expiry() -> Any:
    return timezone.now() + timedelta(seconds=get_settings().CONFIRMATION_TTL)


@tidies_connections
def ask_in_client(entry: ToolEntry, principal: Principal, arguments: Mapping[str, Any]) -> InputRequired:
    """Record a pending question and return the form for the client to show. Sync: writes a row."""
    from mcp_expose.models import Confirmation

    text = summary(entry, arguments)
    confirmation = Confirmation.objects.create(
        channel=Confirmation.Channel.ELICITATION,
        user=_user(principal),
        caller=principal.label,
        tool_key=entry.key,
        tool_name=entry.name,
        summary=text,
        arguments=json.loads(canonical_arguments(arguments)),
        arguments_digest=arguments_digest(arguments),
        expires_at=_expiry(),
    )
    questions = {CONFIRM_FIELD: Elicit(message=text, schema=confirm_schema(entry))}
    return InputRequired(questions, next_round_state(questions, {}, {STATE_KEY: str(confirmation.pk)}))


@tidies_connections
def answer_from_client(
    entry: ToolEntry, principal: Principal, arguments: Mapping[str, Any], state: str, accepted: bool
) -> bool:
    """Apply the client's answer to the question named in `state`. Returns whether to run.

    Raises `StaleConfirmation` when that question is not pending any more (a replay),
    does not belong to this caller, tool and arguments, or the tool takes no answer from a client.
    """
    from mcp_expose.models import Confirmation

    if entry.confirmation_channel != CLIENT_CHANNEL:
        raise StaleConfirmation("this tool takes its confirmations on the approval page only")
    confirmation_id = _confirmation_id(state, STATE_KEY)
    now = timezone.now()
    status = Confirmation.Status.CONSUMED if accepted else Confirmation.Status.DECLINED
    asked = _question(
        entry, principal, arguments, confirmation_id, Confirmation.Status.PENDING, [Confirmation.Channel.ELICITATION]
    )
    moved = asked.filter(expires_at__gt=now).update(status=status, decided_at=now, used_at=now if accepted else None)
    if not moved:
        raise StaleConfirmation("not pending, expired, or not this caller's")
    return accepted


@tidies_connections
def continue_confirmed(entry: ToolEntry, principal: Principal, arguments: Mapping[str, Any], state: str) -> None:
    """A later round of a confirmed call (the tool asked its client more): the confirmation named in
    the sealed state must be this caller's accepted one, for this tool and these arguments, recent,
    and given where the tool takes confirmations (a yes in the client does not do for the approval page)."""
    from mcp_expose.models import Confirmation

    accepted_since = timezone.now() - timedelta(seconds=get_settings().CONFIRMATION_TTL)
    confirmation_id = _confirmation_id(state, CONFIRMED_KEY)
    channels: list[str] = [Confirmation.Channel.APPROVAL_PAGE]
    if entry.confirmation_channel == CLIENT_CHANNEL:
        channels.append(Confirmation.Channel.ELICITATION)
    accepted = _question(entry, principal, arguments, confirmation_id, Confirmation.Status.CONSUMED, channels)
    if not accepted.filter(used_at__gt=accepted_since).exists():
        raise StaleConfirmation("no recent accepted confirmation of this call")


def _question(
    entry: ToolEntry,
    principal: Principal,
    arguments: Mapping[str, Any],
    confirmation_id: uuid.UUID,
    status: str,
    channels: list[str],
) -> Any:
    """The question about exactly this call, by this caller, asked on one of `channels`, in `status`."""
    from mcp_expose.models import Confirmation

    return Confirmation.objects.filter(
        pk=confirmation_id,
        channel__in=channels,
        status=status,
        user=_user(principal),
        tool_key=entry.key,
        arguments_digest=arguments_digest(arguments),
    )


def _confirmation_id(state: str, key: str) -> uuid.UUID:
    try:
        return uuid.UUID(read_state(state)[key])
    except (ValueError, KeyError, TypeError):
        raise StaleConfirmation("malformed state") from None


@tidies_connections
def check_approval_page(entry: ToolEntry, principal: Principal, arguments: Mapping[str, Any], base_url: str) -> str:
    """Return the approval's id when a person approved this exact call on the approval page (using it up).

    Otherwise raise `ConfirmationRequired` with the page's address, or
    `ConfirmationDeclined` after a no or once the question expired.
    """
    from mcp_expose.models import Confirmation

    user = _user(principal)
    digest = arguments_digest(arguments)
    now = timezone.now()
    open_states = [Confirmation.Status.PENDING, Confirmation.Status.APPROVED, Confirmation.Status.DECLINED]
    confirmation = (
        Confirmation.objects.filter(
            channel=Confirmation.Channel.APPROVAL_PAGE,
            user=user,
            tool_key=entry.key,
            arguments_digest=digest,
            status__in=open_states,
        )
        .order_by("-created_at")
        .first()
    )
    if confirmation is not None:
        rows = Confirmation.objects.filter(pk=confirmation.pk, status=confirmation.status)
        if confirmation.expires_at <= now:
            rows.update(status=Confirmation.Status.EXPIRED)
            raise ConfirmationDeclined("Nobody approved the call in time. Call the tool again to ask anew.")
        if confirmation.status == Confirmation.Status.DECLINED:
            rows.update(status=Confirmation.Status.CLOSED)
            raise ConfirmationDeclined("The call was declined on the approval page.")
        if confirmation.status == Confirmation.Status.APPROVED:
            if rows.update(status=Confirmation.Status.CONSUMED, used_at=now):
                return str(confirmation.pk)
            confirmation = None  # a concurrent call used this approval first
    if confirmation is None:
        confirmation = Confirmation.objects.create(
            channel=Confirmation.Channel.APPROVAL_PAGE,
            user=user,
            caller=principal.label,
            tool_key=entry.key,
            tool_name=entry.name,
            summary=summary(entry, arguments),
            arguments=json.loads(canonical_arguments(arguments)),
            arguments_digest=digest,
            expires_at=_expiry(),
        )
    url = base_url + reverse("mcp_expose:approve", args=[confirmation.pk])
    raise ConfirmationRequired(
        f"A person must approve this call. Ask the user to open {url} and approve it, then call the tool again "
        "with the same arguments.",
        details={"approval_url": url, "expires_at": confirmation.expires_at.isoformat()},
    )
