"""The bounded reader: an upstream's tool entries, each read field by field and kept or refused on its own.

An entry that breaks a rule is refused with a diagnostic naming the field and the limit; the rest of the
list is read as if it were not there. Nothing an upstream sends reaches a model without passing here: its
name, title, description, schemas and annotations. Icons, `_meta` and anything else are dropped.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from mcp_expose.core.conf import get_settings
from mcp_expose.core.errors import DeclarationError, McpExposeError
from mcp_expose.declare.json_schemas import freeze, inline_refs, thaw
from mcp_expose.declare.names import MAX_NAME_LENGTH, upstream_wire_name
from mcp_expose.upstream.bounded_json import TOO_LARGE_KEY, depth_of

# An upstream tool's own name: no "." (ours separates the server from the tool), nothing a client escapes.
# Segments of letters, digits, '_' and '-', joined by single dots: served as {server}.{name}, whose first segment
# is always the server (server names hold no dot), so no name can pose as another server's tool.
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*")
NAME_CHARACTER = re.compile(r"[A-Za-z0-9_.-]")
ANNOTATION_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
# Line breaks and tabs are text; every other control character, and every invisible one (format characters:
# zero-width spaces and joiners, bidirectional overrides, tag characters) could hide words from the person
# who approves a definition, and is refused.
_ALLOWED_CONTROLS = frozenset("\n\t")
_SHOWN = 3  # offending characters named in a diagnostic


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """Why something an upstream sent was refused or changed: the tool (when known), the field and the rule."""

    tool: str | None
    field: str
    problem: str

    def as_dict(self) -> dict[str, str | None]:
        return {"tool": self.tool, "field": self.field, "problem": self.problem}

    def __str__(self) -> str:
        where = f"{self.tool!r} " if self.tool is not None else ""
        return f"{where}{self.field}: {self.problem}"


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """One upstream tool as it passed the reader: what a person approves, and what clients are served."""

    name: str
    description: str = ""
    title: str | None = None
    input_schema: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({"type": "object"}))
    output_schema: Mapping[str, Any] | None = None
    annotations: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def as_json(self) -> dict[str, Any]:
        """The definition as stored (and compared): plain JSON, keys in a fixed order."""
        data: dict[str, Any] = {"name": self.name, "title": self.title, "description": self.description}
        data["input_schema"] = thaw(self.input_schema)
        data["output_schema"] = thaw(self.output_schema) if self.output_schema is not None else None
        data["annotations"] = thaw(self.annotations)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ToolDefinition:
        output = data.get("output_schema")
        return cls(
            name=data["name"],
            description=data.get("description") or "",
            title=data.get("title"),
            input_schema=freeze(data["input_schema"]),
            output_schema=freeze(output) if output is not None else None,
            annotations=freeze(data.get("annotations") or {}),
        )

    @property
    def digest(self) -> str:
        """What identifies this exact definition: any change to what a model is shown changes it."""
        encoded = json.dumps(self.as_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(encoded.encode()).hexdigest()


class Refused(McpExposeError):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field
        self.problem = problem


def read_tools(entries: Any, server: str) -> tuple[list[ToolDefinition], list[Diagnostic]]:
    """The entries of one server's `tools/list` pages that pass, in their order, and why the others did not.

    Names equal ignoring case are all refused: which of them is the real one cannot be told, and serving the
    first would let a later entry take over an earlier one's calls."""
    conf = get_settings()
    if not isinstance(entries, list):
        return [], [Diagnostic(None, "tools", "the listing is not a list")]
    diagnostics: list[Diagnostic] = []
    if len(entries) > conf.UPSTREAM_MAX_TOOLS:
        diagnostics.append(
            Diagnostic(None, "tools", f"{len(entries)} tools listed; the first {conf.UPSTREAM_MAX_TOOLS} are read")
        )
        entries = entries[: conf.UPSTREAM_MAX_TOOLS]
    read: list[ToolDefinition] = []
    for index, entry in enumerate(entries):
        try:
            read.append(read_tool(entry, server))
        except Refused as refusal:
            diagnostics.append(Diagnostic(_shown_name(entry, index), refusal.field, refusal.problem))
        except RecursionError:  # a shape no bound above caught: refused alone, like any other
            diagnostics.append(Diagnostic(_shown_name(entry, index), "tool", "the entry nests too deep to read"))
    counts = Counter(definition.name.casefold() for definition in read)
    clashing = {name for name, count in counts.items() if count > 1}
    for definition in read:
        if definition.name.casefold() in clashing:
            diagnostics.append(
                Diagnostic(definition.name, "name", "another tool of this server has the same name ignoring case")
            )
    return [definition for definition in read if definition.name.casefold() not in clashing], diagnostics


