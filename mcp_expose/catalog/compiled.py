"""The catalog: an immutable join of declarations and exposure rows.

`compile_catalog` is pure (no database, no cache), so every rule about what is
served can be tested without either. `CatalogProvider` is the only code that
reads rows, and it recompiles only when the revision stamp changes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, TypeVar, cast

from mcp_expose.catalog.memo import Kept, MemoKind
from mcp_expose.catalog.revision import current_revision
from mcp_expose.core.conf import get_settings
from mcp_expose.core.endpoints import Endpoint, Toolset
from mcp_expose.core.outage import database_unavailable, outage
from mcp_expose.core.rates import stricter_rate
from mcp_expose.declare.apps import App, served_to
from mcp_expose.declare.exposure_state import ExposureState
from mcp_expose.declare.names import name_problem, served_name
from mcp_expose.declare.prompt_templates import capability_for
from mcp_expose.declare.registry import (
    APPROVAL_PAGE_CHANNEL,
    CLIENT_CHANNEL,
    TOOL_KINDS,
    Annotations,
    Capability,
    CapabilityRegistry,
    ConfirmationChannel,
    TaskSupport,
    loosens,
)
from mcp_expose.declare.registry import registry as default_registry
from mcp_expose.declare.uri_templates import is_template, match

logger = logging.getLogger("mcp_expose.catalog")
K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class ToolEntry:
    """One tool as it is served: the capability with the row's decisions applied."""

    name: str
    key: str
    title: str | None
    description: str
    scopes: frozenset[str]
    permissions: frozenset[str]
    annotations: Annotations
    capability: Capability
    allowed_clients: frozenset[str] = frozenset()
    requires_confirmation: bool = False
    # Where a person confirms: the approval page if code or row says so (either may narrow, neither widen).
    confirmation_channel: ConfirmationChannel = CLIENT_CHANNEL
    # (calls, seconds) or None; the stricter of code and row.
    rate_limit: tuple[int, int] | None = None
    timeout: float = 30.0
    max_result_bytes: int = 100_000
    log_argument_values: bool = False
    # Whether a call may ("optional") or must ("required") run as an MCP task; None: always directly.
    task_support: TaskSupport | None = None
    # The template that shows its result as an MCP App; None when code declares none or the row switched it off.
    app: App | None = None
    # The code's tags and the row's.
    tags: frozenset[str] = frozenset()

    @property
    def input_schema(self) -> Mapping[str, Any]:
        """The schema for nobody in particular; `input_schema_for` gives a caller theirs."""
        return self.capability.input_schema

    def offered(self, apps: bool) -> bool:
        """Whether the tool is offered to a client that did (`apps`) or did not negotiate MCP Apps."""
        return served_to(self.capability.app, self.app, apps)

    @property
    def varies_by_caller(self) -> bool:
        return self.capability.signature.varies_by_caller

    def input_schema_for(self, principal: Any) -> Mapping[str, Any]:
        """The schema `principal` is shown and checked against. Sync: a per-caller one runs view code."""
        return self.capability.signature.for_caller(principal).input_schema

    @property
    def output_schema(self) -> Mapping[str, Any] | None:
        return self.capability.output_schema

    @property
    def kind(self) -> str:
        return self.capability.kind

    @property
    def uri(self) -> str:
        return self.capability.uri


