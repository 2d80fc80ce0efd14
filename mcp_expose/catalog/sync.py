"""Keep exposure rows in step with the declarations in code."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from mcp_expose.core.endpoints import endpoints
from mcp_expose.declare.registry import CapabilityRegistry
from mcp_expose.declare.registry import registry as default_registry


@dataclass
class SyncReport:
    created: list[str] = field(default_factory=list)
    marked_stale: list[str] = field(default_factory=list)
    revived: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.created or self.marked_stale or self.revived)


def sync_exposures(registry: CapabilityRegistry | None = None, *, using: str = "default") -> SyncReport:
    """Create rows for new capabilities and flag rows whose capability is gone.

    Existing rows are never overwritten: they hold the administrator's decisions.
    """
    from mcp_expose.models import ExposedTool, UpstreamTool
    from mcp_expose.models.upstream import upstream_key

    registry = registry if registry is not None else default_registry
    report = SyncReport()
    with transaction.atomic(using=using):
        rows = {row.key: row for row in ExposedTool.objects.using(using).select_for_update()}
        for capability in registry:
            row = rows.get(capability.key)
            if row is None:
                rows[capability.key] = ExposedTool.objects.using(using).create(
                    key=capability.key, enabled=capability.enabled_by_default
                )
                report.created.append(capability.key)
            elif row.stale:
                row.stale = False
                row.save(update_fields=["stale", "updated_at"])
                report.revived.append(capability.key)
        # An upstream tool's row lives as long as the tool: it has no declaration in code.
        upstream = {
            upstream_key(server, name) for server, name in UpstreamTool.objects.values_list("server_id", "name")
        }
        for key, row in rows.items():
            if key not in registry and key not in upstream and not row.stale:
                row.stale = True
                row.save(update_fields=["stale", "updated_at"])
                report.marked_stale.append(key)
        report.created.extend(_sync_toolsets(rows, using))
    return report


def _sync_toolsets(rows: dict[str, Any], using: str) -> list[str]:
    """A toolset row for each configured endpoint that has none, as its settings' TOOLSET says."""
    from mcp_expose.models import EndpointToolset

    have = set(EndpointToolset.objects.using(using).values_list("endpoint", flat=True))
    created = []
    for endpoint in endpoints():
        if endpoint.name in have:
            continue
        toolset = endpoint.toolset
        row = EndpointToolset.objects.using(using).create(
            endpoint=endpoint.name,
            offer_everything=toolset.everything,
            tags=" ".join(sorted(toolset.tags)),
            read_only=toolset.read_only,
        )
        row.capabilities.set([rows[key] for key in sorted(toolset.keys) if key in rows])
        created.append(f"endpoint {endpoint.name}")
    return created
