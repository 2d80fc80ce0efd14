"""Approved upstream tools as capabilities: what the catalog compiles beside the ones declared in code.

Only a definition a person approved becomes a capability, and only while its server is enabled. It is served as
`{server}__{tool}` (`{server}.{tool}` when `WIRE_NAMES` is "dotted"), under its exposure row like any local tool (rows for upstream tools start disabled, with
confirmation on: see `snapshots.approve`). The upstream's own hints are shown in the admin but not trusted: served
tools count as destructive and open-world until the admin's row says otherwise.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import partial
from typing import Any

from mcp_expose.core.conf import get_settings
from mcp_expose.declare.json_schemas import thaw
from mcp_expose.declare.names import portable_problem, upstream_wire_name
from mcp_expose.declare.registry import Annotations, Capability
from mcp_expose.declare.schema import SchemaSignature
from mcp_expose.models import UpstreamServer, UpstreamTool
from mcp_expose.upstream.calling import UpstreamCall, call_upstream
from mcp_expose.upstream.discovery import UpstreamTarget
from mcp_expose.upstream.fast_call import names_header_arguments
from mcp_expose.upstream.reader import ToolDefinition, metaschema_problem
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
    style = get_settings().WIRE_NAMES
    for tool in rows:
        server = tool.server
        if server.pk not in targets:
            targets[server.pk] = _target(server, problems)
        target = targets[server.pk]
        if target is None:
            continue
        if (refusal := _unservable_name(server, tool, style) or _unservable_schema(tool)) is not None:
            problems.append(refusal)
            continue
        try:
            capabilities.append(capability_for(server, tool, target, style))
        except Exception as exc:  # noqa: BLE001  (one unusable definition costs only its own tool)
            problems.append(f"{tool}: its approved definition cannot be served ({type(exc).__name__}: {exc}).")
    return capabilities, problems


def _target(server: UpstreamServer, problems: list[str]) -> UpstreamTarget | None:
    try:
        return UpstreamTarget.from_row(server)
    except SecretUnavailable as exc:
        problems.append(f"upstream {server.name}: {exc}; its tools are not served.")
        return None


def _unservable_name(server: UpstreamServer, tool: UpstreamTool, style: str) -> str | None:
    """Why `tool` cannot be served under a name of `style`, or None.

    A portable name is `{server}__{tool}`, and is only ever the upstream's own name behind the prefix: a name
    clients would refuse (a '.', which SEP-986 allows) is not rewritten, since `a.b` as `a_b` could meet the
    upstream's own `a_b`, and an approval must name one tool. A server named before the '__' rule is not served
    either (its name could be read two ways)."""
    if style == "dotted":
        return None
    if "__" in server.name or server.name.endswith("_"):
        return (
            f"upstream server {server.name!r}: '__' separates a server's name from its tools' names, so a server "
            "name may not contain it nor end with '_'; rename the server. Its tools are not served."
        )
    if (problem := portable_problem(tool.name)) is not None:
        return (
            f"{tool}: not served, because {problem}. Names are served as the upstream gives them, never rewritten; "
            "set MCP_EXPOSE['WIRE_NAMES'] = 'dotted' if every client of this deployment accepts dots."
        )
    return None


def _unservable_schema(tool: UpstreamTool) -> str | None:
    """Why `tool`'s approved definition cannot be listed, or None: whatever the database holds (an approval made
    before discovery checked the metaschema, a hand edit), a schema that is not JSON Schema costs its own tool, never
    the listing of every other."""
    definition = tool.approved or {}
    for field, required in (("input_schema", True), ("output_schema", False)):
        schema = definition.get(field)
        if schema is None and not required:
            continue
        if not isinstance(schema, dict):
            return f"{tool}: its approved {field} is not a JSON object; not served."
        if (problem := metaschema_problem(schema)) is not None:
            return f"{tool}: its approved {field} is not valid JSON Schema ({problem}); not served."
    return None


def capability_for(server: UpstreamServer, tool: UpstreamTool, target: UpstreamTarget, style: str) -> Capability:
    definition = ToolDefinition.from_json(tool.approved or {})
    output = definition.output_schema
    call = UpstreamCall(
        target=target,
        # The upstream's spelling now (a case-only rename is the same tool), served under the approved name.
        tool=tool.name,
        output=OutputCheck(output) if output is not None else None,
        protocol_version=server.protocol_version,
        header_arguments=names_header_arguments(thaw(definition.input_schema)),
    )
    return Capability(
        key=tool.key,
        name=upstream_wire_name(server.name, definition.name, style),
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
