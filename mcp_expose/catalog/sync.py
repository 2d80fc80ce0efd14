"""Keep exposure rows in step with the declarations in code."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction

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
    return report
