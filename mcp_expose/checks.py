"""System checks: `mcp_expose.E0xx` stop the server, `W0xx` warn. Each says what to change."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from mcp_expose.access.authenticators import configuration_problems as authenticator_problems
from mcp_expose.core.conf import ADVANCED_DEFAULTS, DEFAULTS, get_settings, setting_label
from mcp_expose.core.endpoints import endpoint_problems
from mcp_expose.core.wording import first_few
from mcp_expose.declare.adapters.middleware import middleware_factory
from mcp_expose.declare.names import WIRE_NAME_STYLES
from mcp_expose.declare.registry import CapabilityRegistry
from mcp_expose.declare.registry import registry as default_registry


def declaration_messages(registry: CapabilityRegistry) -> list[checks.CheckMessage]:
    return [checks.Error(message, hint=hint, id=check_id) for check_id, message, hint in registry.problems()]


@checks.register(checks.Tags.compatibility)
def check_declarations(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return declaration_messages(default_registry) + [
        checks.Error(message, hint=hint, id=check_id)
        for check_id, message, hint in default_registry.resolution_problems()
    ]


@checks.register(checks.Tags.compatibility)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    conf = get_settings()
    messages: list[checks.CheckMessage] = []
    messages.extend(_key_messages(conf))
    path = conf.PATH
    if not isinstance(path, str) or not path.startswith("/") or path.endswith("/") or len(path) < 2:
        messages.append(
            checks.Error(
                f"MCP_EXPOSE['PATH'] is {path!r}.",
                hint="Use an absolute path without a trailing slash, such as '/mcp'.",
                id="mcp_expose.E005",
            )
        )
    size = conf.MAX_REQUEST_BODY_SIZE
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        messages.append(
            checks.Error(
                f"MCP_EXPOSE['MAX_REQUEST_BODY_SIZE'] is {size!r}.",
                hint="Use a positive number of bytes, such as 4 * 1024 * 1024.",
                id="mcp_expose.E006",
            )
        )
    for origin in conf.ALLOWED_ORIGINS:
        if not isinstance(origin, str) or "://" not in origin or origin.endswith("/"):
            messages.append(
                checks.Error(
                    f"MCP_EXPOSE['ALLOWED_ORIGINS'] contains {origin!r}.",
                    hint="Write origins as scheme://host[:port], for example 'https://app.example.com' "
                    "or 'http://localhost:*'.",
                    id="mcp_expose.E007",
                )
            )
    if conf.WIRE_NAMES not in WIRE_NAME_STYLES:
        messages.append(
            checks.Error(
                f"MCP_EXPOSE['WIRE_NAMES'] is {conf.WIRE_NAMES!r}.",
                hint="Use 'portable' (the default: names every client accepts) or 'dotted' (the names served before "
                "this setting existed, which Claude Desktop and Codex refuse).",
                id="mcp_expose.E022",
            )
        )
    messages += _view_middleware_messages(conf.VIEW_MIDDLEWARE)
    messages += [
        checks.Error(
            problem,
            hint="Each endpoint is {'PATH': '/mcp/<name>', ...} with its own path; see docs/endpoints.md.",
            id="mcp_expose.E020",
        )
        for problem in endpoint_problems() + _endpoints_on_health_paths(conf)
    ]
    messages += [
        checks.Error(
            f"MCP_EXPOSE['AUTHENTICATORS']: {problem}",
            hint="Each entry is a dotted path, or {'CLASS': path, 'OPTIONS': {...}}; see docs/authentication.md.",
            id="mcp_expose.E021",
        )
        for problem in authenticator_problems()
    ]
    messages += _outage_setting_messages(conf)
    messages += _upstream_setting_messages(conf)
    messages += _task_setting_messages(conf)
    cache_alias = conf.CACHE_ALIAS
    backend = str(settings.CACHES.get(cache_alias, {}).get("BACKEND", ""))
    if cache_alias not in settings.CACHES:
        messages.append(
            checks.Error(
                f"MCP_EXPOSE['CACHE_ALIAS'] names the cache {cache_alias!r}, which is not in CACHES.",
                hint="Point it at a cache every server process shares.",
                id="mcp_expose.E008",
            )
        )
    elif backend.endswith(("LocMemCache", "DummyCache")):
        messages.append(
            checks.Warning(
                f"The cache {cache_alias!r} ({backend.rsplit('.', 1)[-1]}) is private to one process, so admin "
                "changes reach other server processes only when they restart, and revoked credentials stay "
                "usable there for up to CREDENTIAL_CACHE_SECONDS.",
                hint="Use Redis, Memcached, the database or file cache when running more than one process.",
                id="mcp_expose.W001",
            )
        )
    return messages


def _key_messages(conf: Any) -> list[checks.CheckMessage]:
    """E001 for a key that is no setting, at the top level or under ADVANCED; W019 for tuning keys not yet moved."""
    unknown = [(f"MCP_EXPOSE has an unknown key {key!r}.", DEFAULTS) for key in conf.unknown_keys]
    unknown += [
        (f"MCP_EXPOSE['ADVANCED'] has an unknown key {key!r}.", ADVANCED_DEFAULTS) for key in conf.unknown_advanced_keys
    ]
    messages: list[checks.CheckMessage] = [
        checks.Error(message, hint=f"Valid keys: {', '.join(sorted(valid))}.", id="mcp_expose.E001")
        for message, valid in unknown
    ]
    advanced = conf.user_settings.get("ADVANCED", {})
    if not isinstance(advanced, dict):
        hint = "Make it a dict of tuning settings, such as {'USAGE_BATCH_SECONDS': 0.5}, or leave it out."
        messages.append(checks.Error(f"MCP_EXPOSE['ADVANCED'] is {advanced!r}.", hint=hint, id="mcp_expose.E001"))
    if conf.moved_keys:
        moved = ", ".join(repr(key) for key in conf.moved_keys)
        messages.append(
            checks.Warning(
                f"MCP_EXPOSE sets {moved} at its top level: tuning settings now live under MCP_EXPOSE['ADVANCED'].",
                hint="Move them into MCP_EXPOSE['ADVANCED'] (see the upgrade note in CHANGELOG.md); they are read "
                "where they are until then.",
                id="mcp_expose.W019",
            )
        )
    return messages


def _endpoints_on_health_paths(conf: Any) -> list[str]:
    """An endpoint at a health path would never be reached (or the health check would not)."""
    from mcp_expose.core.endpoints import endpoints
    from mcp_expose.serving.health import health_paths

    if endpoint_problems() or not isinstance(conf.PATH, str):
        return []
    health = health_paths(conf.PATH.rstrip("/"), conf.HEALTH_PATH) or ()
    return [
        f"MCP_EXPOSE['ENDPOINTS'][{endpoint.name!r}]: its path {endpoint.path!r} is a health path (HEALTH_PATH)."
        for endpoint in endpoints()
        if endpoint.path in health
    ]


def _view_middleware_messages(paths: Any) -> list[checks.CheckMessage]:
    """Each VIEW_MIDDLEWARE entry must import as a sync-capable middleware factory."""
    hint = "List dotted paths of middleware, as in MIDDLEWARE, such as 'myproject.middleware.TenantMiddleware'."
    if not isinstance(paths, list | tuple):
        return [checks.Error(f"MCP_EXPOSE['VIEW_MIDDLEWARE'] is {paths!r}.", hint=hint, id="mcp_expose.E013")]
    messages: list[checks.CheckMessage] = []
    for path in paths:
        try:
            middleware_factory(path)
        except ImproperlyConfigured as exc:
            messages.append(checks.Error(str(exc), hint=hint, id="mcp_expose.E013"))
    return messages


@checks.register(checks.Tags.security, deploy=True)
def check_anonymous_access(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    if get_settings().ALLOW_ANONYMOUS and not settings.DEBUG:
        return [
            checks.Error(
                "MCP_EXPOSE['ALLOW_ANONYMOUS'] is on in a deployment (DEBUG is False): anyone can call tools.",
                hint="Turn ALLOW_ANONYMOUS off and give clients API keys or OAuth tokens.",
                id="mcp_expose.E009",
            )
        ]
    return []


@checks.register(checks.Tags.database)
def check_rows(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Rows whose name clashes are left out of the catalog; say which. And the lint of the tools as they are
    served (the admin's rows, the approved upstream tools), where it finds more than the lint of the
    declarations (`check_catalog_lint`)."""
    if not databases:
        return []
    from django.db import DatabaseError

    from mcp_expose.catalog.compiled import CatalogProvider, compile_catalog

    try:  # our tables may not exist yet: these checks also run before `migrate` applies our migrations
        rows = CatalogProvider._load_rows()
        served = CatalogProvider(default_registry).compile_now()
    except DatabaseError:
        return []
    renamed = _dotted_name_messages([state.wire_name for state in rows.values() if state.wire_name], "admin's")
    clashes: list[checks.CheckMessage] = [
        checks.Warning(problem, hint="Rename the tool in the admin.", id="mcp_expose.W002")
        for problem in compile_catalog(default_registry, rows).problems
    ]
    declared = _lint(compile_catalog(default_registry, {}))
    return renamed + clashes + [warning for warning in _lint(served) if warning not in declared]


