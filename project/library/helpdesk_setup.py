"""The demo's upstream on first run: start the helpdesk server, register it, and approve one of its tools.

The demo approves `lookup_ticket` in the admin's name, once, so that the first client call already lists
`helpdesk__lookup_ticket` beside the library's tools. Its other tools wait for approval in the admin, as every
upstream tool does. If the helpdesk cannot start (its port is taken), the demo serves without it and says so.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
from django.contrib.auth import get_user_model

from mcp_expose.core.conf import get_settings
from mcp_expose.declare.names import upstream_wire_name
from mcp_expose.models import ExposedTool, UpstreamServer, UpstreamTool
from mcp_expose.upstream.snapshots import approve, rediscover, unapprove_all

NAME = "helpdesk"
APPROVED_TOOL = "lookup_ticket"
STARTUP_SECONDS = 15.0


def start_helpdesk(host: str, port: int, data_dir: Path, out: Any) -> subprocess.Popen[bytes] | None:
    """The helpdesk process, serving and registered; None (and a line saying why) when it could not start."""
    with open(data_dir / "helpdesk.log", "wb") as log:  # the process keeps its own copy of the descriptor
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "project.helpdesk:app", "--host", host, "--port", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://{host}:{port}"
    try:
        ready = _answers(url, process)
        approved = register_helpdesk(f"{url}/mcp") if ready else ""
    except BaseException:
        _stop(process)
        raise
    if not ready:
        _stop(process)
        out.write(f"  Upstream:      the helpdesk could not start on port {port} (see {data_dir / 'helpdesk.log'})")
        return None
    served = upstream_wire_name(NAME, APPROVED_TOOL, get_settings().WIRE_NAMES)
    out.write(f"  Upstream:      helpdesk at {url}/mcp, serving {served}{approved}")
    return process


def register_helpdesk(url: str) -> str:
    """Register (or move) the helpdesk row, discover it, and approve and enable `lookup_ticket` the first time."""
    server, created = UpstreamServer.objects.get_or_create(name=NAME, defaults={"url": url})
    if not created and server.url != url:
        # Another port is another origin: what was approved there is approved again, as the admin form does.
        server.url = url
        server.save(update_fields=["url", "updated_at"])
        unapprove_all(server)
    discovery, _ = rediscover(server)
    if not discovery.reached:
        return f" (discovery failed: {discovery.error})"
    tool = UpstreamTool.objects.filter(server=server, name=APPROVED_TOOL).first()
    if tool is None:
        return " (it no longer lists that tool)"
    if tool.status == UpstreamTool.Status.PENDING and tool.proposed_digest:
        approve(tool, get_user_model()._default_manager.get(username="admin"), tool.proposed_digest)
        row = ExposedTool.objects.get(key=tool.key)
        row.enabled, row.extra_scopes = True, "library:read"
        # The administrator vouches that it only reads: an upstream's own hints are not trusted, so without this it
        # is served as destructive under a reading scope (mcp_expose.W007).
        row.read_only_hint, row.destructive_hint = True, False
        row.save()
    pending = UpstreamTool.objects.filter(
        server=server, status__in=[UpstreamTool.Status.PENDING, UpstreamTool.Status.CHANGED]
    ).count()
    return f"; {pending} more waiting for approval in the admin" if pending else ""


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _answers(url: str, process: subprocess.Popen[bytes]) -> bool:
    """Whether our helpdesk serves `url` (not another program that holds the port while ours could not bind)."""
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            answer = httpx2.get(url + "/", timeout=1.0)
            if answer.status_code == 200 and answer.text == "helpdesk upstream":
                return True
        except httpx2.HTTPError:
            pass
        time.sleep(0.1)
    return False
