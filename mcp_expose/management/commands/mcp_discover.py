from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from mcp_expose.models import UpstreamServer
from mcp_expose.upstream.snapshots import rediscover


class Command(BaseCommand):
    help = (
        "Read what each enabled upstream server lists now, and store it: new tools wait for approval, changed ones "
        "keep serving their approved definition until a change is approved. Fails when a server could not be read."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--server", help="Only this upstream server (by name), enabled or not.")

    def handle(self, *args: Any, server: str | None, **options: Any) -> None:
        chosen = UpstreamServer.objects.filter(name=server) if server else UpstreamServer.objects.filter(enabled=True)
        servers = list(chosen)
        if server and not servers:
            raise CommandError(f"No upstream server is named {server!r}.")
        if not servers:
            self.stdout.write("No upstream server is enabled.")
            return
        failed = 0
        for row in servers:
            discovery, counts = rediscover(row)
            if not discovery.reached:
                failed += 1
                self.stdout.write(self.style.ERROR(f"{row.name}: not read: {discovery.error}"))
                continue
            self.stdout.write(
                f"{row.name}: {len(discovery.tools)} tools read ({counts['new']} new, {counts['changed']} changed, "
                f"{counts['withdrawn']} withdrawn), {len(discovery.diagnostics)} refused or cut"
            )
            for diagnostic in discovery.diagnostics:
                self.stdout.write(self.style.WARNING(f"  {diagnostic}"))
        if failed:
            raise CommandError(f"{failed} of {len(servers)} upstream servers could not be read.")
