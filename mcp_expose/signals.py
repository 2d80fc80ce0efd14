"""Signal wiring: rows follow migrations; row changes move the revision stamp."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db import transaction

from mcp_expose.catalog.compiled import provider
from mcp_expose.catalog.revision import bump_revision


def sync_after_migrate(sender: AppConfig, *, using: str = "default", plan: Any = None, **kwargs: Any) -> None:
    """Create rows for new capabilities once our tables are as the models expect."""
    from mcp_expose.catalog.sync import sync_exposures

    if sender.label != "mcp_expose":
        return
    # A plan that unapplied our migrations (all of them, or the latest columns) leaves nothing the
    # models can sync into: the rows follow when the app is migrated forward again.
    if not _fully_migrated(sender.label, using):
        return
    if sync_exposures(using=using).changed:
        transaction.on_commit(catalog_changed, using=using)


def row_saved(sender: type, *, using: str = "default", **kwargs: Any) -> None:
    transaction.on_commit(catalog_changed, using=using)


# What a discovery writes on a server that changes nothing served: its last-discovery facts.
UNSERVED_FIELDS = frozenset({"discovered_at", "discovery_error", "diagnostics", "server_info"})


def upstream_saved(
    sender: type,
    *,
    instance: Any,
    created: bool = False,
    update_fields: Any = None,
    using: str = "default",
    **kwargs: Any,
) -> None:
    """An upstream server or tool saved: the catalog recompiles unless nothing served changed. A tool says what
    it served when it was read (`served_when_loaded`); a server, which fields the save wrote."""
    if hasattr(instance, "served_state"):
        before = instance.served_when_loaded
        instance.served_when_loaded = after = instance.served_state()
        if before == after:
            return  # a reading beside the approved copy, a tool withdrawn that was never served, …
    elif update_fields is not None and set(update_fields) <= UNSERVED_FIELDS:
        return
    transaction.on_commit(catalog_changed, using=using)


def catalog_changed() -> None:
    """Tell every process (through the cache) and this one (directly) to recompile, and open
    `subscriptions/listen` streams that the lists changed."""
    from mcp_expose.serving.events import announce_catalog_change

    revision = bump_revision()
    provider.invalidate()
    announce_catalog_change(revision)


def _fully_migrated(app_label: str, using: str) -> bool:
    from django.db import connections
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connections[using])
    return not executor.migration_plan(executor.loader.graph.leaf_nodes(app_label))
