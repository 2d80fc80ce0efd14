"""The one authorization decision, used for visibility (tools/list) and enforcement (tools/call)."""

from __future__ import annotations

from dataclasses import dataclass

from mcp_expose.catalog.compiled import Catalog, ToolEntry
from mcp_expose.core.principal import Principal


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    # Why not, for operators (never sent to the caller, who only sees "unknown tool").
    reason: str = ""
    missing_scopes: frozenset[str] = frozenset()
    missing_permissions: frozenset[str] = frozenset()


ALLOWED = Decision(allowed=True)


def decide(principal: Principal, entry: ToolEntry) -> Decision:
    """May `principal` see and call `entry`? Pure: reads only the principal and the entry.

    Checked in order: scopes, allowed OAuth clients (API keys are not OAuth
    clients; the command line is trusted), Django permissions.
    """
    missing_scopes = entry.scopes - principal.scopes
    if missing_scopes:
        return Decision(False, "missing scope", missing_scopes=missing_scopes)
    if entry.allowed_clients and principal.method != "local" and principal.client_id not in entry.allowed_clients:
        return Decision(False, "client not allowed")
    if not principal.has_perms(entry.permissions):
        return Decision(False, "missing permission", missing_permissions=entry.permissions - principal.permissions)
    return ALLOWED


def visible_tools(catalog: Catalog, principal: Principal, *, apps: bool = False) -> tuple[ToolEntry, ...]:
    """The entries `principal` may use, in catalog order; `apps`: the client negotiated MCP Apps (else tools
    only an app may call are left out)."""
    return tuple(entry for entry in catalog.tools if entry.offered(apps) and decide(principal, entry).allowed)
