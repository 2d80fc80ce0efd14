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
from .outage import database_unavailable, outage

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
    for tool, outcome, duration in (
        ToolCall.objects.filter(created_at__gte=since)
        .values_list("tool_name", "outcome", "duration_ms")
        .iterator(chunk_size=5000)
    ):
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
    """Listings counted in this process's memory and added to their hours' rows every `flush_seconds`
    (and at shutdown): a listing costs no database round trip. While the database is down the counts wait
    here, per hour (at most `MAX_HOURS` of them), and are added once it is back."""

    MAX_HOURS = 48

    MAX_BACKOFF = 30.0

    def __init__(self, flush_seconds: float = 1.0) -> None:
        self.flush_seconds = flush_seconds
        self.hours: dict[datetime, int] = {}
        self.flushed_at = time.monotonic()
        self._flushing = False  # one flush at a time: a database that hangs holds one thread, not one a second
        self._backoff = 0.0  # after a failed flush, seconds added before the next

    @property
    def pending(self) -> int:
        return sum(self.hours.values())

    async def count(self) -> None:
        hour = listing_hour()
        self.hours[hour] = self.hours.get(hour, 0) + 1
        if self._due():
            await self.flush()

    def _due(self) -> bool:
        return time.monotonic() - self.flushed_at >= self.flush_seconds + self._backoff

    async def flush(self) -> bool:
        """Add what is counted to the rows; False when the database could not take it (kept for next time,
        after a backoff) or another flush is still writing."""
        if self._flushing:
            return False
        taken, self.hours, self.flushed_at = self.hours, {}, time.monotonic()
        if not taken:
            return True
        self._flushing = True
        try:
            # Shielded: once the thread is adding, the outcome is known before a cancellation lands. Else a
            # listing cancelled meanwhile would take its count back while the thread still wrote it.
            with anyio.CancelScope(shield=True):
                unwritten = await sync_to_async(_count_hours, thread_sensitive=False)(taken)
        finally:
            self._flushing = False
        self._backoff = min(max(self._backoff * 2, 1.0), self.MAX_BACKOFF) if unwritten else 0.0
        for hour, calls in unwritten.items():
            self.hours[hour] = self.hours.get(hour, 0) + calls
        while len(self.hours) > self.MAX_HOURS:
            hour = min(self.hours)
            logger.error(
                "Dropped %d tools/list calls of %s from the listing count: the database was "
                "unavailable for more than %d hours",
                self.hours.pop(hour),
                hour,
                self.MAX_HOURS,
            )
        return not unwritten

    async def keep_flushing(self) -> None:
        """Flush every `flush_seconds` while listings wait, so an idle server does not sit on them."""
        while True:
            await anyio.sleep(self.flush_seconds)
            if self.hours and self._due():
                await self.flush()


def _count_hours(hours: dict[datetime, int]) -> dict[datetime, int]:
    """Add each hour's count; the ones that could not be written, returned. An outage is logged as one
    (`outage`); anything else with its traceback, once per flush."""
    unwritten: dict[datetime, int] = {}
    for hour, calls in sorted(hours.items()):
        if unwritten:  # the database failed on an earlier hour: keep the rest for next time
            unwritten[hour] = calls
            continue
        try:
            count_list_call(calls, hour)
        except Exception as exc:  # noqa: BLE001  (a counter must never break a listing)
            unwritten[hour] = calls
            if database_unavailable(exc):
                outage.refused("counting tools/list calls", exc)
            else:
                logger.warning("Could not add %d tools/list calls to the listing count", calls, exc_info=True)
    return unwritten


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
