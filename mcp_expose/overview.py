"""What a caller would see in tools/list and why the rest is hidden; and how heavy the catalog is for a model."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .catalog import Catalog, ExposureState, ToolEntry
from .policy import decide
from .principal import Principal
from .registry import CapabilityRegistry
from .results import compact_json
from .schema import thaw

BYTES_PER_TOKEN = 4  # a common rule of thumb for JSON and English text


@dataclass(frozen=True)
class Lint:
    name_length: int
    description_length: int
    schema_bytes: int
    estimated_tokens: int
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class Visibility:
    key: str
    name: str
    kind: str
    visible: bool
    reason: str  # why hidden; "" when visible


@dataclass(frozen=True)
class CatalogLint:
    tool_count: int
    schema_bytes: int
    estimated_tokens: int
    longest_descriptions: list[tuple[str, int]] = field(default_factory=list)


def lint_entry(entry: ToolEntry) -> Lint:
    """Sizes a model pays for in its context, and anything that would break a client."""
    definition = {"name": entry.name, "description": entry.description, "inputSchema": thaw(entry.input_schema)}
    if entry.output_schema is not None:
        definition["outputSchema"] = thaw(entry.output_schema)
    size = len(compact_json(definition).encode())
    text = compact_json(thaw(entry.input_schema))
    problems = []
    if "$ref" in text or "$defs" in text:
        problems.append("the input schema uses $ref/$defs, which many clients cannot follow")
    if len(entry.description) > 1024:
        problems.append("the description is over 1024 characters")
    if not entry.description:
        problems.append("there is no description: models pick tools by it")
    return Lint(len(entry.name), len(entry.description), size, math.ceil(size / BYTES_PER_TOKEN), tuple(problems))


def lint_catalog(catalog: Catalog) -> CatalogLint:
    lints = {entry.name: lint_entry(entry) for entry in catalog.tools}
    total = sum(lint.schema_bytes for lint in lints.values())
    longest = sorted(((name, lint.description_length) for name, lint in lints.items()), key=lambda pair: -pair[1])
    return CatalogLint(len(lints), total, math.ceil(total / BYTES_PER_TOKEN), longest[:5])


def explain(
    registry: CapabilityRegistry, rows: Mapping[str, ExposureState], catalog: Catalog, principal: Principal
) -> list[Visibility]:
    """Every declared tool, in declaration order, with whether `principal` sees it and why not."""
    served = {entry.key: entry for entry in catalog.tools}
    result = []
    for capability in registry:
        row = rows.get(capability.key)
        entry = served.get(capability.key)
        name = entry.name if entry is not None else ((row.wire_name if row else "") or capability.name)
        if not (row.enabled if row is not None else capability.enabled_by_default):
            result.append(Visibility(capability.key, name, capability.kind, False, "disabled"))
            continue
        if entry is None:
            result.append(Visibility(capability.key, name, capability.kind, False, "name conflict (see the catalog warnings)"))
            continue
        decision = decide(principal, entry)
        result.append(Visibility(capability.key, name, capability.kind, decision.allowed, _reason(decision)))
    return result


def _reason(decision: Any) -> str:
    if decision.allowed:
        return ""
    if decision.missing_scopes:
        return "missing scope: " + ", ".join(sorted(decision.missing_scopes))
    if decision.missing_permissions:
        return "missing permission: " + ", ".join(sorted(decision.missing_permissions))
    return decision.reason
