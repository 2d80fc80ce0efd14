from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

import httpx2
from django.core.management.base import BaseCommand, CommandError

from mcp_expose.core.endpoints import endpoints
from mcp_expose.operator.doctor import Finding, diagnose


class Command(BaseCommand):
    help = (
        "Probe an MCP endpoint as clients do: challenge, metadata, authorization server, redirects, Origin. "
        "With --site BASE_URL, probe every endpoint this project configures (PATH and ENDPOINTS) there. "
        "With --upstream NAME, probe a registered upstream server instead: address, secrets, discovery."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("url", nargs="?", help="The MCP endpoint, e.g. https://mcp.example.com/mcp")
        parser.add_argument("--timeout", type=float, default=10.0, help="Seconds per request (default 10).")
        parser.add_argument("--upstream", metavar="NAME", help="Probe the registered upstream server NAME.")
        parser.add_argument(
            "--site",
            metavar="BASE_URL",
            help="Probe every configured endpoint at this site, e.g. https://mcp.example.com (an endpoint with "
            "RESOURCE set is probed there).",
        )

    def handle(
        self,
        *args: Any,
        url: str | None,
        timeout: float,
        upstream: str | None,
        site: str | None,
        **options: Any,
    ) -> None:
        if sum(given is not None for given in (url, upstream, site)) != 1:
            raise CommandError("Give an endpoint URL to probe, --site BASE_URL or --upstream NAME (one of them).")
        failed = 0
        with httpx2.Client(follow_redirects=False, timeout=timeout) as http:
            if upstream is not None:
                failed += self._report(self._upstream_findings(upstream))
            elif site is not None:
                for endpoint in endpoints():
                    endpoint_url = endpoint.resource or site.rstrip("/") + endpoint.path
                    self.stdout.write(self.style.MIGRATE_HEADING(f"Endpoint {endpoint.name}: {endpoint_url}"))
                    failed += self._report(diagnose(endpoint_url, http, root_form=endpoint.is_default))
            else:
                failed += self._report(diagnose(url or "", http))
        self.stdout.write(f"{failed} check(s) failed." if failed else "All checks passed.")
        if failed:
            sys.exit(1)

    def _report(self, findings: Iterable[Finding]) -> int:
        """Print each finding; how many failed (an unreachable endpoint is one)."""
        failed = 0
        try:
            for finding in findings:
                mark = self.style.SUCCESS("PASS") if finding.passed else self.style.ERROR("FAIL")
                self.stdout.write(f"{mark}  {finding.check}: {finding.detail}")
                failed += not finding.passed
        except httpx2.HTTPError as exc:
            self.stdout.write(f"{self.style.ERROR('FAIL')}  reachable: {type(exc).__name__}: {exc}")
            failed += 1
        return failed

    @staticmethod
    def _upstream_findings(name: str) -> Any:
        from mcp_expose.models import UpstreamServer
        from mcp_expose.operator.upstream_probe import probe_upstream

        server = UpstreamServer.objects.filter(name__iexact=name).first()
        if server is None:
            names = ", ".join(UpstreamServer.objects.values_list("name", flat=True)) or "none"
            raise CommandError(f"No upstream server is named {name!r} (registered: {names}).")
        return probe_upstream(server)
