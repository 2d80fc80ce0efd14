"""Rates written as "calls/period" ('60/min', '5/10s'): parsed and compared, for declarations, rows and limits."""

from __future__ import annotations

import re

UNITS = {
    "s": 1,
    "sec": 1,
    "second": 1,
    "m": 60,
    "min": 60,
    "minute": 60,
    "h": 3600,
    "hour": 3600,
    "d": 86400,
    "day": 86400,
}


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
