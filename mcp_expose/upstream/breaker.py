"""A circuit breaker per upstream server, per process: after repeated failures, fail fast for a while.

Per process on purpose: what one process sees of an upstream (a connection refused, a timeout) is what its own
calls would meet, and sharing the state through the cache would put a network round trip in front of every call.
Each process therefore opens its own breaker after its own failures; two processes agree on what is approved (the
database holds it), not on how the upstream was doing a second ago.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(slots=True)
class _State:
    failures: int = 0
    opened_at: float | None = None
    probing: bool = False


class CircuitBreaker:
    """`threshold` failures in a row open it; after `cooldown` seconds one call is let through to probe. A
    success closes it, a failure opens it again for another `cooldown`."""

    def __init__(self, threshold: int, cooldown: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.threshold = threshold
        self.cooldown = cooldown
        self.clock = clock
        self._states: dict[int, _State] = {}
        self._lock = threading.Lock()

    def retry_after(self, server: int) -> float | None:
        """None when a call to `server` may go now; else in how many seconds to try again. Letting a call
        through a breaker that is half-open makes it the probe: other calls wait for its outcome."""
        with self._lock:
            state = self._states.get(server)
            if state is None or state.opened_at is None:
                return None
            waited = self.clock() - state.opened_at
            if waited < self.cooldown:
                return self.cooldown - waited
            if state.probing:
                return self.cooldown
            state.probing = True
            return None

    def succeeded(self, server: int) -> None:
        with self._lock:
            self._states.pop(server, None)

    def released(self, server: int) -> None:
        """A call let through ended without telling how the server is (it was cancelled): if it was the probe,
        the next call probes instead."""
        with self._lock:
            state = self._states.get(server)
            if state is not None:
                state.probing = False

    def failed(self, server: int) -> bool:
        """Count a failure; True when this one opened the breaker."""
        with self._lock:
            state = self._states.setdefault(server, _State())
            state.failures += 1
            reopened = state.probing
            state.probing = False
            if reopened or (state.opened_at is None and state.failures >= self.threshold):
                state.opened_at = self.clock()
                return True
            return False

    def state(self, server: int) -> str:
        """ "closed", "open" or "half-open", for the admin."""
        with self._lock:
            state = self._states.get(server)
            if state is None or state.opened_at is None:
                return "closed"
            return "half-open" if self.clock() - state.opened_at >= self.cooldown else "open"

    def states(self) -> dict[int, str]:
        """Each server with failures counted, and its state (a closed breaker with none is not listed)."""
        with self._lock:
            servers = list(self._states)
        return {server: self.state(server) for server in servers}

    def failures(self, server: int) -> int:
        with self._lock:
            state = self._states.get(server)
            return state.failures if state is not None else 0

    def reset(self) -> None:
        with self._lock:
            self._states.clear()
