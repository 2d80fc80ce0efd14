"""What a discovery means for the stored tools: it replaces the previous reading, and never what was approved.

- A tool read for the first time is new and pending: nothing is served until a person approves it.
- A tool read as it was approved stays approved (a pending change it had is dropped: the upstream went back).
- A tool read differently from its approved definition keeps serving the approved one; the reading waits beside
  it as a proposed change.
- A tool the upstream no longer lists is withdrawn: no longer served, its approved definition kept for the record.
- A discovery that reached nothing changes no tool: the last approved definitions stay as they were. The error and
  the diagnostics are stored on the server, for the admin.

Approving takes the proposed definition as the one served, and is logged with who approved what.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from django.db import transaction
from django.utils import timezone

from mcp_expose.core.errors import McpExposeError
from mcp_expose.models import ExposedTool, UpstreamServer, UpstreamTool
from mcp_expose.upstream.compatibility import schema_break
from mcp_expose.upstream.discovery import Discovery, UpstreamTarget, discover
from mcp_expose.upstream.sealing import SecretUnavailable

logger = logging.getLogger("mcp_expose.upstream")


def rediscover(server: UpstreamServer) -> tuple[Discovery, dict[str, int]]:
    """Discover `server` now and record it (from sync code: a command, an admin action)."""
    try:
        discovery = anyio.run(discover, UpstreamTarget.from_row(server))
    except SecretUnavailable as exc:
        discovery = Discovery(error=str(exc))
    return discovery, record_discovery(server, discovery)


@transaction.atomic
def record_discovery(server: UpstreamServer, discovery: Discovery) -> dict[str, int]:
    """Store `discovery` for `server`; how many tools are now new, changed, withdrawn and unchanged."""
    now = timezone.now()
    counts = {"new": 0, "changed": 0, "withdrawn": 0, "unchanged": 0}
    # One discovery of a server at a time: a second one waits here, then reads what the first stored. The row as
    # it is now, not as the caller read it (a listener's copy may be hours old, or the row gone).
    locked = UpstreamServer.objects.select_for_update().filter(pk=server.pk).first()
    if locked is None:
        return counts
    server = locked
    server.discovered_at = now
    server.discovery_error = discovery.error or ""
    server.diagnostics = [diagnostic.as_dict() for diagnostic in discovery.diagnostics]
    fields = ["discovered_at", "discovery_error", "diagnostics", "server_info"]
    if discovery.reached:
        server.server_info = dict(discovery.server_info)
        if server.protocol_version != discovery.protocol_version:  # calls adopt it: served, so saved alone
            server.protocol_version = discovery.protocol_version
            fields.append("protocol_version")
    server.save(update_fields=fields)
    if not discovery.reached:
        return counts
    stored = {tool.name.casefold(): tool for tool in UpstreamTool.objects.select_for_update().filter(server=server)}
    listed: set[str] = set()
    for definition in discovery.tools:
        key = definition.name.casefold()
        listed.add(key)
        tool = stored.get(key)
        if tool is None:
            UpstreamTool.objects.create(
                server=server,
                name=definition.name,
                proposed=definition.as_json(),
                proposed_digest=definition.digest,
                last_seen=now,
            )
            counts["new"] += 1
            continue
        if tool.name != definition.name:  # the same tool, its name now spelled in another case
            tool.name = definition.name
            tool.save(update_fields=["name"])
        counts[_reread(tool, definition.as_json(), definition.digest, now)] += 1
    for key, tool in stored.items():
        # A blocked tool stays blocked, listed or not: only a person unblocks it.
        if key not in listed and tool.status not in (UpstreamTool.Status.WITHDRAWN, UpstreamTool.Status.BLOCKED):
            tool.status = UpstreamTool.Status.WITHDRAWN
            tool.proposed, tool.proposed_digest = None, ""
            tool.save(update_fields=["status", "proposed", "proposed_digest"])
            counts["withdrawn"] += 1
    return counts


def _reread(tool: UpstreamTool, definition: dict[str, Any], digest: str, now: Any) -> str:
    """Update one stored tool from its new reading; which count it adds to."""
    Status = UpstreamTool.Status
    tool.last_seen = now
    was = tool.status
    outcome = "unchanged"
    if tool.status == Status.BLOCKED:
        # Blocked stays blocked, whatever it reads now; the reading is kept to show.
        changed = digest != (tool.proposed_digest or tool.approved_digest)
        tool.proposed, tool.proposed_digest = (definition, digest) if digest != tool.approved_digest else (None, "")
        outcome = "changed" if changed else "unchanged"
    elif tool.approved_digest and digest == tool.approved_digest:
        outcome = "unchanged" if tool.status == Status.APPROVED else "changed"  # a change withdrawn, or a comeback
        tool.status, tool.proposed, tool.proposed_digest = Status.APPROVED, None, ""
    elif tool.approved_digest:
        outcome = "unchanged" if digest == tool.proposed_digest and tool.status == Status.CHANGED else "changed"
        tool.status, tool.proposed, tool.proposed_digest = Status.CHANGED, definition, digest
        broken = schema_break((tool.approved or {}).get("input_schema") or {}, definition.get("input_schema") or {})
        if broken is not None:
            # Serving the approved copy would only produce failed calls: blocked until someone decides.
            tool.status, tool.block_reason = Status.BLOCKED, f"Blocked by discovery: {broken}."
            logger.warning("Upstream tool %s blocked: %s", tool, broken)
    else:
        outcome = "unchanged" if digest == tool.proposed_digest and tool.status == Status.PENDING else "changed"
        tool.status, tool.proposed, tool.proposed_digest = Status.PENDING, definition, digest
    # The status is saved only when it moved: that is what serves or withdraws a definition (see signals).
    fields = ["proposed", "proposed_digest", "last_seen", *(["status", "block_reason"] if tool.status != was else [])]
    tool.save(update_fields=fields)
    return outcome


class NothingToApprove(McpExposeError, ValueError):
    """The tool has no proposed definition, or is withdrawn or blocked: the message says which."""


@transaction.atomic
def approve(tool: UpstreamTool, user: Any, digest: str) -> None:
    """Serve the proposed definition whose digest is `digest` (the one the approver saw: a reading that came in
    after the page was shown is not approved by it)."""
    tool = UpstreamTool.objects.select_for_update().select_related("server").get(pk=tool.pk)
    if tool.status in (UpstreamTool.Status.WITHDRAWN, UpstreamTool.Status.BLOCKED):
        raise NothingToApprove(f"{tool} is {tool.get_status_display().lower()}; it cannot be approved.")
    if tool.proposed is None:
        raise NothingToApprove(f"{tool} has no definition waiting for approval.")
    if tool.proposed_digest != digest:
        raise NothingToApprove(f"{tool}'s proposed definition changed since it was shown; review it again.")
    tool.approved, tool.approved_digest = tool.proposed, tool.proposed_digest
    tool.proposed, tool.proposed_digest = None, ""
    tool.status, tool.approved_at, tool.approved_by = UpstreamTool.Status.APPROVED, timezone.now(), user
    tool.save()
    # Its exposure row, the first time: disabled, and every call confirmed, until the admin decides otherwise (an
    # existing row keeps what the admin set).
    ExposedTool.objects.get_or_create(
        key=tool.key, defaults={"enabled": False, "requires_confirmation": True, "destructive_hint": True}
    )
    logger.info("Upstream tool %s: definition %s approved by %s", tool, tool.approved_digest[:12], user)


@transaction.atomic
def unapprove_all(server: UpstreamServer) -> int:
    """Back to waiting for approval, every tool of `server` (its URL moved to another origin: what was approved
    there says nothing of what answers here). What was approved becomes the proposal, to review again."""
    count = 0
    for tool in UpstreamTool.objects.select_for_update().filter(server=server).filter(approved__isnull=False):
        tool.proposed = tool.proposed or tool.approved
        tool.proposed_digest = tool.proposed_digest or tool.approved_digest
        tool.approved, tool.approved_digest, tool.approved_at, tool.approved_by = None, "", None, None
        if tool.status != UpstreamTool.Status.BLOCKED:
            tool.status = UpstreamTool.Status.PENDING
        tool.save()
        count += 1
    if count:
        logger.info("Upstream server %s moved to another origin: %d approvals withdrawn", server, count)
    return count
