"""What a caller would see in tools/list and why the rest is hidden; and how heavy the catalog is for a model."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp_expose.access.policy import decide
from mcp_expose.access.scopes import expand_scopes
from mcp_expose.calls.results import compact_json
from mcp_expose.catalog.compiled import Catalog, ToolEntry
from mcp_expose.core.conf import get_settings
from mcp_expose.core.principal import Principal
from mcp_expose.declare.exposure_state import ExposureState
from mcp_expose.declare.json_schemas import thaw
from mcp_expose.declare.names import served_name
from mcp_expose.declare.registry import Capability

BYTES_PER_TOKEN = 4  # a common rule of thumb for JSON and English text
MAX_DESCRIPTION_LENGTH = 1024  # clients cut or refuse longer descriptions
# A definition this heavy costs every model that much of its context on every listing, used or not.
HEAVY_DEFINITION_TOKENS = 1000


@dataclass(frozen=True)
class LintProblem:
    """Something about a tool that a client would trip on, as `manage.py check` reports it."""

    check_id: str
    message: str
    hint: str

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class ReadGrant:
    """What a token holds when it was granted just what one read-only tool needs."""

    tool_name: str
    required: frozenset[str]
    granted: frozenset[str]


@dataclass(frozen=True)
class Lint:
    name_length: int
    description_length: int
    schema_bytes: int
    estimated_tokens: int
    problems: tuple[LintProblem, ...] = ()


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


def lint_entry(entry: ToolEntry, read_grants: Iterable[ReadGrant] = ()) -> Lint:
    """Sizes a model pays for in its context, and anything that would break a client or let a token granted
    reading write (`read_grants`: the catalog's, from `read_grants_of`)."""
    definition = {"name": entry.name, "description": entry.description, "inputSchema": thaw(entry.input_schema)}
    if entry.output_schema is not None:
        definition["outputSchema"] = thaw(entry.output_schema)
    size = len(compact_json(definition).encode())
    tokens = math.ceil(size / BYTES_PER_TOKEN)
    text = compact_json(thaw(entry.input_schema))
    problems = []
    if "$ref" in text or "$defs" in text:
        problems.append(
            LintProblem(
                "mcp_expose.W003",
                "the input schema uses $ref/$defs, which many clients cannot follow",
                "Inline the definitions: schemas from type hints are inlined; write an input_schema= the same way.",
            )
        )
    if len(entry.description) > MAX_DESCRIPTION_LENGTH:
        problems.append(
            LintProblem(
                "mcp_expose.W004",
                f"the description is over {MAX_DESCRIPTION_LENGTH} characters",
                "Shorten the docstring, or set a shorter description on the tool's admin page.",
            )
        )
    if not entry.description:
        problems.append(
            LintProblem(
                "mcp_expose.W005",
                "there is no description: models pick tools by it",
                "Write a docstring, or set a description on the tool's admin page.",
            )
        )
    if tokens > HEAVY_DEFINITION_TOKENS:
        problems.append(
            LintProblem(
                "mcp_expose.W006",
                f"the definition is about {tokens} tokens (over {HEAVY_DEFINITION_TOKENS}), paid in every model's "
                "context on every listing",
                "Trim the description and the argument descriptions, or split the tool.",
            )
        )
    if entry.annotations.read_only is not True:
        grant = next((grant for grant in read_grants if entry.scopes <= grant.granted), None)
        if grant is not None:
            problems.append(
                LintProblem(
                    "mcp_expose.W007",
                    f"it is not read-only, yet a token granted only what the read-only tool {grant.tool_name!r} needs "
                    f"({' '.join(sorted(grant.required))}) can call it",
                    "Require a scope for writing that reading does not imply (ModelTools: write_scopes=).",
                )
            )
    return Lint(len(entry.name), len(entry.description), size, tokens, tuple(problems))


def read_grants_of(catalog: Catalog) -> list[ReadGrant]:
    """For each read-only tool that needs a scope: what a token granted just that holds (the base scope and
    every scope the hierarchy implies included)."""
    base = get_settings().BASE_SCOPE
    return [
        ReadGrant(entry.name, entry.scopes, expand_scopes(entry.scopes | ({base} if base else set())))
        for entry in catalog.tools
        if entry.annotations.read_only is True and entry.scopes
    ]


def lint_catalog(catalog: Catalog) -> CatalogLint:
    grants = read_grants_of(catalog)
    lints = {entry.name: lint_entry(entry, grants) for entry in catalog.tools}
    total = sum(lint.schema_bytes for lint in lints.values())
    longest = sorted(((name, lint.description_length) for name, lint in lints.items()), key=lambda pair: -pair[1])
    return CatalogLint(len(lints), total, math.ceil(total / BYTES_PER_TOKEN), longest[:5])


def explain(
    registry: Iterable[Capability], rows: Mapping[str, ExposureState], catalog: Catalog, principal: Principal
) -> list[Visibility]:
    """Every declared tool, in declaration order, with whether `principal` sees it and why not."""
    served = {entry.key: entry for entry in catalog.tools}
    result = []
    for capability in registry:
        row = rows.get(capability.key)
        entry = served.get(capability.key)
        written = (row.wire_name if row else "") or capability.name
        name = entry.name if entry is not None else served_name(written, get_settings().WIRE_NAMES)
        if not (row.enabled if row is not None else capability.enabled_by_default):
            result.append(Visibility(capability.key, name, capability.kind, False, "disabled"))
            continue
        if entry is None:
            result.append(
                Visibility(capability.key, name, capability.kind, False, "name conflict (see the catalog warnings)")
            )
            continue
        decision = decide(principal, entry)
        result.append(Visibility(capability.key, name, capability.kind, decision.allowed, _reason(decision, entry)))
    return result


def _reason(decision: Any, entry: ToolEntry) -> str:
    if decision.allowed:
        return ""
    if decision.missing_scopes:
        return "missing scope: " + ", ".join(sorted(decision.missing_scopes))
    if decision.missing_permissions:
        return "missing permission: " + ", ".join(sorted(decision.missing_permissions))
    if decision.reason == "client not allowed" and entry.allowed_clients:
        return "client not allowed: only " + ", ".join(sorted(entry.allowed_clients))
    return decision.reason
