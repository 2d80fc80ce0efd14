"""What code declares can be exposed: capabilities, in declaration order.

The registry accepts every declaration and reports problems (bad names,
collisions) as a list, so that `AppConfig.ready()` can refuse to start with all
of them at once and the system check framework can show the same messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mcp_expose.core.conf import get_settings
from mcp_expose.core.endpoints import TAG
from mcp_expose.core.errors import DeclarationError
from mcp_expose.core.rates import parse_rate
from mcp_expose.declare.apps import App
from mcp_expose.declare.names import name_problem, scope_problem, served_name
from mcp_expose.declare.schema import LazySignature, SchemaSignature, ToolSignature

CapabilityKind = Literal["function", "view", "model", "resource", "prompt", "upstream"]
TOOL_KINDS = frozenset({"function", "view", "model", "upstream"})
Signature = ToolSignature | SchemaSignature
# Where a person confirms a call: through the client (its form, or the approval page when it has none),
# or only on the site's approval page, signed in (an auto-accepting client is not a person).
ConfirmationChannel = Literal["client", "approval_page"]
CLIENT_CHANNEL: ConfirmationChannel = "client"
APPROVAL_PAGE_CHANNEL: ConfirmationChannel = "approval_page"
# What `task=` takes: a call may become an MCP task when the client supports them, or must be one.
TaskSupport = Literal["optional", "required"]
TASK_SUPPORT: tuple[TaskSupport, ...] = ("optional", "required")
# What `requires_confirmation=` takes in declarations: no, yes (through the client), or the approval page.
ConfirmationDeclaration = bool | Literal["approval_page"]


@dataclass(frozen=True, slots=True)
class Annotations:
    """Behaviour hints for clients. None means "not declared"; clients then assume the MCP defaults."""

    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None

    def as_dict(self) -> dict[str, bool]:
        pairs = {
            "readOnlyHint": self.read_only,
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            "openWorldHint": self.open_world,
        }
        return {key: value for key, value in pairs.items() if value is not None}


# Each hint's careful value: what a client assumes when nothing is said (the MCP defaults).
CAREFUL_HINTS = {"read_only": False, "destructive": True, "idempotent": False, "open_world": True}


def loosens(declared: Annotations, hint: str, value: bool) -> str | None:
    """Why setting `hint` to `value` would make a declared tool's hint less careful, or None."""
    careful = CAREFUL_HINTS[hint]
    current = getattr(declared, hint)
    if value == careful or current == value:
        return None
    said = "does not say" if current is None else f"says {str(current).lower()}"
    return f"the code {said}, and a row can only make a hint more careful ({str(careful).lower()})"


@dataclass(frozen=True, slots=True)
class Capability:
    """One thing the application can do, as declared in code."""

    key: str
    name: str
    kind: CapabilityKind
    target: Callable[..., Any] = field(repr=False)
    source: Signature | LazySignature = field(repr=False)
    origin: str
    title: str | None = None
    description: str = ""
    scopes: frozenset[str] = frozenset()
    permissions: frozenset[str] = frozenset()
    annotations: Annotations = Annotations()
    enabled_by_default: bool = True
    is_async: bool = False
    requires_confirmation: bool = False
    confirmation_channel: ConfirmationChannel = CLIENT_CHANNEL
    rate_limit: str = ""
    timeout: float | None = None
    max_result_bytes: int | None = None
    log_argument_values: bool = False
    # Runs as an MCP task for clients that support them ("optional"), or only so ("required"). The whole call
    # runs in a worker, unless `task_starts_in_call`: then the call runs until the tool calls
    # `context.continue_as_task()`, and its questions before that are rounds of the call itself.
    task_support: TaskSupport | None = None
    task_starts_in_call: bool = False
    # Shown by a template as an MCP App, for clients that negotiated the extension.
    app: App | None = None
    # Labels an endpoint's toolset may choose capabilities by (the admin may add more).
    tags: frozenset[str] = frozenset()
    # "keywords": target(**arguments, **injected); "mapping": target(arguments, context) (views, models).
    call_style: Literal["keywords", "mapping"] = "keywords"
    # Resources: the URI or URI template ("app://orders/{id}") and the contents' media type.
    uri: str = ""
    mime_type: str | None = None
    # Prompt arguments and template variables that offer completion: name -> values, or a callable(prefix).
    completions: Mapping[str, Any] = field(default_factory=dict)

    @property
    def signature(self) -> Signature:
        return self.source.resolve() if isinstance(self.source, LazySignature) else self.source

    @property
    def input_schema(self) -> Mapping[str, Any]:
        return self.signature.input_schema

    @property
    def output_schema(self) -> Mapping[str, Any] | None:
        return self.signature.output_schema