def read_tool(entry: Any, server: str) -> ToolDefinition:
    """One entry, or `Refused` naming the field that broke a rule."""
    if not isinstance(entry, dict):
        raise Refused("tool", "the entry is not an object")
    if TOO_LARGE_KEY in entry:
        size, limit = entry[TOO_LARGE_KEY], get_settings().UPSTREAM_MAX_ENTRY_BYTES
        raise Refused("tool", f"the entry is {size} bytes; at most {limit} are read (UPSTREAM_MAX_ENTRY_BYTES)")
    name = _name(entry.get("name"), server)
    title = entry.get("title")
    if title is None and isinstance(entry.get("annotations"), dict):
        title = entry["annotations"].get("title")  # the older place for it
    return ToolDefinition(
        name=name,
        title=_text(title, "title", get_settings().UPSTREAM_MAX_TITLE, one_line=True) if title is not None else None,
        description=_text(entry.get("description") or "", "description", get_settings().UPSTREAM_MAX_DESCRIPTION),
        input_schema=_input_schema(entry.get("inputSchema")),
        output_schema=_schema(entry.get("outputSchema"), "outputSchema", required=False),
        annotations=_annotations(entry.get("annotations")),
    )


def _name(name: Any, server: str) -> str:
    prefix = upstream_wire_name(server, "", get_settings().WIRE_NAMES)  # `{server}__` (`{server}.` when dotted)
    longest = MAX_NAME_LENGTH - len(prefix)
    if not isinstance(name, str) or not name:
        raise Refused("name", "the name is missing or not a string")
    if not TOOL_NAME.fullmatch(name):
        bad = sorted({character for character in name if not NAME_CHARACTER.fullmatch(character)})
        if not bad:
            raise Refused("name", "a '.' in the name may only stand between two parts of it")
        shown = ", ".join(_code_point(character) for character in bad[:_SHOWN])
        raise Refused("name", f"the name may hold only letters, digits, '_', '-' and '.' (it holds {shown})")
    if len(name) > longest:
        raise Refused(
            "name", f"the name is {len(name)} characters; {prefix}<name> fits in {MAX_NAME_LENGTH} up to {longest}"
        )
    return name


def _text(value: Any, what: str, limit: int, *, one_line: bool = False) -> str:
    if not isinstance(value, str):
        raise Refused(what, f"the {what} is not a string")
    text = value.replace("\r\n", "\n").replace("\r", "\n").strip()
    if len(text) > limit:
        raise Refused(what, f"the {what} is {len(text)} characters; at most {limit} are accepted")
    allowed = _ALLOWED_CONTROLS - {"\n"} if one_line else _ALLOWED_CONTROLS
    hidden = _hidden(text, allowed)
    if hidden:
        shown = ", ".join(_code_point(character) for character in hidden[:_SHOWN])
        raise Refused(what, f"the {what} holds control or invisible characters ({shown})")
    return text


def _input_schema(value: Any) -> Mapping[str, Any]:
    schema = _schema(value, "inputSchema", required=True)
    assert schema is not None  # a required schema is there or refused
    return schema


