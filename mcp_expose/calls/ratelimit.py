"""Per-tool, per-caller rate limits, counted in Django's cache so every process shares them. A cache that
cannot count (unreachable) fails the limited tools closed; tools without a limit never ask it.

Fixed windows: simple, and exact enough for "60/min". Counting is atomic on
backends with atomic `incr` (Redis, Memcached, local memory).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from mcp_expose.core.process_cache import process_cache
from mcp_expose.core.shared_cache import guarded


@dataclass(frozen=True)
class RateDecision:
    allowed: bool
    retry_after: int = 0


def hit(tool_key: str, caller: str, rate: tuple[int, int], now: float | None = None) -> RateDecision:
    """Count one call; say whether it is within `rate`. Sync: talks to the cache."""
    calls, period = rate
    now = time.time() if now is None else now
    window = int(now // period)
    key = f"mcp_expose:rate:{tool_key}:{caller}:{period}:{window}"
    # A cache that cannot count fails closed: DependencyUnavailable, answered `unavailable` with retry_after.
    count = guarded("counting a rate-limited call", _counted, key, period + 1)
    if count <= calls:
        return RateDecision(True)
    return RateDecision(False, retry_after=max(1, math.ceil((window + 1) * period - now)))


def _counted(key: str, timeout: int) -> int:
    """This window's count, after adding one."""
    cache = process_cache()
    if cache.add(key, 1, timeout):
        return 1
    try:
        return cache.incr(key)
    except ValueError:  # the window expired between add and incr
        cache.add(key, 1, timeout)
        return 1