def confirmation_fields(requires_confirmation: ConfirmationDeclaration, origin: str) -> dict[str, Any]:
    """`Capability` fields for a declaration's `requires_confirmation=`: True asks through the client,
    "approval_page" only on the approval page."""
    if requires_confirmation is True or requires_confirmation is False:
        return {"requires_confirmation": requires_confirmation, "confirmation_channel": CLIENT_CHANNEL}
    if requires_confirmation == APPROVAL_PAGE_CHANNEL:
        return {"requires_confirmation": True, "confirmation_channel": APPROVAL_PAGE_CHANNEL}
    raise DeclarationError(
        f"{origin}: requires_confirmation= takes True, False or {APPROVAL_PAGE_CHANNEL!r}, "
        f"not {requires_confirmation!r}."
    )


def string_set(values: Iterable[str], what: str, origin: str) -> frozenset[str]:
    """`scopes=` or `permissions=` as a set: a single string would silently become a set of its characters."""
    if isinstance(values, str):
        raise DeclarationError(f"{origin}: {what}= takes a list of strings, not the single string {values!r}.")
    return frozenset(values)


def tag_set(tags: Iterable[str], origin: str) -> frozenset[str]:
    """A declaration's `tags=`, each a short label an endpoint's toolset may choose it by."""
    if isinstance(tags, str):
        raise DeclarationError(f"{origin}: tags= takes a list of tags, not the string {tags!r}.")
    found = frozenset(tags)
    bad = sorted(repr(tag) for tag in found if not isinstance(tag, str) or not TAG.fullmatch(tag))
    if bad:
        raise DeclarationError(
            f"{origin}: {', '.join(bad)} are not tags (1 to 50 letters, digits, '_', '.', ':', '-')."
        )
    return found


def task_fields(task: TaskSupport | None, starts_in_call: bool, origin: str) -> dict[str, Any]:
    """`Capability` fields for a declaration's `task=` and `task_starts_in_call=`."""
    if task is not None and task not in TASK_SUPPORT:
        raise DeclarationError(f"{origin}: task= takes 'optional', 'required' or None, not {task!r}.")
    if starts_in_call and task is None:
        raise DeclarationError(f"{origin}: task_starts_in_call=True needs task='optional' or task='required'.")
    return {"task_support": task, "task_starts_in_call": bool(starts_in_call)}


# How each kind of declaration chooses its key (its stable identity), for the hint of a duplicate key.
REKEY_HINTS = {
    "function": "rename the function, or pass key='app_label.name' to @tool.",
    "resource": "pass key='app_label.name' to @resource.",
    "prompt": "pass key='app_label.name' to @prompt.",
    "view": (
        "pass resource= to expose_view or expose_ninja (their keys are app_label.resource, then .action or .operation)."
    ),
    "model": "pass prefix= to ModelTools (its keys are prefix.action).",
}


def _how_they_meet(name: str, other: str) -> str:
    """Why two declared names are one served name, when they are not simply equal."""
    if name == other:
        return ""
    if name.casefold() == other.casefold():
        return f" (as {other!r}; names differ only in case)"
    return f" (declared as {other!r} and {name!r}; portable names serve '_' for '.')"


