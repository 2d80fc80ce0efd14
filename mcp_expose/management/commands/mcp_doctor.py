from __future__ import annotations

import sys
from typing import Any

import httpx2
from django.core.management.base import BaseCommand

from mcp_expose.operator.doctor import diagnose


class Command(BaseCommand):
    help = "Probe an MCP endpoint as clients do: challenge, metadata, authorization server, redirects, Origin."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("url", help="The MCP endpoint, e.g. https://mcp.example.com/mcp")
        parser.add_argument("--timeout", type=float, default=10.0, help="Seconds per request (default 10).")

    def handle(self, *args: Any, url: str, timeout: float, **options: Any) -> None:
        failed = 0
        try:
            with httpx2.Client(follow_redirects=False, timeout=timeout) as http:
                for finding in diagnose(url, http):
                    mark = self.style.SUCCESS("PASS") if finding.passed else self.style.ERROR("FAIL")
                    self.stdout.write(f"{mark}  {finding.check}: {finding.detail}")
                    failed += not finding.passed
        except httpx2.HTTPError as exc:
            self.stdout.write(f"{self.style.ERROR('FAIL')}  reachable: {type(exc).__name__}: {exc}")
            failed += 1
        self.stdout.write(f"{failed} check(s) failed." if failed else "All checks passed.")
        if failed:
            sys.exit(1)
