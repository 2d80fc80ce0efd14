"""`mcp_doctor --upstream NAME`: what stands between this deployment and one registered upstream server.

Each step is a finding, in the order a call meets it: the address (the SSRF guard, resolved now), the stored
secrets, a discovery (read-only: nothing is recorded), and whether what clients are served still matches what the
upstream lists.
"""

from __future__ import annotations

from collections.abc import Iterator

import anyio

from mcp_expose.core.ssrf_guard import AddressRefused, connectable_address
from mcp_expose.models import UpstreamServer, UpstreamTool
from mcp_expose.operator.doctor import Finding
from mcp_expose.upstream.calling import breaker
from mcp_expose.upstream.discovery import UpstreamTarget, discover
from mcp_expose.upstream.sealing import SecretUnavailable

# Diagnostics printed one by one; the rest are counted.
SHOWN_DIAGNOSTICS = 10


def probe_upstream(server: UpstreamServer) -> Iterator[Finding]:
    if not server.enabled:
        yield Finding(False, "enabled", f"{server.name} is disabled: none of its tools are served")
    try:
        _host, _port, addresses = connectable_address(server.url)
    except AddressRefused as exc:
        yield Finding(False, "address", str(exc))
        return
    yield Finding(True, "address", f"{server.url} resolves to {', '.join(str(a) for a in addresses)}, allowed")
    try:
        target = UpstreamTarget.from_row(server)
    except SecretUnavailable as exc:
        yield Finding(False, "secrets", str(exc))
        return
    yield Finding(True, "secrets", f"{len(target.headers)} header(s) can be sent" if target.headers else "none needed")
    found = anyio.run(discover, target)
    if not found.reached:
        yield Finding(False, "discovery", found.error or "not reached")
        return
    refused = f"; {len(found.diagnostics)} entries refused by the bounded reader" if found.diagnostics else ""
    yield Finding(
        not found.diagnostics,
        "discovery",
        f"{found.protocol_version}, {len(found.tools)} tool(s) read{refused}",
    )
    for diagnostic in found.diagnostics[:SHOWN_DIAGNOSTICS]:
        yield Finding(False, "discovery", str(diagnostic))
    if len(found.diagnostics) > SHOWN_DIAGNOSTICS:
        more = len(found.diagnostics) - SHOWN_DIAGNOSTICS
        yield Finding(
            False,
            "discovery",
            f"and {more} more not shown here: `manage.py mcp_discover --server {server.name}` records them all, "
            "and the server's page in the admin lists them",
        )
    listed = {tool.name.casefold(): tool.digest for tool in found.tools}
    served = list(
        UpstreamTool.objects.filter(
            server=server, status__in=[UpstreamTool.Status.APPROVED, UpstreamTool.Status.CHANGED]
        )
    )
    for tool in served:
        digest = listed.get(tool.name.casefold())
        if digest is None:
            yield Finding(False, "approved tools", f"{tool.name} is approved but no longer listed")
        elif digest != tool.approved_digest:
            yield Finding(False, "approved tools", f"{tool.name} is listed with a definition that is not approved")
    if not served:
        yield Finding(True, "approved tools", "none approved yet")
    state = breaker().state(server.pk)
    yield Finding(state == "closed", "breaker (this process)", state)
