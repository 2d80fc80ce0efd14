"""Lists in messages: the first few named, and how many more there are, so a long list never hides its length."""

from __future__ import annotations

from collections.abc import Sequence


def first_few(names: Sequence[str], shown: int = 3) -> str:
    """`'a', 'b', 'c' and 4 more`: the first `shown` quoted, then the count of the rest."""
    listed = ", ".join(repr(name) for name in names[:shown])
    return listed + (f" and {len(names) - shown} more" if len(names) > shown else "")