@dataclass(frozen=True, slots=True)
class Catalog:
    revision: str | None
    tools: tuple[ToolEntry, ...]
    by_name: Mapping[str, ToolEntry]
    # Entries left out because of a conflict the admin must resolve, as messages.
    problems: tuple[str, ...] = ()
    resources: tuple[ToolEntry, ...] = ()
    prompts: tuple[ToolEntry, ...] = ()
    # Every capability compiled, served or not, by key: the admin describes rows by it (upstream tools have no
    # declaration in code to look up).
    capabilities: Mapping[str, Capability] = field(default_factory=dict, compare=False, repr=False)
    # What is derived from this revision once and served many times (wire definitions, encoded listings), by kind:
    # read and kept through `kept` (see `catalog/memo`).
    memo: dict[MemoKind[Any, Any], Kept[Any, Any]] = field(default_factory=dict, compare=False, repr=False)
    # The admin's toolset for each endpoint that has a row (others offer what their settings say).
    toolsets: Mapping[str, Toolset] = field(default_factory=dict, compare=False, repr=False)
    # The endpoint this catalog is the view of; None for the whole catalog.
    endpoint: str | None = None

    def kept(self, kind: MemoKind[K, V]) -> Kept[K, V]:
        """What this revision keeps of `kind`."""
        found = self.memo.get(kind)
        if found is None:
            found = self.memo.setdefault(kind, Kept(kind))  # atomic: two threads get one store
        return cast("Kept[K, V]", found)

    def remember(self, kind: MemoKind[K, V], key: K, build: Callable[[], V]) -> V:
        """`build()` once per catalog revision under `key` of `kind` (a benign race may build it twice)."""
        return self.kept(kind).remember(key, build)

    def get(self, name: str) -> ToolEntry | None:
        return self.by_name.get(name)

    def toolset_of(self, endpoint: Endpoint) -> Toolset:
        return self.toolsets.get(endpoint.name, endpoint.toolset)

    def for_endpoint(self, endpoint: Endpoint) -> Catalog:
        """What `endpoint` offers of this revision: a catalog of its own, made once per revision, with its own
        memo (so its listings are encoded once, and a request at one endpoint pays nothing for the others)."""
        toolset = self.toolset_of(endpoint)
        if endpoint.is_default and not toolset.narrows:
            return self  # (a named endpoint always has its own memo: its answers carry its own server name)

        def build() -> Catalog:
            def offered(entries: Iterable[ToolEntry], is_tool: bool) -> tuple[ToolEntry, ...]:
                return tuple(
                    entry
                    for entry in entries
                    if toolset.offers(entry.key, entry.tags, is_tool=is_tool, read_only_hint=_reads_only(entry))
                )

            tools = offered(self.tools, True)
            return replace(
                self,
                tools=tools,
                by_name=MappingProxyType({entry.name: entry for entry in tools}),
                resources=offered(self.resources, False),
                prompts=offered(self.prompts, False),
                memo={},
                endpoint=endpoint.name,
            )

        return self.remember(ENDPOINT_VIEWS, (endpoint.name, toolset), build)

    def app_pages(self) -> Mapping[str, tuple[App, tuple[ToolEntry, ...]]]:
        """Each `ui://` page this revision serves: the app that declares it (the first tool's, when several
        tools share a template) and the tools shown with it."""

        def build() -> Mapping[str, tuple[App, tuple[ToolEntry, ...]]]:
            pages: dict[str, tuple[App, tuple[ToolEntry, ...]]] = {}
            for entry in self.tools:
                if entry.app is not None:
                    app, users = pages.get(entry.app.resource_uri, (entry.app, ()))
                    pages[entry.app.resource_uri] = (app, (*users, entry))
            return MappingProxyType(pages)

        return self.remember(APP_PAGES, None, build)

    def get_prompt(self, name: str) -> ToolEntry | None:
        return next((entry for entry in self.prompts if entry.name == name), None)

    def find_resource(self, uri: str) -> tuple[ToolEntry, dict[str, Any]] | None:
        """The resource serving `uri` and the template variables it matched: fixed URIs first, then templates."""
        for entry in self.resources:
            if not is_template(entry.uri) and entry.uri == uri:
                return entry, {}
        for entry in self.resources:
            if is_template(entry.uri):
                variables = match(entry.uri, uri)
                if variables is not None:
                    return entry, variables
        return None


# What a revision keeps of its own views per endpoint (a named endpoint, or one narrowed by its toolset).
ENDPOINT_VIEWS: MemoKind[tuple[str, Toolset], Catalog] = MemoKind("endpoint views", limit=256)
# Each `ui://` page of the revision: its app and the tools shown with it.
APP_PAGES: MemoKind[None, Mapping[str, tuple[App, tuple[ToolEntry, ...]]]] = MemoKind("app pages", limit=1)