@checks.register(checks.Tags.compatibility)
def check_wire_names(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """In the dotted style, the declared names with a '.': Claude Desktop, Codex and the OpenAI API refuse a
    tool list that holds one. (In the portable style every '.' is served as '_', so no name breaks them.)"""
    return _dotted_name_messages([capability.name for capability in default_registry], "declared")


def _dotted_name_messages(names: list[str], where: str) -> list[checks.CheckMessage]:
    """W017 for the `names` (declared in code, or written in the admin's rows) served with a '.'."""
    if get_settings().WIRE_NAMES != "dotted":
        return []
    dotted = sorted({name for name in names if "." in name})
    if not dotted:
        return []
    shown = first_few(dotted)
    return [
        checks.Warning(
            f"MCP_EXPOSE['WIRE_NAMES'] is 'dotted', so {len(dotted)} {where} "
            + ("names are" if len(dotted) > 1 else "name is")
            + f" served with a '.' ({shown}): Claude Desktop, Codex and the OpenAI API refuse a tool list that "
            "holds one.",
            hint="Set WIRE_NAMES to 'portable' once your clients call the new names (see the upgrade note in "
            "CHANGELOG.md), or add 'mcp_expose.W017' to SILENCED_SYSTEM_CHECKS if every client accepts dots.",
            id="mcp_expose.W017",
        )
    ]


@checks.register(checks.Tags.compatibility)
def check_sdk_pieces(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """W018 for each feature turned on whose unpublished SDK pieces this SDK lacks (it falls back at startup)."""
    from mcp_expose.serving.sdk_internals import missing_pieces, sdk_version

    conf = get_settings()
    fallbacks = {"FAST_PATH": "every request is served through the SDK", "LEGACY_SESSIONS": "2025-11-25 clients "
                 "are served statelessly"}  # fmt: skip
    return [
        checks.Warning(
            f"MCP_EXPOSE['{setting}'] is on, but the installed SDK (mcp {sdk_version()}) lacks what it uses of the "
            f"SDK's unpublished pieces: {'; '.join(problems)}. It is off at startup: {fallbacks[setting]}.",
            hint="Install an mcp release this version of django-mcp-expose supports (see its changelog), or turn "
            f"{setting} off to silence this.",
            id="mcp_expose.W018",
        )
        for setting, problems in missing_pieces().items()
        if getattr(conf, setting)
    ]


@checks.register(checks.Tags.compatibility)
def check_catalog_lint(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The catalog lint as warnings, for the tools as declared: it reads no database (Django 6 passes every
    alias to every check; `check_rows`, a database check, lints what the admin's rows change)."""
    from mcp_expose.catalog.compiled import compile_catalog

    return _lint(compile_catalog(default_registry, {}))


def _lint(catalog: Any) -> list[checks.CheckMessage]:
    from mcp_expose.operator.overview import lint_entry, read_grants_of

    grants = read_grants_of(catalog)
    messages: list[checks.CheckMessage] = []
    for entry in catalog.tools:
        try:
            lint = lint_entry(entry, grants)
        except Exception:  # noqa: BLE001, S112  (a declaration that cannot be built is E012's to report)
            continue
        messages.extend(
            checks.Warning(f"The tool {entry.name!r}: {problem.message}.", hint=problem.hint, id=problem.check_id)
            for problem in lint.problems
        )
    return messages


OUTAGE_SECONDS = (
    "CACHE_CONNECT_TIMEOUT",
    "CACHE_READ_TIMEOUT",
    "CACHE_RETRY_SECONDS",
    "REVISION_STALENESS_SECONDS",
    "REVISION_AUDIT_SECONDS",
    "CREDENTIAL_OUTAGE_GRACE_SECONDS",
)


def _outage_setting_messages(conf: Any) -> list[checks.CheckMessage]:
    """The outage settings are seconds, and the health path a path of its own."""
    messages: list[checks.CheckMessage] = []
    for name in OUTAGE_SECONDS:
        value = getattr(conf, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or value != value:
            messages.append(
                checks.Error(
                    f"{setting_label(name)} is {value!r}.",
                    hint="Use a number of seconds, 0 or more.",
                    id="mcp_expose.E014",
                )
            )
    for name in ("CACHE_CONNECT_TIMEOUT", "CACHE_READ_TIMEOUT"):
        value = getattr(conf, name)
        if isinstance(value, int | float) and not isinstance(value, bool) and value == 0:
            messages.append(
                checks.Error(
                    f"{setting_label(name)} is 0, which redis-py takes as no timeout at all.",
                    hint="Use a fraction of a second, such as 0.5.",
                    id="mcp_expose.E014",
                )
            )
    path = conf.HEALTH_PATH
    if path not in (None, "", False) and (
        not isinstance(path, str) or not path.startswith("/") or path.rstrip("/") == conf.PATH.rstrip("/")
    ):
        messages.append(
            checks.Error(
                f"MCP_EXPOSE['HEALTH_PATH'] is {path!r}.",
                hint="Use an absolute path other than PATH, such as '/mcp/health', or '' for none.",
                id="mcp_expose.E015",
            )
        )
    return messages


UPSTREAM_LIMITS = (
    "UPSTREAM_MAX_TOOLS",
    "UPSTREAM_MAX_TITLE",
    "UPSTREAM_MAX_DESCRIPTION",
    "UPSTREAM_MAX_SCHEMA_BYTES",
    "UPSTREAM_MAX_SCHEMA_DEPTH",
    "UPSTREAM_MAX_ENTRY_BYTES",
    "UPSTREAM_MAX_LISTING_BYTES",
    "UPSTREAM_MAX_RESULT_BYTES",
    "UPSTREAM_BREAKER_THRESHOLD",
    "UPSTREAM_BREAKER_COOLDOWN",
)


def _upstream_setting_messages(conf: Any) -> list[checks.CheckMessage]:
    """The upstream networks are networks, the bounded reader's limits whole numbers above 0, the discovery
    interval a number of seconds, and the server card one that can be served."""
    from mcp_expose.core.ssrf_guard import network_problem
    from mcp_expose.operator.server_card import card_problem
    from mcp_expose.upstream.tls import bundle_problem

    found: list[tuple[str, str, str]] = []  # (message, hint, id)
    networks = conf.UPSTREAM_ALLOWED_NETWORKS
    for entry in networks if isinstance(networks, list | tuple) else [networks]:
        if (problem := network_problem(entry)) is not None:
            found.append(
                (
                    f"MCP_EXPOSE['UPSTREAM_ALLOWED_NETWORKS'] holds {entry!r}, which is not a network: {problem}.",
                    "List networks in CIDR form, such as '10.20.0.0/16', or single addresses.",
                    "mcp_expose.E016",
                )
            )
    if (problem := card_problem(conf.SERVER_CARD)) is not None:
        found.append(
            (
                f"MCP_EXPOSE['SERVER_CARD'] cannot be served: {problem}.",
                "Set it to None, or to {'name': 'com.example/yourserver'} with optional description and version.",
                "mcp_expose.E017",
            )
        )
    interval = conf.UPSTREAM_DISCOVERY_INTERVAL
    if isinstance(interval, bool) or not isinstance(interval, int | float) or interval < 0:
        found.append(
            (
                f"MCP_EXPOSE['UPSTREAM_DISCOVERY_INTERVAL'] is {interval!r}.",
                "Use a number of seconds, or 0 to discover only on request.",
                "mcp_expose.E016",
            )
        )
    if (problem := bundle_problem(conf.UPSTREAM_CA_BUNDLE)) is not None:
        found.append(
            (
                f"MCP_EXPOSE['UPSTREAM_CA_BUNDLE'] is {conf.UPSTREAM_CA_BUNDLE!r}: {problem}.",
                "Name a PEM file of certificate authorities readable by every worker, or None for the system's.",
                "mcp_expose.E016",
            )
        )
    for name in UPSTREAM_LIMITS:
        value = getattr(conf, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            found.append((f"{setting_label(name)} is {value!r}.", "Use a whole number above 0.", "mcp_expose.E016"))
    return [checks.Error(message, hint=hint, id=check_id) for message, hint, check_id in found]


def _task_setting_messages(conf: Any) -> list[checks.CheckMessage]:
    """MCP tasks: timings that make sense together, and a Tasks backend that runs them in a worker."""
    messages: list[checks.CheckMessage] = []
    if not conf.TASKS:
        return messages
    timings = {
        name: getattr(conf, name)
        for name in ("TASK_HEARTBEAT", "TASK_LEASE", "TASK_POLL_INTERVAL", "TASK_QUEUE_TIMEOUT")
    }
    ttl = conf.TASK_TTL
    bad = [name for name, value in timings.items() if not _positive_number(value)]
    if ttl is not None and not _positive_number(ttl):
        bad.append("TASK_TTL")
    if bad:
        messages.append(
            checks.Error(
                f"{setting_label(bad[0])} is {getattr(conf, bad[0])!r}.",
                hint="Use a positive number of seconds (TASK_TTL may also be None: kept until pruned).",
                id="mcp_expose.E018",
            )
        )
    elif timings["TASK_LEASE"] < 3 * timings["TASK_HEARTBEAT"]:
        messages.append(
            checks.Error(
                f"{setting_label('TASK_LEASE')} ({timings['TASK_LEASE']:g} s) is under three heartbeats "
                f"(TASK_HEARTBEAT: {timings['TASK_HEARTBEAT']:g} s): a busy worker's tasks would be failed as dead.",
                hint="Make TASK_LEASE at least three times TASK_HEARTBEAT (the defaults: 30 and 2).",
                id="mcp_expose.E018",
            )
        )
    if any(capability.task_support is not None for capability in default_registry):
        from mcp_expose.serving.task_worker import backend_problem

        problem = backend_problem()
        if problem is not None:
            messages.append(
                checks.Warning(
                    f"Tools declared with task= run as MCP tasks, but {problem}.",
                    hint="Configure settings.TASKS with a backend that has workers, such as "
                    "django_tasks_db.DatabaseBackend (and run manage.py db_worker), and point "
                    "MCP_EXPOSE['TASK_BACKEND'] at it; or set MCP_EXPOSE['TASKS'] = False.",
                    id="mcp_expose.W015",
                )
            )
    return messages


def _positive_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


@checks.register(checks.Tags.templates)
def check_app_templates(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Every MCP App page renders (its template exists and compiles, the files it inlines are there): a host that
    cannot read a tool's page shows nothing."""
    from mcp_expose.calls.app_pages import PageFailed, render_app

    messages: list[checks.CheckMessage] = []
    for capability in default_registry:
        if capability.app is None:
            continue
        try:
            render_app(capability.app, [capability.name])
        except PageFailed as exc:
            problem = str(exc)
        except Exception as exc:  # noqa: BLE001  (whatever the project's template does; named, not raised)
            problem = f"The page cannot be rendered: {type(exc).__name__}: {exc}"
        else:
            continue
        messages.append(
            checks.Error(
                f"{capability.key}: its MCP App page does not render. {problem}",
                hint="Fix the template: it must be in a folder Django searches (TEMPLATES' DIRS, an app's "
                "templates/), and every {% mcp_app_static %} file must be found by the staticfiles finders.",
                obj=capability.origin,
                id="mcp_expose.E019",
            )
        )
    return messages