def _schema(value: Any, what: str, *, required: bool) -> Mapping[str, Any] | None:
    conf = get_settings()
    if value is None and not required:
        return None
    if not isinstance(value, dict):
        raise Refused(what, "the schema is missing or not an object")
    if depth_of(value) > conf.UPSTREAM_MAX_SCHEMA_DEPTH:
        raise Refused(what, f"the schema nests deeper than {conf.UPSTREAM_MAX_SCHEMA_DEPTH} levels")
    size = len(json.dumps(value, separators=(",", ":")).encode())
    if size > conf.UPSTREAM_MAX_SCHEMA_BYTES:
        raise Refused(what, f"the schema is {size} bytes; at most {conf.UPSTREAM_MAX_SCHEMA_BYTES} are accepted")
    if value.get("type") != "object":
        raise Refused(what, 'the schema\'s type is not "object"')
    hidden = _hidden_in_schema(value)
    if hidden is not None:
        raise Refused(what, f"the schema holds control or invisible characters ({hidden})")
    remote = _remote_reference(value)
    if remote is not None:
        raise Refused(what, f"the schema refers to {remote[:80]!r}; only references inside it are followed")
    if _has_reference(value):
        _bound_inlining(value, what, conf.UPSTREAM_MAX_SCHEMA_BYTES)
    try:
        inlined = inline_refs(value, origin=what) if _has_reference(value) else value
    except DeclarationError as exc:
        raise Refused(what, f"the schema's references cannot be inlined ({exc})") from None
    if depth_of(inlined) > conf.UPSTREAM_MAX_SCHEMA_DEPTH:
        raise Refused(
            what, f"with its references inlined the schema nests deeper than {conf.UPSTREAM_MAX_SCHEMA_DEPTH} levels"
        )
    if len(json.dumps(inlined, separators=(",", ":")).encode()) > conf.UPSTREAM_MAX_SCHEMA_BYTES:
        raise Refused(what, f"with its references inlined the schema is over {conf.UPSTREAM_MAX_SCHEMA_BYTES} bytes")
    if (problem := metaschema_problem(inlined)) is not None:
        raise Refused(what, f"the schema is not valid JSON Schema (draft 2020-12): {problem}")
    return freeze(inlined)


# How much of the metaschema's complaint a diagnostic quotes: it may repeat the upstream's own values.
MAX_PROBLEM_TEXT = 200


def metaschema_problem(schema: Mapping[str, Any]) -> str | None:
    """Why `schema` is not a JSON Schema (draft 2020-12, the revision MCP names), or None. A schema that is not one
    (`"required": "r"`, `"type": "flurb"`) would be served to clients that cannot read it, and fails the SDK's
    models when listed. Remembered per schema text: the catalog asks again at every compile."""
    return _metaschema_problem(json.dumps(thaw(schema), sort_keys=True, separators=(",", ":")))


@lru_cache(maxsize=2048)
def _metaschema_problem(text: str) -> str | None:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(json.loads(text))
    except SchemaError as error:
        where = "/".join(str(part) for part in error.absolute_path) or "the root"
        return f"{_quoted(error.message)} (at {where})"
    except Exception as exc:  # noqa: BLE001  (a pattern nested past the regex compiler's recursion, …: refused too)
        return f"it cannot be checked ({type(exc).__name__})"
    return None


def _quoted(message: str) -> str:
    """The metaschema's complaint, which repeats the upstream's values: escaped (no control or look-alike
    characters) and bounded."""
    text = ascii(message)[1:-1]
    return text if len(text) <= MAX_PROBLEM_TEXT else text[: MAX_PROBLEM_TEXT - 1] + "…"


def _hidden(text: str, allowed: frozenset[str] = _ALLOWED_CONTROLS) -> list[str]:
    return sorted({c for c in text if c not in allowed and unicodedata.category(c) in ("Cc", "Cf", "Co", "Cs")})


