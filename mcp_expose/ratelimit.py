"""Per-tool, per-caller rate limits, counted in Django's cache so every process shares them. A cache that
cannot count (unreachable) fails the limited tools closed; tools without a limit never ask it.

Fixed windows: simple, and exact enough for "60/min". Counting is atomic on
backends with atomic `incr` (Redis, Memcached, local memory).
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass

from .process_cache import process_cache
from .shared_cache import guarded

UNITS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600, "d": 86400, "day": 86400}
RATE_PATTERN = re.compile(r"\s*(\d+)\s*/\s*(\d*)\s*([a-z]+?)s?\s*")


def parse_rate(rate: str) -> tuple[int, int]:
    """'60/min' → (60, 60); '5/10s' → (5, 10). Raises ValueError with the accepted forms."""
    match = RATE_PATTERN.fullmatch(rate.lower())
    if not match or match.group(3) not in UNITS or int(match.group(1)) < 1:
        raise ValueError(f"{rate!r} is not a rate; write it as calls/period, e.g. '60/min', '1000/day', '5/10s'.")
    multiplier = int(match.group(2) or 1)
    if multiplier < 1:
        raise ValueError(f"{rate!r} has an empty period; write it as calls/period, e.g. '60/min' or '5/10s'.")
    return int(match.group(1)), multiplier * UNITS[match.group(3)]


def stricter_rate(*rates: str) -> tuple[int, int] | None:
    """The rate allowing the fewest calls per second, of those given (blank ones ignored)."""
    parsed = [parse_rate(rate) for rate in rates if rate]
    return min(parsed, key=lambda pair: pair[0] / pair[1]) if parsed else None


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