def compile_catalog(
    capabilities: Iterable[Capability],
    rows: Mapping[str, ExposureState],
    revision: str | None = None,
    prompt_templates: Iterable[Any] = (),
    toolsets: Mapping[str, Toolset] | None = None,
) -> Catalog:
    """Join declarations and rows into the served catalog, in declaration order.

    A capability without a row is served as its declaration says (rows are
    created on migrate; this covers the window before that). A row without a
    capability is stale and ignored. Names are unique ignoring case: should rows
    ever produce a clash, the earlier declaration keeps the name and the later
    one is left out and reported.
    """
    defaults = get_settings()
    style = defaults.WIRE_NAMES
    resources: list[ToolEntry] = []
    prompts: list[ToolEntry] = []
    tools: list[ToolEntry] = []
    by_name: dict[str, ToolEntry] = {}
    taken: dict[str, str] = {}
    problems: list[str] = []
    seen: dict[str, Capability] = {}
    # Prompts written in the admin come after those declared in code; a name clash keeps the code's.
    for capability in [*capabilities, *(capability_for(state) for state in prompt_templates)]:
        if capability.key in seen:
            continue
        seen[capability.key] = capability
        row = rows.get(capability.key)
        if not (row.enabled if row is not None else capability.enabled_by_default):
            continue
        written = (row.wire_name if row is not None else "") or capability.name
        name = served_name(written, style)
        if name_problem(name):
            problems.append(f"{capability.key}: invalid tool name {name!r}; not served.")
            continue
        folded = name.casefold()
        if folded in taken:
            problems.append(
                f"{capability.key}: tool name {name!r}"
                + (f" (from {written!r})" if written != name else "")
                + f" is already used by {taken[folded]}; not served."
            )
            continue
        taken[folded] = capability.key
        requires_confirmation, channel = effective_confirmation(capability, row)
        task_support = capability.task_support if row is None or row.tasks_allowed else None
        if capability.task_support == "required" and task_support is None:
            problems.append(f"{capability.key}: requires a task, and its row does not allow tasks; not served.")
            continue
        entry = ToolEntry(
            name=name,
            key=capability.key,
            title=(row.title if row is not None else "") or capability.title,
            description=(row.description if row is not None else "") or capability.description,
            scopes=capability.scopes | (row.extra_scopes if row is not None else frozenset()),
            permissions=capability.permissions,
            annotations=effective_annotations(
                capability.annotations,
                row.annotations if row is not None else {},
                upstream=capability.kind == "upstream",
            ),
            capability=capability,
            allowed_clients=row.allowed_clients if row is not None else frozenset(),
            requires_confirmation=requires_confirmation,
            confirmation_channel=channel,
            rate_limit=stricter_rate(capability.rate_limit, row.rate_limit if row is not None else ""),
            timeout=_smallest(capability.timeout, row.timeout if row is not None else None, defaults.TOOL_TIMEOUT),
            max_result_bytes=int(
                _smallest(
                    capability.max_result_bytes,
                    row.max_result_bytes if row is not None else None,
                    defaults.MAX_RESULT_BYTES,
                )
            ),
            log_argument_values=capability.log_argument_values or bool(row and row.log_argument_values),
            task_support=task_support,
            app=capability.app if row is None or row.ui_enabled else None,
            tags=capability.tags | (row.tags if row is not None else frozenset()),
        )
        if capability.kind in TOOL_KINDS:
            tools.append(entry)
            by_name[name] = entry
        elif capability.kind == "resource":
            resources.append(entry)
        else:
            prompts.append(entry)
    problems.extend(_page_conflicts(tools))
    return Catalog(
        revision=revision,
        tools=tuple(tools),
        by_name=MappingProxyType(by_name),
        problems=tuple(problems),
        resources=tuple(resources),
        prompts=tuple(prompts),
        capabilities=MappingProxyType(seen),
        toolsets=MappingProxyType(dict(toolsets or {})),
    )


def _page_conflicts(tools: Iterable[ToolEntry]) -> list[str]:
    """Tools that share a template share one page, whose `_meta.ui` (CSP, permissions) and title are the first
    tool's: another declaring them otherwise is a mistake the admin should see."""
    first: dict[str, ToolEntry] = {}
    problems = []
    for entry in tools:
        app = entry.app
        if app is None:
            continue
        seen = first.setdefault(app.template, entry)
        shown = seen.app
        if (
            seen is not entry
            and shown is not None
            and (shown.resource_meta(), shown.title)
            != (
                app.resource_meta(),
                app.title,
            )
        ):
            problems.append(
                f"{entry.key}: its MCP App page {app.template!r} is declared with other CSP, permissions or title "
                f"by {seen.key}; the page is served as {seen.key} declares it."
            )
    return problems


def _reads_only(entry: ToolEntry) -> bool | None:
    """Read-only for a READ_ONLY toolset: as code declared it and as the row hints it. The row's hint is what
    clients are told; it cannot put a tool that writes on a read-only endpoint, as the transaction it runs in
    follows the code's hint too."""
    return entry.annotations.read_only and entry.capability.annotations.read_only


def effective_annotations(
    declared: Annotations, overrides: Mapping[str, bool | None], *, upstream: bool = False
) -> Annotations:
    """The hints clients are told. A row may make a declared tool's hints more careful, never less: clients decide
    by them whether to ask before a call, and a developer who marks a tool destructive can rely on it. An upstream
    tool's row is the only trusted source of its hints (the upstream's own are dropped), so it sets them as it
    likes."""
    changes = {name: value for name, value in overrides.items() if value is not None}
    if not upstream:
        changes = {name: value for name, value in changes.items() if loosens(declared, name, value) is None}
    return replace(declared, **changes) if changes else declared


