from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from mcp_expose.catalog.sync import sync_exposures
from mcp_expose.signals import catalog_changed


class Command(BaseCommand):
    help = "Create exposure rows for new declarations and mark rows whose declaration is gone as stale."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--database", default="default", help="Database alias to sync (default: 'default').")

    def handle(self, *args: Any, database: str, **options: Any) -> None:
        report = sync_exposures(using=database)
        if report.changed:
            catalog_changed()
        for key in report.created:
            self.stdout.write(f"created  {key}")
        for key in report.revived:
            self.stdout.write(f"revived  {key}")
        for key in report.marked_stale:
            self.stdout.write(self.style.WARNING(f"stale    {key} (no longer declared; kept, never served)"))
        if not report.changed:
            self.stdout.write("Exposure rows are up to date.")
