"""Approved upstream tools as capabilities: what the catalog compiles beside the ones declared in code.

Only a definition a person approved becomes a capability, and only while its server is enabled. It is served as
`{server}.{tool}`, under its exposure row like any local tool (rows for upstream tools start disabled, with
confirmation on: see `snapshots.approve`). The upstream's own hints are shown in the admin but not trusted: served
tools count as destructive and open-world until the admin's row says otherwise.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import partial
from typing import Any

from mcp_expose.declare.json_schemas import thaw
from mcp_expose.declare.registry import Annotations, Capability
from mcp_expose.declare.schema import SchemaSignature
from mcp_expose.models import UpstreamServer, UpstreamTool
from mcp_expose.upstream.calling import UpstreamCall, call_upstream
from mcp_expose.upstream.discovery import UpstreamTarget
from mcp_expose.upstream.reader import ToolDefinition
from mcp_expose.upstream.results import OutputCheck
from mcp_expose.upstream.sealing import SecretUnavailable

logger = logging.getLogger("mcp_expose.upstream")

UPSTREAM_ANNOTATIONS = Annotations(read_only=False, destructive=True, idempotent=False, open_world=True)


class UpstreamSignature(SchemaSignature):
    """The approved input schema, served and checked as written, and the approved output schema beside it."""

    def __init__(self, input_schema: dict[str, Any], output_schema: Mapping[str, Any] | None) -> None:
        super().__init__(input_schema, as_written=True)
        self.output_schema = output_schema


def served_capabilities() -> tuple[list[Capability], list[str]]:
    """Every approved tool of every enabled upstream server as a capability, and why any was left out."""
    problems: list[str] = []
    targets: dict[int, UpstreamTarget | None] = {}
    capabilities: list[Capability] = []
    rows = (
        UpstreamTool.objects.filter(
            status__in=[UpstreamTool.Status.APPROVED, UpstreamTool.Status.CHANGED],
            approved__isnull=False,
            server__enabled=True,
        )
        .select_related("server")
        .order_by("server__name", "name")
    )
    for tool in rows:
        server = tool.server
        if server.pk not in targets:
            targets[server.pk] = _target(server, problems)
        target = targets[server.pk]
        if target is None:
            continue
        try:
            capabilities.append(capability_for(server, tool, target))
        except Exception as exc:  # noqa: BLE001  (one unusable definition costs only its own tool)
            problems.append(f"{tool}: its approved definition cannot be served ({type(exc).__name__}: {exc}).")
    return capabilities, problems


def _target(server: UpstreamServer, problems: list[str]) -> UpstreamTarget | None:
    try:
        return UpstreamTarget.from_row(server)
    except SecretUnavailable as exc:
        problems.append(f"upstream {server.name}: {exc}; its tools are not served.")
        return None


def capability_for(server: UpstreamServer, tool: UpstreamTool, target: UpstreamTarget) -> Capability:
    definition = ToolDefinition.from_json(tool.approved or {})
    output = definition.output_schema
    call = UpstreamCall(
        target=target,
        # The upstream's spelling now (a case-only rename is the same tool), served under the approved name.
        tool=tool.name,
        output=OutputCheck(output) if output is not None else None,
        protocol_version=server.protocol_version,
    )
    return Capability(
        key=tool.key,
        name=f"{server.name}.{definition.name}",
        kind="upstream",
        target=partial(call_upstream, call),
        source=UpstreamSignature(thaw(definition.input_schema), output),
        origin=f"upstream server {server.name!r} ({target.url})",
        title=definition.title,
        description=definition.description,
        annotations=UPSTREAM_ANNOTATIONS,
        enabled_by_default=False,
        is_async=True,
        timeout=target.connect_timeout + target.call_timeout,
        call_style="mapping",
    )
