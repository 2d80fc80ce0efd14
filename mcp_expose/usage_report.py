"""Read the usage log: per-tool calls, error and denial rates, and latency percentiles."""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

import anyio
from asgiref.sync import sync_to_async
from django.db import IntegrityError, transaction
from django.db.models import F, Sum
from django.utils import timezone

from .db import tidies_connections

DENIALS = frozenset({"permission_denied", "rate_limited", "declined", "unknown_tool"})
NOT_ERRORS = frozenset({"ok", "confirmation_required"}) | DENIALS
WINDOWS = {"day": timedelta(days=1), "week": timedelta(days=7)}
logger = logging.getLogger("mcp_expose.usage")


@dataclass(frozen=True)
class ToolStats:
    tool: str
    calls: int
    errors: int
    denials: int
    error_rate: float
    denial_rate: float
    p50_ms: float
    p95_ms: float


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list (0.0 for an empty one)."""
    if not sorted_values:
        return 0.0
    rank = max(1, round(fraction * len(sorted_values) + 0.4999))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def tool_stats(since: datetime) -> list[ToolStats]:
    from .models import ToolCall

    durations: dict[str, list[float]] = defaultdict(list)
    errors: dict[str, int] = defaultdict(int)
    denials: dict[str, int] = defaultdict(int)
    for tool, outcome, duration in ToolCall.objects.filter(created_at__gte=since).values_list(
        "tool_name", "outcome", "duration_ms"
    ).iterator(chunk_size=5000):
        durations[tool].append(duration)
        errors[tool] += outcome not in NOT_ERRORS
        denials[tool] += outcome in DENIALS
    stats = []
    for tool in sorted(durations):
        values = sorted(durations[tool])
        calls = len(values)
        stats.append(
            ToolStats(
                tool=tool,
                calls=calls,
                errors=errors[tool],
                denials=denials[tool],
                error_rate=round(errors[tool] / calls, 4),
                denial_rate=round(denials[tool] / calls, 4),
                p50_ms=round(percentile(values, 0.50), 2),
                p95_ms=round(percentile(values, 0.95), 2),
            )
        )
    return stats


def listing_hour(moment: datetime | None = None) -> datetime:
    """The start of the hour holding `moment` (default: now), which a listing is counted under."""
    return (moment or timezone.now()).replace(minute=0, second=0, microsecond=0)


@tidies_connections
def count_list_call(count: int = 1, hour: datetime | None = None) -> None:
    """Add `count` tools/list calls to an hour's row (listing is too frequent for a row each)."""
    from .models import ListingCount

    hour = hour or listing_hour()
    added = F("calls") + count
    if ListingCount.objects.filter(hour=hour).update(calls=added):
        return
    try:
        with transaction.atomic():
            ListingCount.objects.create(hour=hour, calls=count)
    except IntegrityError:  # another process made the hour's row first
        ListingCount.objects.filter(hour=hour).update(calls=added)


class ListingTally:
    """Listings counted in this process's memory and added to the hour's row every `flush_seconds`
    (and at an hour's end, and at shutdown): a listing costs no database round trip."""

    def __init__(self, flush_seconds: float = 1.0) -> None:
        self.flush_seconds = flush_seconds
        self.pending = 0
        self.hour: datetime | None = None
        self.flushed_at = time.monotonic()

    async def count(self) -> None:
        hour = listing_hour()
        if self.hour is not None and hour != self.hour:
            await self.flush()
        self.hour = hour
        self.pending += 1
        if time.monotonic() - self.flushed_at >= self.flush_seconds:
            await self.flush()

    async def flush(self) -> None:
        pending, hour = self.pending, self.hour
        self.pending, self.flushed_at = 0, time.monotonic()
        if not pending:
            return
        # Shielded: once the thread is adding, the outcome is known before a cancellation lands. Else a
        # listing cancelled meanwhile would take its count back while the thread still wrote it.
        with anyio.CancelScope(shield=True):
            try:
                await sync_to_async(count_list_call, thread_sensitive=False)(pending, hour)
            except Exception:
                if self.hour == hour:
                    self.pending += pending  # not written: try again with the next flush
                raise

    async def keep_flushing(self) -> None:
        """Flush every `flush_seconds` while listings wait, so an idle server does not sit on them."""
        while True:
            await anyio.sleep(self.flush_seconds)
            if self.pending:
                try:
                    await self.flush()
                except Exception:  # noqa: BLE001  (the database is down: counted again next time)
                    logger.warning("Could not add tools/list calls to the listing count", exc_info=True)


def list_calls(window: timedelta) -> int:
    """tools/list calls in every hour that `window` reaches into, from the one it starts in to the current one."""
    from .models import ListingCount

    since = listing_hour(timezone.now() - window)
    return ListingCount.objects.filter(hour__gte=since).aggregate(total=Sum("calls"))["total"] or 0


def summary() -> dict[str, Any]:
    now = timezone.now()
    return {
        "generated_at": now.isoformat(),
        "windows": {
            name: {
                "since": (now - span).isoformat(),
                "tools_list_calls": list_calls(span),
                "tools": [asdict(stat) for stat in tool_stats(now - span)],
            }
            for name, span in WINDOWS.items()
        },
    }


def hourly_calls(hours: int = 24) -> dict[str, list[int]]:
    """Calls per tool in each of the last `hours` hours, oldest first."""
    from django.db.models import Count
    from django.db.models.functions import TruncHour

    from .models import ToolCall

    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    start = now - timedelta(hours=hours - 1)
    series: dict[str, list[int]] = defaultdict(lambda: [0] * hours)
    rows = (
        ToolCall.objects.filter(created_at__gte=start)
        .annotate(hour=TruncHour("created_at"))
        .values_list("tool_name", "hour")
        .annotate(count=Count("pk"))
    )
    for tool, hour, count in rows:
        index = int((hour - start).total_seconds() // 3600)
        if 0 <= index < hours:
            series[tool][index] += count
    return dict(series)
