from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone


class Command(BaseCommand):
    help = (
        "Delete usage rows, hourly listing counts and answered confirmations older than --days, in batches; mark "
        "lapsed ones expired. Delete MCP tasks past their time to live (TASK_TTL), and fail those no worker will "
        "finish (a run whose worker died, or that no worker took)."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--days", type=int, default=90, help="Keep this many days (default 90).")
        parser.add_argument("--batch-size", type=int, default=1000, help="Rows deleted per statement (default 1000).")

    def handle(self, *args: Any, days: int, batch_size: int, **options: Any) -> None:
        from mcp_expose.calls import tasks
        from mcp_expose.models import Confirmation, ListingCount, ToolCall, ToolTask

        if days < 0 or batch_size < 1:
            raise CommandError("--days must be 0 or more and --batch-size at least 1.")
        now = timezone.now()
        cutoff = now - timedelta(days=days)
        expired = Confirmation.objects.filter(status=Confirmation.Status.PENDING, expires_at__lte=now).update(
            status=Confirmation.Status.EXPIRED
        )
        calls = _delete_in_batches(ToolCall.objects.filter(created_at__lt=cutoff), batch_size)
        listings = ListingCount.objects.filter(hour__lt=cutoff).delete()[0]  # one row an hour: few
        confirmations = _delete_in_batches(
            Confirmation.objects.filter(created_at__lt=cutoff).exclude(status=Confirmation.Status.PENDING), batch_size
        )
        dead = tasks.fail_abandoned()
        expired_tasks = _delete_in_batches(ToolTask.objects.filter(expires_at__lt=now), batch_size)
        self.stdout.write(
            f"Deleted {calls} tool calls, {listings} hourly listing counts and {confirmations} confirmations older than {days} days; "
            f"{expired} unanswered confirmations marked expired. "
            f"Deleted {expired_tasks} expired tasks; {dead} tasks no worker will finish marked failed."
        )


def _delete_in_batches(queryset: Any, batch_size: int) -> int:
    deleted = 0
    while True:
        batch = list(queryset.values_list("pk", flat=True)[:batch_size])
        if not batch:
            return deleted
        deleted += queryset.model.objects.filter(pk__in=batch).delete()[0]
