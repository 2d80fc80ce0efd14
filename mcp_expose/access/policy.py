"""The one authorization decision, used for visibility (tools/list) and enforcement (tools/call).

The decision is a list of rules (`RULES`), checked in order. Each rule says two things: whether a caller may use a
tool (`check`), and what it reads of the caller to decide (`key`). Cached listings are keyed by the second
(`listing_key`): callers with equal keys are shown one cached listing, so a rule that reads something of the caller
that its `key` does not return would let callers who should see different tools share one. A new condition is a
new `Rule`, or a change to one, with its `key` beside its `check`; tests/test_policy.py tries every rule against
callers that differ in each attribute they have, and fails on a key that hides a difference.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from mcp_expose.catalog.compiled import Catalog, ToolEntry
from mcp_expose.catalog.memo import MemoKind
from mcp_expose.core.principal import Principal


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    # Why not, for operators (never sent to the caller, who only sees "unknown tool").
    reason: str = ""
    missing_scopes: frozenset[str] = frozenset()
    missing_permissions: frozenset[str] = frozenset()


ALLOWED = Decision(allowed=True)


class Rule(ABC):
    """One condition of the decision, and what it reads of the caller to decide it."""

    @abstractmethod
    def asked(self, tools: Sequence[ToolEntry]) -> Any:
        """What the tools of one catalog ask of callers under this rule (built once per catalog), for `key`."""

    @abstractmethod
    def check(self, principal: Principal, entry: ToolEntry) -> Decision | None:
        """Why `principal` may not use `entry` under this rule, or None. Pure: reads the principal and the entry."""

    @abstractmethod
    def key(self, principal: Principal, asked: Any) -> Hashable:
        """Everything `check` reads of `principal`, narrowed to what the catalog's tools ask (`asked`): callers with
        equal keys get equal answers from `check` on every tool of that catalog."""


class Scopes(Rule):
    """The caller holds every scope the tool requires."""

    def asked(self, tools: Sequence[ToolEntry]) -> frozenset[str]:
        return frozenset().union(*(entry.scopes for entry in tools))

    def check(self, principal: Principal, entry: ToolEntry) -> Decision | None:
        missing = entry.scopes - principal.scopes
        return Decision(False, "missing scope", missing_scopes=missing) if missing else None

    def key(self, principal: Principal, asked: frozenset[str]) -> Hashable:
        return principal.scopes & asked


class AllowedClients(Rule):
    """An OAuth client the tool's row allows (API keys are not OAuth clients; the command line is trusted)."""

    def asked(self, tools: Sequence[ToolEntry]) -> frozenset[str]:
        return frozenset().union(*(entry.allowed_clients for entry in tools))

    def check(self, principal: Principal, entry: ToolEntry) -> Decision | None:
        if entry.allowed_clients and principal.method != "local" and principal.client_id not in entry.allowed_clients:
            return Decision(False, "client not allowed")
        return None

    def key(self, principal: Principal, asked: frozenset[str]) -> Hashable:
        return (principal.method == "local", principal.client_id if principal.client_id in asked else None)


class Permissions(Rule):
    """The caller's user has the tool's Django permissions (`Principal.has_perms`)."""

    def asked(self, tools: Sequence[ToolEntry]) -> frozenset[str]:
        return frozenset().union(*(entry.permissions for entry in tools))

    def check(self, principal: Principal, entry: ToolEntry) -> Decision | None:
        if principal.has_perms(entry.permissions):
            return None
        return Decision(False, "missing permission", missing_permissions=entry.permissions - principal.permissions)

    def key(self, principal: Principal, asked: frozenset[str]) -> Hashable:
        active = bool(getattr(principal.user, "is_active", False))
        return (principal.permissions & asked, principal.is_superuser, active)


RULES: tuple[Rule, ...] = (Scopes(), AllowedClients(), Permissions())
# What a catalog's tools ask of callers under each rule, by the rules asked (the default ones, or a test's).
POLICY_QUESTIONS: MemoKind[tuple[Rule, ...], tuple[Any, ...]] = MemoKind("policy questions", limit=8)


def decide(principal: Principal, entry: ToolEntry, rules: Sequence[Rule] = RULES) -> Decision:
    """May `principal` see and call `entry`? Pure: reads only the principal and the entry. The rules are checked
    in order (scopes, allowed OAuth clients, Django permissions), and the first refusal is the answer."""
    for rule in rules:
        refusal = rule.check(principal, entry)
        if refusal is not None:
            return refusal
    return ALLOWED


def listing_key(principal: Principal, catalog: Catalog, rules: tuple[Rule, ...] = RULES) -> tuple[Hashable, ...]:
    """What the decision reads of `principal`, narrowed to what `catalog`'s tools ask: equal keys see the same tools,
    and callers differing only in what no tool asks about share one."""
    asked = catalog.remember(POLICY_QUESTIONS, rules, lambda: tuple(rule.asked(catalog.tools) for rule in rules))
    return tuple(rule.key(principal, question) for rule, question in zip(rules, asked, strict=True))


def visible_tools(catalog: Catalog, principal: Principal, *, apps: bool = False) -> tuple[ToolEntry, ...]:
    """The entries `principal` may use, in catalog order; `apps`: the client negotiated MCP Apps (else tools
    only an app may call are left out)."""
    return tuple(entry for entry in catalog.tools if entry.offered(apps) and decide(principal, entry).allowed)