def _hidden_in_schema(value: Any) -> str | None:
    """The first hidden characters in any key or string of a schema (property descriptions reach the model too)."""
    stack = [value]
    while stack:
        node = stack.pop()
        texts = [node] if isinstance(node, str) else list(node) if isinstance(node, dict) else []
        for text in texts:
            if isinstance(text, str) and (hidden := _hidden(text)):
                return ", ".join(_code_point(character) for character in hidden[:_SHOWN])
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return None


def _references(value: Any) -> list[str]:
    found: list[str] = []
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key in ("$ref", "$dynamicRef", "$recursiveRef"):
                if key in node:
                    found.append(node[key] if isinstance(node[key], str) else repr(node[key]))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def _bound_inlining(schema: dict[str, Any], what: str, max_bytes: int) -> None:
    """Refuse a schema whose references would inline to more than `max_bytes` (counted as the JSON of its keys
    and scalars, before inlining it): ten references to a definition holding ten references to another make a
    small schema a huge one."""
    found = schema.get("$defs")
    definitions: dict[str, Any] = found if isinstance(found, dict) else {}
    sizes: dict[str, int] = {}

    def nodes(node: Any, chain: tuple[str, ...]) -> int:
        if len(chain) > 64:
            raise Refused(what, "the schema's references chain more than 64 definitions deep")
        if isinstance(node, list):
            return 1 + sum(nodes(item, chain) for item in node)
        if not isinstance(node, dict):
            return len(json.dumps(node))  # a long string repeated by references is as large as it is long
        total = 1
        for key, child in node.items():
            if key == "$defs":
                continue
            if key == "$ref" and isinstance(child, str) and child.startswith("#/$defs/"):
                name = child.rsplit("/", 1)[-1]
                if name in chain or name not in definitions:
                    continue  # inline_refs refuses it, saying why
                if name not in sizes:
                    sizes[name] = nodes(definitions[name], (*chain, name))
                total += sizes[name]
            else:
                total += len(json.dumps(key)) + nodes(child, chain)
            if total > max_bytes:
                raise Refused(what, f"with its references inlined the schema would be over {max_bytes} bytes")
        return total

    nodes(schema, ())


def _has_reference(value: Any) -> bool:
    return bool(_references(value))


def _remote_reference(value: Any) -> str | None:
    """The first reference that leaves the schema (a URL, another file), or that is dynamic, if any."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key in ("$dynamicRef", "$recursiveRef"):
                if key in node:
                    return f"{key} {node[key]!r}"[:80]
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    for reference in _references(value):
        if not reference.startswith("#/$defs/"):
            return reference
    return None


def _annotations(value: Any) -> Mapping[str, Any]:
    """The four hints, where they are booleans; anything else is dropped. They are shown, never trusted."""
    if not isinstance(value, dict):
        return freeze({})
    return freeze({hint: value[hint] for hint in ANNOTATION_HINTS if isinstance(value.get(hint), bool)})


def _shown_name(entry: Any, index: int) -> str:
    """How a refused entry is named in its diagnostic: its name when it is plain ASCII, else its position and the
    name escaped (a Cyrillic 'е' shown as itself would read as the Latin one it imitates)."""
    name = entry.get("name") if isinstance(entry, dict) else None
    if isinstance(name, str) and name.isascii() and name.isprintable() and 0 < len(name) <= MAX_NAME_LENGTH:
        return name
    if isinstance(name, str) and name:
        escaped = ascii(name[:MAX_NAME_LENGTH])[1:-1]
        return f"#{index + 1} ({escaped}{'…' if len(name) > MAX_NAME_LENGTH else ''})"
    return f"#{index + 1}"


def _code_point(character: str) -> str:
    """A character as a diagnostic names it: plain ASCII quoted, anything else by code point and Unicode name,
    so a look-alike letter never shows as the letter it imitates."""
    if character.isascii() and character.isprintable() and not character.isspace() and character not in "'\"":
        return repr(character)
    name = unicodedata.name(character, "")
    return f"U+{ord(character):04X} {name}" if name else f"U+{ord(character):04X}"
