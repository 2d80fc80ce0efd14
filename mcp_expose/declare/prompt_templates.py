"""Prompts written in the admin: compiled into catalog entries like prompts declared in code."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any

from django.template import Context, Engine, Template

from mcp_expose.declare.json_schemas import object_schema
from mcp_expose.declare.names import split_scopes
from mcp_expose.declare.registry import Annotations, Capability
from mcp_expose.declare.schema import SchemaSignature


@lru_cache(maxsize=1)
def _engine() -> Engine:
    """Django's template language without loaders or extra libraries: no {% include %} of files, no custom tags."""
    return Engine(dirs=[], app_dirs=False, loaders=[], libraries={}, autoescape=False, debug=False)


def compile_prompt_template(text: str) -> Template:
    return _engine().from_string(text)


def try_render(text: str, arguments: list[Any]) -> str | None:
    """Why the template cannot be used (a syntax error, a file it includes), or None. Renders it once."""
    sample = {str(argument.get("name")): "" for argument in arguments if isinstance(argument, dict)}
    try:
        compile_prompt_template(text).render(Context(sample, autoescape=False))
    except Exception as exc:  # noqa: BLE001  (any failure is the author's to fix, and is shown to them)
        return f"{type(exc).__name__}: {exc}"
    return None


@dataclass(frozen=True)
class PromptState:
    """A `PromptTemplate` row as plain data."""

    pk: int
    name: str
    title: str
    description: str
    arguments: tuple[Mapping[str, Any], ...]
    template: str
    scopes: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_row(cls, row: Any) -> PromptState:
        return cls(
            row.pk, row.name, row.title, row.description, tuple(row.arguments), row.template, split_scopes(row.scopes)
        )


def _render(template: str, arguments: Mapping[str, Any], context: Any) -> str:
    return compile_prompt_template(template).render(Context(dict(arguments), autoescape=False)).strip()


def capability_for(state: PromptState) -> Capability:
    properties = {
        str(argument["name"]): {
            "type": "string",
            **({"description": argument["description"]} if argument.get("description") else {}),
        }
        for argument in state.arguments
    }
    required = [str(argument["name"]) for argument in state.arguments if argument.get("required")]
    schema = object_schema(properties, required)
    return Capability(
        key=f"admin_prompts.{state.name}",
        name=state.name,
        kind="prompt",
        target=partial(_render, state.template),
        source=SchemaSignature(schema),
        origin=f"PromptTemplate #{state.pk}",
        title=state.title or None,
        description=state.description,
        scopes=state.scopes,
        annotations=Annotations(read_only=True),
        call_style="mapping",
        completions={str(a["name"]): list(a["values"]) for a in state.arguments if a.get("values")},
    )
