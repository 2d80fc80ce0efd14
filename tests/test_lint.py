"""The catalog lint: each problem it knows, on its own, and as `manage.py check` warnings."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

import mcp_expose
from mcp_expose.catalog.compiled import Catalog, compile_catalog
from mcp_expose.checks import check_catalog_lint, check_rows
from mcp_expose.declare.registry import CapabilityRegistry
from mcp_expose.operator.overview import HEAVY_DEFINITION_TOKENS, lint_entry, read_grants_of

# With the dotted names of the unit settings (tests/settings.py), which these tests name tools by.
HIERARCHY = {
    "MCP_EXPOSE": {"BASE_SCOPE": "mcp", "SCOPE_HIERARCHY": {"shop:write": ["shop:read"]}, "WIRE_NAMES": "dotted"}
}


def plain() -> None:
    return None


def by_schema(**arguments: Any) -> None:
    return None


def declare(registry: CapabilityRegistry, key: str, **options: Any) -> None:
    options.setdefault("description", "Does one thing well.")
    mcp_expose.tool(registry=registry, key=key, **options)(by_schema if "input_schema" in options else plain)


def problems(catalog: Catalog, name: str) -> list[tuple[str, str]]:
    grants = read_grants_of(catalog)
    return [(problem.check_id, problem.message) for problem in lint_entry(catalog.get(name), grants).problems]


def closed(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "additionalProperties": False, **extra}


def test_a_clean_tool_has_no_problems(registry: CapabilityRegistry) -> None:
    declare(registry, "t.clean", read_only=True, scopes=["shop:read"])
    declare(registry, "t.write", scopes=["shop:write"])
    with override_settings(**HIERARCHY):
        catalog = compile_catalog(registry, {})
        assert problems(catalog, "t.clean") == [] and problems(catalog, "t.write") == []


def test_each_problem_has_its_message(registry: CapabilityRegistry) -> None:
    declare(
        registry,
        "t.ref",
        input_schema=closed({"city": {"$ref": "#/$defs/city"}}, **{"$defs": {"city": {"type": "string"}}}),
    )
    declare(registry, "t.long", description="x" * 1025)
    declare(registry, "t.mute", description="")
    many = {
        f"field_{n}": {"type": "string", "description": "A field described at some length. " * 3} for n in range(60)
    }
    declare(registry, "t.heavy", input_schema=closed(many))
    catalog = compile_catalog(registry, {})
    assert problems(catalog, "t.ref") == [
        ("mcp_expose.W003", "the input schema uses $ref/$defs, which many clients cannot follow")
    ]
    assert problems(catalog, "t.long") == [("mcp_expose.W004", "the description is over 1024 characters")]
    assert problems(catalog, "t.mute") == [("mcp_expose.W005", "there is no description: models pick tools by it")]
    [(check_id, message)] = problems(catalog, "t.heavy")
    assert check_id == "mcp_expose.W006" and f"(over {HEAVY_DEFINITION_TOKENS})" in message
    assert lint_entry(catalog.get("t.heavy")).estimated_tokens > HEAVY_DEFINITION_TOKENS


def test_a_writing_tool_that_a_reading_grant_can_call_is_flagged(registry: CapabilityRegistry) -> None:
    declare(registry, "t.list", read_only=True, scopes=["shop:read"])
    declare(registry, "t.same_scope", scopes=["shop:read"])  # what ModelTools(scopes=...) used to give writes
    declare(registry, "t.implied", scopes=["mcp"])  # the base scope: every token holds it
    declare(registry, "t.unscoped")
    declare(registry, "t.own_scope", scopes=["shop:write"])
    declare(registry, "t.not_sure", read_only=None, destructive=True, scopes=["shop:read", "shop:write"])
    with override_settings(**HIERARCHY):
        catalog = compile_catalog(registry, {})
        flagged = {name: problems(catalog, name) for name in ("t.same_scope", "t.implied", "t.unscoped")}
        assert problems(catalog, "t.own_scope") == [] and problems(catalog, "t.not_sure") == []
    for found in flagged.values():
        assert found == [
            (
                "mcp_expose.W007",
                "it is not read-only, yet a token granted only what the read-only tool 't.list' needs (shop:read) can "
                "call it",
            )
        ]


def test_without_scopes_on_reading_tools_writing_tools_are_not_flagged(registry: CapabilityRegistry) -> None:
    declare(registry, "t.list", read_only=True)
    declare(registry, "t.write")
    assert problems(compile_catalog(registry, {}), "t.write") == []


def test_the_demo_catalog_is_lint_clean() -> None:
    assert check_catalog_lint() == []


def test_lint_problems_are_system_check_warnings_with_ids_and_hints(
    restore_global_registry: CapabilityRegistry,
) -> None:
    declare(restore_global_registry, "library.undescribed", description="", read_only=True)
    [warning] = check_catalog_lint()
    assert warning.id == "mcp_expose.W005" and warning.level == 30  # checks.WARNING
    assert warning.msg == "The tool 'library.undescribed': there is no description: models pick tools by it."
    assert "docstring" in warning.hint


@pytest.mark.django_db
def test_with_the_database_the_lint_sees_the_admins_descriptions() -> None:
    from mcp_expose.models import ExposedTool

    ExposedTool.objects.filter(key="library.echo").update(description="y" * 2000)
    assert check_catalog_lint(databases=["default"]) == []  # as declared, whatever Django passes
    assert check_rows() == []  # the database checks read rows only when asked to
    [warning] = check_rows(databases=["default"])  # only what the rows add to the declared lint
    assert warning.id == "mcp_expose.W004" and "'library.echo'" in warning.msg


@pytest.mark.django_db
def test_the_database_lint_sees_upstream_tools_as_their_rows_serve_them() -> None:
    """An upstream's own hints are not trusted, so its tools are served as destructive: one enabled under a
    reading scope is what W007 is for, until the row vouches that it only reads."""
    from mcp_expose.models import ExposedTool, UpstreamServer, UpstreamTool

    server = UpstreamServer.objects.create(name="desk", url="https://desk.example.com/mcp")
    definition = {
        "name": "lookup",
        "title": None,
        "description": "Look up a ticket.",
        "input_schema": {"type": "object", "properties": {}},
        "output_schema": None,
        "annotations": {"readOnlyHint": True},
    }
    tool = UpstreamTool.objects.create(
        server=server, name="lookup", status="approved", approved=definition, approved_digest="a" * 64
    )
    row = ExposedTool.objects.create(key=tool.key, enabled=True, extra_scopes="library:read")
    [warning] = check_rows(databases=["default"])
    assert warning.id == "mcp_expose.W007" and warning.msg.startswith("The tool 'desk.lookup': it is not read-only")
    row.read_only_hint = True
    row.save()
    assert check_rows(databases=["default"]) == []
