"""The policy's listing key covers everything its decision reads of the caller.

Cached listings are keyed by `policy.listing_key`: two callers with equal keys are shown one cached listing. So for
every pair of callers, equal keys must mean equal decisions on every tool. The callers here differ in every
attribute a `Principal` has (and in the flags of its user), each over values the catalog's tools do and do not ask
about. A rule whose `key` leaves out something its `check` reads is caught: the last test adds one and sees it fail.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import pytest

import mcp_expose
from mcp_expose.access.policy import RULES, Decision, Rule, decide, listing_key
from mcp_expose.catalog.compiled import Catalog, ToolEntry, compile_catalog
from mcp_expose.core.principal import Principal
from mcp_expose.declare.exposure_state import ExposureState
from mcp_expose.declare.registry import CapabilityRegistry


@dataclass(frozen=True)
class User:
    """The flags of a user that a rule might read (a Django user has them all)."""

    is_active: bool
    is_staff: bool
    is_superuser: bool


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    registry = CapabilityRegistry()

    def declare(key: str, **options: Any) -> None:
        mcp_expose.tool(key=key, registry=registry, **options)(lambda: None)

    declare("t.open")
    declare("t.read", scopes=["read"])
    declare("t.write", scopes=["read", "write"])
    declare("t.perm", permissions=["library.view_book"])
    declare("t.app_only")
    declare("t.both", scopes=["read"], permissions=["library.change_book"])
    rows = {
        "t.app_only": ExposureState("t.app_only", allowed_clients=frozenset({"app-1"})),
        "t.both": ExposureState("t.both", allowed_clients=frozenset({"app-2"})),
    }
    return compile_catalog(list(registry), rows)


def callers() -> list[Principal]:
    """Callers differing in each attribute of a Principal, over values some tool asks about and values none does."""
    users = [User(*flags) for flags in itertools.product([True, False], repeat=3)]
    return [
        Principal(
            user=user,
            scopes=scopes,
            method=method,
            permissions=permissions,
            is_superuser=superuser,
            client_id=client,
            api_key_id=key_id,
            via=via,
            authenticator=authenticator,
        )
        for user, scopes, method, permissions, superuser, client, key_id, via, authenticator in itertools.product(
            users,
            [frozenset(), frozenset({"read"}), frozenset({"read", "write"}), frozenset({"read", "unasked"})],
            ["api_key", "oauth", "local", "anonymous"],
            [frozenset(), frozenset({"library.view_book"}), frozenset({"library.delete_loan"})],
            [False, True],
            [None, "app-1", "app-2", "app-9"],
            [None, 7],
            ["", "stdio"],
            ["", "JWTAuthentication"],
        )
    ]


def hidden_differences(catalog: Catalog, rules: tuple[Rule, ...]) -> list[tuple[Principal, Principal]]:
    """Pairs of callers with one listing key whose decisions differ on some tool."""
    by_key: dict[Any, tuple[Principal, tuple[bool, ...]]] = {}
    found = []
    for principal in callers():
        seen = tuple(decide(principal, entry, rules).allowed for entry in catalog.tools)
        key = listing_key(principal, catalog, rules)
        first = by_key.setdefault(key, (principal, seen))
        if first[1] != seen:
            found.append((first[0], principal))
    return found


def test_callers_with_one_listing_key_see_the_same_tools(catalog: Catalog) -> None:
    assert hidden_differences(catalog, RULES) == []


def test_the_key_leaves_out_what_no_tool_asks_about(catalog: Catalog) -> None:
    """So callers differing only in that share one cached listing."""
    user = User(is_active=True, is_staff=False, is_superuser=False)
    base = Principal(user=user, scopes=frozenset({"read"}), method="oauth", client_id="app-9")
    other = Principal(user=user, scopes=frozenset({"read", "unasked"}), method="api_key", client_id="app-8", via="x")
    assert listing_key(base, catalog) == listing_key(other, catalog)
    assert listing_key(base, catalog) != listing_key(Principal(user=user, scopes=frozenset()), catalog)


def test_a_rule_whose_key_leaves_out_what_it_reads_is_caught(catalog: Catalog) -> None:
    """A new condition on the caller (here: staff only, for tools of one scope), added with a key that does not
    say so, would show a staff member's cached listing to everyone else with the same scopes."""

    class StaffForWrites(Rule):
        def asked(self, tools: Any) -> None:
            return None

        def check(self, principal: Principal, entry: ToolEntry) -> Decision | None:
            if "write" in entry.scopes and not principal.user.is_staff:
                return Decision(False, "staff only")
            return None

        def key(self, principal: Principal, asked: Any) -> Any:
            return None  # forgets that `check` reads `user.is_staff`

    class StaffForWritesKeyed(StaffForWrites):
        def key(self, principal: Principal, asked: Any) -> Any:
            return principal.user.is_staff

    assert hidden_differences(catalog, (*RULES, StaffForWrites()))
    assert hidden_differences(catalog, (*RULES, StaffForWritesKeyed())) == []


def test_a_rule_must_say_what_it_reads() -> None:
    class Unkeyed(Rule):
        def asked(self, tools: Any) -> None:
            return None

        def check(self, principal: Principal, entry: ToolEntry) -> Decision | None:
            return None

    with pytest.raises(TypeError, match="key"):
        Unkeyed()  # type: ignore[abstract]