def effective_confirmation(capability: Capability, row: ExposureState | None) -> tuple[bool, ConfirmationChannel]:
    """Whether a person confirms each call, and where. Code and row may each switch confirmation on or move
    it to the approval page, never take either back: a client that answers forms by itself is not a person."""
    on_page = APPROVAL_PAGE_CHANNEL in (capability.confirmation_channel, row.confirmation_channel if row else None)
    required = capability.requires_confirmation or bool(row and row.requires_confirmation) or on_page
    return required, APPROVAL_PAGE_CHANNEL if on_page else CLIENT_CHANNEL


def _smallest(code: float | None, row: float | None, default: float) -> float:
    """The tighter of what code and the admin set; the setting's default when neither did."""
    chosen = [value for value in (code, row) if value is not None]
    return min(chosen) if chosen else default


class CatalogProvider:
    """Serves the compiled catalog, recompiling when the revision stamp moves.

    `get_sync()` reads one cache key per call and queries rows only when the
    stamp changed; call it from a sync context (it may touch the database).
    """

    def __init__(self, registry: CapabilityRegistry | None = None) -> None:
        self.registry = registry if registry is not None else default_registry
        self._catalog: Catalog | None = None
        self._lock = threading.Lock()

    def get_sync(self, revision: str | None = None) -> Catalog:
        """The catalog of `revision` (read from the cache when not given; the edge reads it with the
        credentials stamp in one round trip)."""
        revision = revision if revision is not None else current_revision()
        catalog = self._catalog
        if catalog is not None and catalog.revision == revision:
            return catalog
        with self._lock:
            if self._catalog is not None and self._catalog.revision == revision:
                return self._catalog
            try:
                catalog = self.compile_now(revision)
            except Exception as exc:
                if self._catalog is None or not database_unavailable(exc):
                    raise
                # The rows cannot be read, and nothing can change them until they can: serve the last catalog
                # (its revision stays, so the next request compiles again).
                outage.refused("compiling the catalog", exc)
                return self._catalog
            for problem in catalog.problems:
                logger.warning("Catalog: %s", problem)
            self._catalog = catalog
            return catalog

    def compile_now(self, revision: str | None = None) -> Catalog:
        """The catalog as the database holds it now (declarations, approved upstream tools, rows, prompts and
        toolsets), neither cached nor logged: what `get_sync` serves, and what `manage.py check` lints."""
        upstream, upstream_problems = self._load_upstream()
        catalog = compile_catalog(
            [*self.registry, *upstream],
            self._load_rows(),
            revision,
            self._load_prompts(),
            self._load_toolsets(),
        )
        return replace(catalog, problems=(*upstream_problems, *catalog.problems))

    def peek(self) -> Catalog | None:
        """The last compiled catalog, without checking the stamp (no I/O)."""
        return self._catalog

    def invalidate(self) -> None:
        self._catalog = None

    @staticmethod
    def _load_upstream() -> tuple[list[Capability], list[str]]:
        from mcp_expose.upstream.capabilities import served_capabilities

        return served_capabilities()

    @staticmethod
    def _load_prompts() -> list[Any]:
        from mcp_expose.declare.prompt_templates import PromptState
        from mcp_expose.models import PromptTemplate

        return [PromptState.from_row(row) for row in PromptTemplate.objects.filter(enabled=True)]

    @staticmethod
    def _load_toolsets() -> dict[str, Toolset]:
        """Each endpoint's toolset row with its chosen capabilities, in one query (a row per choice)."""
        from mcp_expose.core.endpoints import parse_tags
        from mcp_expose.models import EndpointToolset

        rows: dict[str, tuple[bool, str, bool, set[str]]] = {}
        fields = ("endpoint", "offer_everything", "tags", "read_only", "capabilities__key")
        for endpoint, everything, tags, read_only, key in EndpointToolset.objects.values_list(*fields):
            chosen = rows.setdefault(endpoint, (everything, tags, read_only, set()))[3]
            if key is not None:
                chosen.add(key)
        return {
            endpoint: Toolset(everything=everything, tags=parse_tags(tags), keys=frozenset(keys), read_only=read_only)
            for endpoint, (everything, tags, read_only, keys) in rows.items()
        }

    @staticmethod
    def _load_rows() -> dict[str, ExposureState]:
        from mcp_expose.models import ExposedTool

        through = ExposedTool.allowed_clients.through
        allowed: dict[int, set[str]] = {}
        for tool_id, client_id in through.objects.values_list("exposedtool_id", "application__client_id"):
            allowed.setdefault(tool_id, set()).add(client_id)
        return {row.key: row.exposure_state(frozenset(allowed.get(row.pk, ()))) for row in ExposedTool.objects.all()}


provider = CatalogProvider()
