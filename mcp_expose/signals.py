"""Signal wiring: rows follow migrations; row changes move the revision stamp."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db import transaction

from .catalog import provider
from .revision import bump_revision


def sync_after_migrate(sender: AppConfig, *, using: str = "default", plan: Any = None, **kwargs: Any) -> None:
    """Create rows for new capabilities once our tables exist."""
    from .models import ExposedTool
    from .sync import sync_exposures

    if sender.label != "mcp_expose":
        return
    # A migration plan that unapplied our tables leaves nothing to sync into.
    if ExposedTool._meta.db_table not in _tables(using):
        return
    if sync_exposures(using=using).changed:
        transaction.on_commit(catalog_changed, using=using)


def row_saved(sender: type, *, using: str = "default", **kwargs: Any) -> None:
    transaction.on_commit(catalog_changed, using=using)


def catalog_changed() -> None:
    """Tell every process (through the cache) and this one (directly) to recompile, and open
    `subscriptions/listen` streams that the lists changed."""
    from .events import announce_catalog_change

    bump_revision()
    provider.invalidate()
    announce_catalog_change()


def _tables(using: str) -> list[str]:
    from django.db import connections

    return connections[using].introspection.table_names()
