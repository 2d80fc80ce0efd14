from __future__ import annotations

import sys
from typing import Any

import httpx2
from django.core.management.base import BaseCommand, CommandError

from mcp_expose.operator.doctor import diagnose


class Command(BaseCommand):
    help = (
        "Probe an MCP endpoint as clients do: challenge, metadata, authorization server, redirects, Origin. "
        "With --upstream NAME, probe a registered upstream server instead: address, secrets, discovery."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("url", nargs="?", help="The MCP endpoint, e.g. https://mcp.example.com/mcp")
        parser.add_argument("--timeout", type=float, default=10.0, help="Seconds per request (default 10).")
        parser.add_argument("--upstream", metavar="NAME", help="Probe the registered upstream server NAME.")

    def handle(self, *args: Any, url: str | None, timeout: float, upstream: str | None, **options: Any) -> None:
        if (url is None) == (upstream is None):
            raise CommandError("Give an endpoint URL to probe, or --upstream NAME (not both).")
        failed = 0
        try:
            with httpx2.Client(follow_redirects=False, timeout=timeout) as http:
                for finding in diagnose(url, http) if url is not None else self._upstream_findings(upstream or ""):
                    mark = self.style.SUCCESS("PASS") if finding.passed else self.style.ERROR("FAIL")
                    self.stdout.write(f"{mark}  {finding.check}: {finding.detail}")
                    failed += not finding.passed
        except httpx2.HTTPError as exc:
            self.stdout.write(f"{self.style.ERROR('FAIL')}  reachable: {type(exc).__name__}: {exc}")
            failed += 1
        self.stdout.write(f"{failed} check(s) failed." if failed else "All checks passed.")
        if failed:
            sys.exit(1)

    @staticmethod
    def _upstream_findings(name: str) -> Any:
        from mcp_expose.models import UpstreamServer
        from mcp_expose.operator.upstream_probe import probe_upstream

        server = UpstreamServer.objects.filter(name__iexact=name).first()
        if server is None:
            names = ", ".join(UpstreamServer.objects.values_list("name", flat=True)) or "none"
            raise CommandError(f"No upstream server is named {name!r} (registered: {names}).")
        return probe_upstream(server)