def rekey_hint(capability: Capability) -> str:
    """What changes `capability`'s key, for the kind of declaration that made it."""
    return REKEY_HINTS.get(capability.kind, "rename one of the declarations.")


class CapabilityRegistry:
    """An ordered collection of capabilities. The first declaration of a key wins lookups."""

    def __init__(self) -> None:
        self._capabilities: list[Capability] = []
        self._by_key: dict[str, Capability] = {}

    def register(self, capability: Capability) -> Capability:
        self._capabilities.append(capability)
        self._by_key.setdefault(capability.key, capability)
        return capability

    def get(self, key: str) -> Capability | None:
        return self._by_key.get(key)

    def __iter__(self) -> Iterator[Capability]:
        return iter(self._capabilities)

    def __len__(self) -> int:
        return len(self._capabilities)

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    def snapshot(self) -> list[Capability]:
        return list(self._capabilities)

    def restore(self, capabilities: list[Capability]) -> None:
        """Roll back to an earlier `snapshot()` (used when a module fails to import)."""
        self._capabilities = list(capabilities)
        self._by_key = {}
        for capability in self._capabilities:
            self._by_key.setdefault(capability.key, capability)

    def resolution_problems(self) -> list[tuple[str, str, str]]:
        """Build every lazily declared signature now; report those that cannot be built."""
        found = []
        for capability in self._capabilities:
            try:
                capability.signature  # noqa: B018  (resolving is the point)
            except Exception as exc:  # noqa: BLE001
                found.append(("mcp_expose.E012", f"{capability.origin}: {exc}", "Fix the declaration in mcp.py."))
        return found

    def problems(self) -> list[tuple[str, str, str]]:
        """Every declaration problem as `(check id, message, hint)`."""
        found: list[tuple[str, str, str]] = []
        seen_keys: dict[str, Capability] = {}
        seen_names: dict[str, Capability] = {}
        style = get_settings().WIRE_NAMES
        for capability in self._capabilities:
            if problem := name_problem(capability.name):
                found.append(
                    (
                        "mcp_expose.E002",
                        f"{capability.origin}: invalid tool name: {problem}.",
                        "Pass name= with 1-64 characters of letters, digits, '_', '.' or '-'.",
                    )
                )
            for scope in sorted(capability.scopes):
                if problem := scope_problem(scope):
                    found.append(("mcp_expose.E004", f"{capability.origin}: {problem}.", "Fix the scopes= list."))
            if capability.rate_limit:
                try:
                    parse_rate(capability.rate_limit)
                except ValueError as exc:
                    found.append(("mcp_expose.E011", f"{capability.origin}: {exc}", "Write rates like '60/min'."))
            for permission in sorted(capability.permissions):
                if permission.count(".") != 1 or not all(permission.split(".")):
                    found.append(
                        (
                            "mcp_expose.E010",
                            f"{capability.origin}: permission {permission!r} is not of the form 'app_label.codename'.",
                            "Write Django permissions as user.has_perm() takes them, e.g. 'library.view_book'.",
                        )
                    )
            if (other := seen_keys.get(capability.key)) is not None:
                found.append(
                    (
                        "mcp_expose.E003",
                        f"{capability.origin} and {other.origin} both declare the capability {capability.key!r}.",
                        f"Give one of them another key: {rekey_hint(capability)}",
                    )
                )
            else:
                seen_keys[capability.key] = capability
            served = served_name(capability.name, style)
            folded = served.casefold()
            if (other := seen_names.get(folded)) is not None and other.key != capability.key:
                found.append(
                    (
                        "mcp_expose.E003",
                        f"{capability.origin} and {other.origin} both use the tool name {served!r}"
                        + _how_they_meet(capability.name, other.name)
                        + ".",
                        "Pass a distinct name= to one of the declarations.",
                    )
                )
            else:
                seen_names.setdefault(folded, capability)
        return found


registry = CapabilityRegistry()
