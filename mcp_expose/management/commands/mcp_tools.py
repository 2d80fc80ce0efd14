from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand

from mcp_expose.access.policy import decide
from mcp_expose.catalog.compiled import provider
from mcp_expose.management.cli import local_principal
from mcp_expose.serving.wire import tool_definition


class Command(BaseCommand):
    help = "Show the tool catalog, as a given user would see it in tools/list."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--user", help="Show what this user sees (their Django permissions apply).")
        parser.add_argument("--scopes", help="Space-separated scopes the caller holds (default: all).")
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="Print the tools exactly as tools/list sends them."
        )

    def handle(self, *args: Any, user: str | None, scopes: str | None, as_json: bool, **options: Any) -> None:
        catalog = provider.get_sync()
        entries = list(catalog.tools)
        principal = None
        if user is not None:
            principal = local_principal(user, scopes, catalog)
            entries = [entry for entry in entries if decide(principal, entry).allowed]
        if as_json:
            # A view whose serializer depends on who calls shows this user's schema (with no --user: nobody's).
            tools = [
                tool_definition(entry, entry.input_schema_for(principal)).model_dump(
                    mode="json", by_alias=True, exclude_none=True
                )
                for entry in entries
            ]
            self.stdout.write(json.dumps({"tools": tools}, indent=2, ensure_ascii=False))
            return
        if not entries:
            self.stdout.write("No tools.")
            return
        for entry in entries:
            summary = entry.description.strip().splitlines()[0] if entry.description.strip() else ""
            requirements = " ".join(sorted(entry.scopes)) or "-"
            self.stdout.write(f"{self.style.SUCCESS(entry.name)}  [{requirements}]  {summary}")
        for problem in catalog.problems:
            self.stderr.write(self.style.WARNING(problem))
