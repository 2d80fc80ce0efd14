"""Bounded, fair room for long-lived connections: listen streams and stateful 2025-11-25 sessions.

Each costs memory for as long as it stays open, so a process holds a fixed number, and one caller holds at most
a share of them: a single API key cannot take every slot. A refusal says which limit was hit and that the client
may retry; the log hears of a burst of refusals once, not of each.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from mcp_expose.core.principal import Principal

logger = logging.getLogger("mcp_expose.capacity")

# JSON-RPC leaves -32000..-32099 to servers; MCP reserves -32020..-32099 for its own errors, and the SDK uses
# -32000 and -32001 locally. A refusal for capacity is neither a bad request nor an internal error: it is its own
# code, which a client can recognise and retry after a while.
CAPACITY_REACHED = -32010
# A burst of refusals ends once this many seconds pass without one; the next refusal is logged again.
QUIET_SECONDS = 60.0

CallerKey = Hashable


def caller_key(principal: Principal, address: str | None) -> CallerKey:
    """Who holds a slot: an API key, an OAuth client acting for one user, or (no credential) one address."""
    if principal.method == "api_key":
        return ("api_key", principal.api_key_id)
    if principal.method == "oauth":
        return ("oauth", principal.client_id, getattr(principal.user, "pk", None))
    if principal.method in ("drf", "session"):
        return (principal.method, principal.authenticator, getattr(principal.user, "pk", None))
    return (principal.method, principal.via, address)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Which limit a new connection hit, as the client and the log are told."""

    reason: str  # "process" or "caller"
    limit: int
    what: str  # "listen streams", "sessions"

    @property
    def message(self) -> str:
        if self.reason == "caller":
            return f"Too many open {self.what} for this caller (at most {self.limit}): close one, or retry later."
        return f"This server process holds its limit of {self.limit} {self.what}; retry later."

    def error_data(self) -> dict[str, Any]:
        return {"reason": f"{self.what.replace(' ', '_')}_per_{self.reason}", "limit": self.limit, "retryable": True}


class Slots:
    """Open connections of one kind in this process, counted per caller, within both limits."""

    def __init__(self, what: str, limit: int | None, per_caller: int | None) -> None:
        self.what = what
        self.limit = limit
        self.per_caller = per_caller
        self.held: Counter[CallerKey] = Counter()
        self.total = 0
        self._refusals = RefusalLog(what)

    def take(self, key: CallerKey, label: str) -> Refusal | None:
        """A slot for `key`, or the limit that refuses it (logged once per burst). Call `give_back` when done."""
        refusal = None
        if self.limit is not None and self.total >= self.limit:
            refusal = Refusal("process", self.limit, self.what)
        elif self.per_caller is not None and self.held[key] >= self.per_caller:
            refusal = Refusal("caller", self.per_caller, self.what)
        if refusal is not None:
            self._refusals.refused(refusal, key, label)
            return refusal
        self.held[key] += 1
        self.total += 1
        return None

    def give_back(self, key: CallerKey) -> None:
        self.total -= 1
        self.held[key] -= 1
        if self.held[key] <= 0:
            del self.held[key]


class RefusalLog:
    """One warning when refusals start (per limit, and per caller for the per-caller limit), none for the rest of
    the burst: a client retrying in a loop must not flood the log."""

    def __init__(self, what: str) -> None:
        self.what = what
        # The last refusal of each burst under way, by (limit, caller). Callers at their cap hold slots, so this
        # stays smaller than the number of slots.
        self._bursts: dict[tuple[str, CallerKey], float] = {}

    def refused(self, refusal: Refusal, key: CallerKey, label: str) -> None:
        now = time.monotonic()
        self._bursts = {burst: last for burst, last in self._bursts.items() if now - last < QUIET_SECONDS}
        burst = (refusal.reason, key if refusal.reason == "caller" else None)
        ongoing = burst in self._bursts
        self._bursts[burst] = now
        if ongoing:
            return
        who = f" to {label}" if refusal.reason == "caller" else ""
        holder = "it holds" if refusal.reason == "caller" else "this process holds"
        logger.warning(
            "Refusing %s%s: %s its limit of %d; further refusals are not logged until %d s pass without one",
            self.what,
            who,
            holder,
            refusal.limit,
            QUIET_SECONDS,
        )
