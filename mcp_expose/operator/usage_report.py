"""Read the usage log: per-tool calls, error and denial rates, and latency percentiles."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Sum
from django.utils import timezone

from mcp_expose.calls import tasks
from mcp_expose.calls.listing_count import listing_hour

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
    """Per tool, by the name it was called by."""
    return _grouped(since, lambda name, key: name)


LOCAL = "(this site)"


def server_stats(since: datetime) -> list[ToolStats]:
    """Per upstream server its tools were served from, and one row for the tools of this site (`tool` holds
    the server's name): which upstream the errors and the time come from."""
    from mcp_expose.models import UpstreamServer

    names = {str(pk): name for pk, name in UpstreamServer.objects.values_list("pk", "name")}

    def server_of(name: str, key: str) -> str:
        if not key.startswith("upstream."):
            return LOCAL
        pk = key.split(".", 2)[1]
        return names.get(pk, f"(removed server #{pk})")

    return _grouped(since, server_of)


def _grouped(since: datetime, group: Callable[[str, str], str]) -> list[ToolStats]:
    from mcp_expose.models import ToolCall

    durations: dict[str, list[float]] = defaultdict(list)
    errors: dict[str, int] = defaultdict(int)
    denials: dict[str, int] = defaultdict(int)
    for name, key, outcome, duration in (
        ToolCall.objects.filter(created_at__gte=since)
        .values_list("tool_name", "tool_key", "outcome", "duration_ms")
        .iterator(chunk_size=5000)
    ):
        label = group(name, key)
        durations[label].append(duration)
        errors[label] += outcome not in NOT_ERRORS
        denials[label] += outcome in DENIALS
    stats = []
    for label in sorted(durations):
        values = sorted(durations[label])
        calls = len(values)
        stats.append(
            ToolStats(
                tool=label,
                calls=calls,
                errors=errors[label],
                denials=denials[label],
                error_rate=round(errors[label] / calls, 4),
                denial_rate=round(denials[label] / calls, 4),
                p50_ms=round(percentile(values, 0.50), 2),
                p95_ms=round(percentile(values, 0.95), 2),
            )
        )
    return stats


def list_calls(window: timedelta) -> int:
    """tools/list calls in every hour that `window` reaches into, from the one it starts in to the current one."""
    from mcp_expose.models import ListingCount

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
                "tasks": tasks.counts_since(now - span),
                "tools": [asdict(stat) for stat in tool_stats(now - span)],
                "servers": [asdict(stat) for stat in server_stats(now - span)],
            }
            for name, span in WINDOWS.items()
        },
    }


def hourly_calls(hours: int = 24) -> dict[str, list[int]]:
    """Calls per tool in each of the last `hours` hours, oldest first."""
    from django.db.models import Count
    from django.db.models.functions import TruncHour

    from mcp_expose.models import ToolCall

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
