"""Scope hierarchy: a broader scope implies the narrower ones it names, transitively."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mcp_expose.core.conf import get_settings


def expand_scopes(granted: Iterable[str], hierarchy: Mapping[str, Iterable[str]] | None = None) -> frozenset[str]:
    """`granted` plus every scope they imply. Cycles in the hierarchy are harmless."""
    hierarchy = get_settings().SCOPE_HIERARCHY if hierarchy is None else hierarchy
    expanded: set[str] = set()
    pending = list(granted)
    while pending:
        scope = pending.pop()
        if scope not in expanded:
            expanded.add(scope)
            pending.extend(hierarchy.get(scope, ()))
    return frozenset(expanded)
