"""How many tools/list calls each hour saw: counted in memory, added to the hour's row in the background.

Listing is too frequent for a usage row each, and too cheap to wait on the database.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime

import anyio
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from mcp_expose.core.db import in_worker_thread, tidies_connections
from mcp_expose.core.outage import database_unavailable, outage

logger = logging.getLogger("mcp_expose.usage")


def listing_hour(moment: datetime | None = None) -> datetime:
    """The start of the hour holding `moment` (default: now), which a listing is counted under."""
    return (moment or timezone.now()).replace(minute=0, second=0, microsecond=0)


@tidies_connections
def count_list_call(count: int = 1, hour: datetime | None = None) -> None:
    """Add `count` tools/list calls to an hour's row (listing is too frequent for a row each)."""
    from mcp_expose.models import ListingCount

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
                unwritten = await in_worker_thread(_count_hours)(taken)
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
