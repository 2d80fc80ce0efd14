"""Whether calls checked against an approved input schema can still work against what the upstream lists now.

Clients keep the approved definition until a person approves the change, and their arguments are checked against
it. When the upstream's new schema would refuse what the approved one lets through (a new required argument, a
changed type, an argument no longer accepted), serving the approved copy only produces failed calls: the tool is
blocked instead, with the reason shown, until someone decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def schema_break(approved: Mapping[str, Any], proposed: Mapping[str, Any]) -> str | None:
    """Why `proposed` makes `approved` unusable, or None when the approved arguments still fit."""
    old_properties = _properties(approved)
    new_properties = _properties(proposed)
    newly_required = sorted(set(_required(proposed)) - set(_required(approved)))
    if newly_required:
        return f"the upstream now requires {_names(newly_required)}, which the approved schema does not"
    changed = sorted(
        name
        for name, schema in old_properties.items()
        if name in new_properties and not _still_fits(schema, new_properties[name])
    )
    if changed:
        return f"the type of {_names(changed)} changed from what was approved"
    if proposed.get("additionalProperties") is False:
        dropped = sorted(set(old_properties) - set(new_properties))
        if dropped:
            return f"the upstream no longer accepts {_names(dropped)}"
    return None


def _still_fits(old: Any, new: Any) -> bool:
    """Every type the approved property allowed is still allowed (unknown either side: assumed to fit)."""
    before, after = _types(old), _types(new)
    if before is None or after is None:
        return True
    # An integer is a number: a schema that widens integer to number still takes what was approved.
    return before <= (after | {"integer"} if "number" in after else after)


def _properties(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    properties = schema.get("properties")
    return properties if isinstance(properties, Mapping) else {}


def _required(schema: Mapping[str, Any]) -> list[str]:
    required = schema.get("required")
    return [name for name in required if isinstance(name, str)] if isinstance(required, list | tuple) else []


def _types(schema: Any) -> frozenset[str] | None:
    if not isinstance(schema, Mapping):
        return None
    kind = schema.get("type")
    if isinstance(kind, str):
        return frozenset({kind})
    if isinstance(kind, list | tuple) and all(isinstance(item, str) for item in kind):
        return frozenset(kind)
    return None


def _names(names: list[str]) -> str:
    shown = ", ".join(repr(name[:64]) for name in names[:5])
    return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")
