"""The `MCP_EXPOSE` settings dict, read lazily and reloaded when tests override it.

Values are read at call time through `get_settings()`, never copied into class
attributes at import, so `override_settings(MCP_EXPOSE=...)` always takes effect.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

DEFAULTS: dict[str, Any] = {
    # Where MCP clients connect. Served exactly, with and without a trailing slash.
    "PATH": "/mcp",
    # Health for load balancers: liveness here, readiness (each dependency asked) at HEALTH_PATH + "/ready".
    # None: PATH + "/health". "" turns both off.
    "HEALTH_PATH": None,
    # Identity reported in serverInfo.
    "SERVER_NAME": "django-mcp-expose",
    "SERVER_TITLE": None,
    # How tool, prompt and resource names go on the wire when the code names none: "portable" (the key with "_"
    # for ".", `library_books_list`; upstream tools `{server}__{tool}`), which every client accepts; or
    # "dotted" (`library.books.list`, `{server}.{tool}`), the names of earlier releases, which Claude Desktop,
    # Codex and the OpenAI API refuse. Keys, rows, usage and approvals are the same in both.
    "WIRE_NAMES": "portable",
    "INSTRUCTIONS": None,
    # Origins allowed besides the request's own. Entries are exact; "http://localhost:*" matches any port.
    "ALLOWED_ORIGINS": [],
    # Largest accepted request body, in bytes; larger bodies get 413.
    "MAX_REQUEST_BODY_SIZE": 4 * 1024 * 1024,
    # Serve callers without credentials. Refused by a deploy check when DEBUG is False.
    "ALLOW_ANONYMOUS": False,
    # Scopes an anonymous caller holds when ALLOW_ANONYMOUS is on.
    "ANONYMOUS_SCOPES": [],
    # Who a request is from: authenticator classes (dotted paths, or {"CLASS": path, "OPTIONS": {...}}), tried in
    # order; the first that recognizes the credential decides (accepts or refuses it). Ours are the defaults. A DRF
    # authentication class (simplejwt, TokenAuthentication, a project's) goes through
    # {"CLASS": "mcp_expose.access.drf_authentication.DrfAuthenticator", "OPTIONS": {"authentication_class": ...}},
    # and grants no scopes unless its OPTIONS map them. See docs/authentication.md.
    "AUTHENTICATORS": [
        "mcp_expose.access.authenticators.ApiKeyAuthenticator",
        "mcp_expose.access.authenticators.OAuthTokenAuthenticator",
    ],
    # Accept Django's session cookie at PATH (this site's own pages calling MCP from the browser). Off: a cookie is
    # never looked at. On: tried after AUTHENTICATORS (or where its class is listed there), and only on requests
    # without an Authorization header whose Origin is present and this site's own (or in ALLOWED_ORIGINS), and
    # that the browser does not mark Sec-Fetch-Site: cross-site.
    "SESSION_AUTH": False,
    # Scopes a caller authenticated by its session cookie holds (widened by SCOPE_HIERARCHY).
    "SESSION_SCOPES": [],
    # More MCP endpoints besides PATH, each with its own path, OAuth resource, server name and toolset:
    # {"public": {"PATH": "/mcp/public", ...}}. See docs/endpoints.md.
    "ENDPOINTS": {},
    # Module name searched in every installed app for declarations.
    "AUTODISCOVER_MODULE": "mcp",
    # Cache alias holding the catalog revision stamp. Must be shared by every process.
    "CACHE_ALIAS": "default",
    # While the database is unavailable, a credential this process already knows keeps working this much
    # longer (seconds) past CREDENTIAL_CACHE_SECONDS: nothing can be revoked meanwhile either. An unknown
    # credential gets 503 with Retry-After. 0: no grace.
    "CREDENTIAL_OUTAGE_GRACE_SECONDS": 300,
    # How long (seconds) a process may reuse what it learned about a bearer credential (its user, scopes and
    # permissions) instead of asking the database again. Saving or deleting a key, token, user or permission
    # through the ORM ends that at once in every process; QuerySet.update() sends no signal, so it takes up to
    # this long (or call mcp_expose.credentials_changed()). 0 asks the database on every request.
    "CREDENTIAL_CACHE_SECONDS": 30,
    # The canonical URI of the MCP endpoint, e.g. "https://mcp.example.com/mcp". OAuth tokens must be issued
    # for exactly this resource. None: derived from each request's scheme, Host and PATH (development only).
    "RESOURCE": None,
    # Issuer URLs advertised in the protected resource metadata. None: django-oauth-toolkit's issuer
    # (OIDC_ISS_ENDPOINT, or this site's /o/ mount).
    "AUTHORIZATION_SERVERS": None,
    # Human-readable name in the protected resource metadata.
    "RESOURCE_NAME": None,
    # The scope every OAuth token needs to use the endpoint at all; clients are told to ask for it.
    "BASE_SCOPE": "mcp",
    # Broader scopes imply narrower ones: {"library:write": ["library:read"]}. Applied transitively.
    "SCOPE_HIERARCHY": {},
    # scopes_supported in the protected resource metadata. None: just the base scope (keep it minimal).
    "SCOPES_SUPPORTED": None,
    # Off: an OAuth call to a tool the token lacks only scopes for gets a 403 step-up challenge naming them
    # (telling an authenticated caller the tool exists). On: it answers exactly as an unknown tool (-32602).
    # Unknown, disabled and otherwise forbidden tools answer as unknown either way.
    "HIDE_FORBIDDEN_TOOLS": False,
    # Dotted paths of the middleware a view-backed call runs through, outermost first, for views that rely on
    # request attributes middleware sets (tenant, locale). The project's MIDDLEWARE does not run for them.
    "VIEW_MIDDLEWARE": [],
    # Default per-tool limits; code and the admin can only tighten them.
    "TOOL_TIMEOUT": 30.0,
    "MAX_RESULT_BYTES": 100_000,
    # The longest string a parameter may be where the schema declares no bound of its own (a str parameter,
    # a URL part, a search, a lookup like name__icontains): longer ones are invalid_input before anything
    # runs. A view's or model's body fields take what they take over HTTP. Read when a tool's schema is
    # built. None: no cap.
    "MAX_STRING_LENGTH": 1000,
    # How long a human has to confirm a call, in seconds (elicitation state and approval pages alike).
    "CONFIRMATION_TTL": 600,
    # Calls carry X-Agent-Depth; one deeper than this is refused before anything runs.
    "MAX_AGENT_DEPTH": 5,
    # Serve 2025-11-25 clients with stateful sessions (Mcp-Session-Id) instead of statelessly. Sessions
    # live in one process's memory, so this needs a single worker or sticky routing by session. It gives
    # 2025-11-25 clients what needs a standing connection: questions to the client in the middle of a call
    # (elicitation, sampling, roots), logging/setLevel, resource subscriptions and resumable streams.
    # 2026-07-28 clients are stateless either way.
    "LEGACY_SESSIONS": False,
    # The directory of the spill files: append-only JSON lines, one usage row a line, with its row id, so a
    # file written twice adds each row once. None: a directory under tempfile.gettempdir() named for the
    # database ("mcp_expose-usage-<name>-<hash>"). Point it at persistent storage when /tmp is not.
    "USAGE_SPILL_DIR": None,
    # Answer plain tools/list and tools/call requests (2026-07-28, and stateless 2025-11-25) without the SDK's
    # per-request machinery: listings encoded once per catalog revision and visibility set (the first one
    # produced by the SDK itself), calls through the same dispatcher, answers byte for byte the SDK's.
    # Off by itself, with one warning at startup, under an SDK lacking a piece it borrows (see sdk_internals).
    "FAST_PATH": True,
    # Answer every MCP request as JSON instead of SSE. Off: SSE lets clients see progress and
    # lets a disconnect cancel a running call.
    "JSON_RESPONSE": False,
    # What tools and views get as the caller's credential (request.auth, principal.credential): a CallerCredential
    # holding its kind, scopes, claims and expiry, never the secret. True: the object the authenticator accepted
    # (a DOT AccessToken, DRF's Token, a simplejwt token: each holds, or makes, a working credential).
    "RAW_CREDENTIAL_TO_TOOLS": False,
    # Upstream MCP servers. Plain-HTTP loopback upstreams (127.0.0.1, ::1, localhost) are refused unless this is
    # on: for the demo, tests, and a sidecar on the same host.
    "UPSTREAM_ALLOW_LOOPBACK": False,
    # Networks (CIDR, e.g. "10.20.0.0/16") or single addresses an upstream may resolve to although they are not
    # public: private, shared or link-local ones. Cloud metadata addresses stay refused whatever is listed.
    "UPSTREAM_ALLOWED_NETWORKS": [],
    # A PEM file of certificate authorities trusted for upstreams' HTTPS besides the system's (a private CA);
    # None: the system's alone. Host names are always checked.
    "UPSTREAM_CA_BUNDLE": None,
    # Discover every enabled upstream this often, in seconds, from the serving processes (0: only on request:
    # the admin's "Discover now" and `manage.py mcp_discover`). A server another process discovered within the
    # interval is skipped.
    "UPSTREAM_DISCOVERY_INTERVAL": 0,
    # Listen to each enabled upstream for notifications/tools/list_changed (2026-07-28: a subscriptions/listen
    # stream; 2025-11-25: a session's standing stream) and discover it when it says its tools changed.
    "UPSTREAM_LISTEN": True,
    # Long tools as MCP tasks (the io.modelcontextprotocol/tasks extension, 2026-07-28): a call of a tool declared
    # with task= from a client that declared the extension is answered at once with a task, run by Django's Tasks
    # framework on this backend alias (settings.TASKS), and followed with tasks/get. False: never advertised, and
    # every call runs directly (a tool that requires a task is then answered -32021).
    "TASKS": True,
    "TASK_BACKEND": "default",
    # How long (seconds) a task and its result stay readable after it was created (its ttlMs); mcp_prune_usage
    # removes it afterwards. None: until pruned by hand.
    "TASK_TTL": 3600,
    # Tasks one caller (an API key, an OAuth client for one user) may have working or waiting at once; one more
    # is refused as rate_limited. None: no limit.
    "MAX_ACTIVE_TASKS_PER_CALLER": 20,
    # Tools declared with app= show their results as MCP Apps (the io.modelcontextprotocol/ui extension) to clients
    # that negotiated it: advertised, their pages served as ui:// resources, `_meta.ui` on their definitions.
    # False: never advertised, and every client gets those tools as text and structured results.
    "APPS": True,
    # Publish a server card (SEP-2127) at /.well-known/mcp/server-card: None for none, or a dict with the card's
    # reverse-DNS "name" ("com.example/library"), and optionally "description", "version" and "websiteUrl".
    "SERVER_CARD": None,
    # The tuning knobs below (ADVANCED_DEFAULTS), for the rare deployment that must change one:
    # {"ADVANCED": {"USAGE_BATCH_SECONDS": 0.5}}.
    "ADVANCED": {},
}

# Tuning a deployment rarely sets, under MCP_EXPOSE["ADVANCED"]. (Set at the top level of MCP_EXPOSE, where they
# were before, they are still read, and `manage.py check` warns: mcp_expose.W019.)
ADVANCED_DEFAULTS: dict[str, Any] = {
    # The shared cache is an accelerator: requests wait at most this long (seconds) for a Redis cache to
    # connect and to answer (unless the cache's OPTIONS set socket_connect_timeout/socket_timeout), and after a
    # failure this process skips the cache for CACHE_RETRY_SECONDS before trying it again. Meanwhile revisions
    # are read from the database (see REVISION_STALENESS_SECONDS); rate-limited tools and later rounds of a
    # confirmation or question are answered `unavailable`; everything else is served as usual.
    "CACHE_CONNECT_TIMEOUT": 0.5,
    "CACHE_READ_TIMEOUT": 0.5,
    "CACHE_RETRY_SECONDS": 2.0,
    # While the shared cache is unavailable, how old (seconds) the revisions a process read from the database
    # may be: admin changes and revocations reach every process within this long.
    "REVISION_STALENESS_SECONDS": 2.0,
    # Every serving process compares the database's copies of the stamps with the cache this often (seconds),
    # and renews a stamp the cache missed (a move the cache could not take): at most this long a change is unseen.
    "REVISION_AUDIT_SECONDS": 5.0,
    # How often (seconds) an API key's last_used_at is written at most.
    "API_KEY_LAST_USED_INTERVAL": 60,
    # Seconds a call answered `unavailable` (the database locked past its busy timeout, or unreachable)
    # tells its caller to wait before retrying.
    "UNAVAILABLE_RETRY_AFTER": 5,
    # A stateful session with no request in flight and no open standing (GET) stream for this many seconds is
    # ended (its id then answers 404 and the client initializes again): a client that went away without
    # DELETE frees its memory soon. The SDK's own default is 30 minutes.
    "LEGACY_SESSION_IDLE_SECONDS": 90,
    # Stateful sessions one caller (an API key, an OAuth client for one user, or one address without a
    # credential) may hold open in a process. None: no cap beyond the SDK's 10,000 per process.
    "MAX_LEGACY_SESSIONS_PER_CALLER": 32,
    # 2026-07-28 `subscriptions/listen` streams one process holds open, and one caller may hold. None: no limit.
    "MAX_LISTEN_STREAMS": 1024,
    "MAX_LISTEN_STREAMS_PER_CALLER": 32,
    # While a process has listeners (listen streams or stateful sessions), it reads the catalog revision this
    # often, in a thread, and tells them when it moved: changes made outside the serving processes (a shell,
    # `mcp_sync`, a cron job, a migration) reach them too. The channel layer only makes it sooner.
    "LISTEN_REVISION_POLL_SECONDS": 1.0,
    # Usage rows are written by one thread per server process, in batches at most this many seconds
    # apart, off the request path (and all of them at a graceful shutdown). 0: each call writes its own
    # row before it is answered. Outside an ASGI server (commands, stdio) rows are always written at once.
    "USAGE_BATCH_SECONDS": 0.2,
    # Usage rows the batch writer keeps in memory while the database cannot take them (it is down, locked or
    # unreachable); they are retried until it can. Past this many, the oldest go to a spill file on local
    # disk (USAGE_SPILL_DIR), written to the database at the next server start. Calls never wait for it.
    "USAGE_BUFFER_ROWS": 10_000,
    # At the end of the ASGI lifespan startup, call gc.freeze(): what is loaded at startup (Django, the
    # catalog, every module) is never scanned by the garbage collector again, which otherwise costs each
    # request a few percent of its CPU time in full collections. False leaves the collector alone.
    "FREEZE_GC": True,
    # The bounded reader's limits on what an upstream lists: tools per server, characters of a title and of a
    # description, bytes and nesting levels of an input or output schema. An entry past one is refused alone.
    "UPSTREAM_MAX_TOOLS": 500,
    "UPSTREAM_MAX_TITLE": 200,
    "UPSTREAM_MAX_DESCRIPTION": 8192,
    "UPSTREAM_MAX_SCHEMA_BYTES": 65536,
    "UPSTREAM_MAX_SCHEMA_DEPTH": 32,
    # One entry of a tools/list page, in bytes on the wire (whitespace, icons and _meta included): a longer one is
    # refused alone, unread. And one tools/list answer: past this many bytes the page is cut, the entries complete
    # before the cut are read, and the rest (with any later page) are refused with a diagnostic.
    "UPSTREAM_MAX_ENTRY_BYTES": 2097152,
    "UPSTREAM_MAX_LISTING_BYTES": 16777216,
    # A call's answer from an upstream: at most this many bytes on the wire (a tool's own result size limit then
    # applies to what the client is sent, as for local tools).
    "UPSTREAM_MAX_RESULT_BYTES": 1048576,
    # The circuit breaker per upstream and process: this many failed calls in a row (unreachable, 5xx, timeout,
    # an unreadable answer) make calls fail fast for UPSTREAM_BREAKER_COOLDOWN seconds; then one call probes.
    "UPSTREAM_BREAKER_THRESHOLD": 5,
    "UPSTREAM_BREAKER_COOLDOWN": 30,
    # The interval (seconds) a client is told to poll tasks/get at (pollIntervalMs).
    "TASK_POLL_INTERVAL": 1.0,
    # A worker running a task writes a heartbeat this often (seconds) and looks for a cancellation. A running
    # task whose heartbeat is older than TASK_LEASE seconds is failed with an internal error: its worker died.
    "TASK_HEARTBEAT": 2.0,
    "TASK_LEASE": 30.0,
    # A task whose run no worker took within this many seconds of being queued is failed (its job was lost, or
    # no worker serves the queue). Raise it when tasks may wait longer behind others.
    "TASK_QUEUE_TIMEOUT": 600.0,
    # The largest page (bytes of rendered HTML, inlined assets included) a ui:// resource may be; larger is an error.
    "APP_MAX_PAGE_BYTES": 2 * 1024 * 1024,
}


class ExposeSettings:
    """Attribute access to `MCP_EXPOSE` with the defaults filled in: the public settings at its top level, the
    tuning knobs (`ADVANCED_DEFAULTS`) under its `ADVANCED` dict, both read as attributes."""

    def __init__(self, user_settings: dict[str, Any] | None = None) -> None:
        self.user_settings = dict(user_settings or {})
        advanced = self.user_settings.get("ADVANCED")
        self.advanced_settings: dict[str, Any] = dict(advanced) if isinstance(advanced, dict) else {}

    def __getattr__(self, name: str) -> Any:
        if name in DEFAULTS:
            value = self.user_settings.get(name, DEFAULTS[name])
        elif name in ADVANCED_DEFAULTS:
            # Under ADVANCED; else where it was before (W019 says to move it); else the default.
            value = self.advanced_settings.get(name, self.user_settings.get(name, ADVANCED_DEFAULTS[name]))
        else:
            raise AttributeError(f"Invalid MCP_EXPOSE setting: {name!r}")
        setattr(self, name, value)
        return value

    @property
    def unknown_keys(self) -> list[str]:
        """Keys of MCP_EXPOSE that are no setting (a tuning knob at the top level is one, moved: `moved_keys`)."""
        return sorted(set(self.user_settings) - set(DEFAULTS) - set(ADVANCED_DEFAULTS))

    @property
    def unknown_advanced_keys(self) -> list[str]:
        return sorted(set(self.advanced_settings) - set(ADVANCED_DEFAULTS))

    @property
    def moved_keys(self) -> list[str]:
        """Tuning knobs set at the top level of MCP_EXPOSE, where they were before `ADVANCED`."""
        return sorted(set(self.user_settings) & set(ADVANCED_DEFAULTS))


def setting_label(name: str) -> str:
    """Where a setting is written, as a message names it: `MCP_EXPOSE['PATH']`, `MCP_EXPOSE['ADVANCED']['TASK_LEASE']`."""
    return f"MCP_EXPOSE['ADVANCED'][{name!r}]" if name in ADVANCED_DEFAULTS else f"MCP_EXPOSE[{name!r}]"


def changed_settings(base: Mapping[str, Any] | None = None, **changes: Any) -> dict[str, Any]:
    """A copy of an `MCP_EXPOSE` dict (`base`) with `changes`, each in its place: a tuning knob under `ADVANCED`.

    For tests and settings files: `override_settings(MCP_EXPOSE=changed_settings(settings.MCP_EXPOSE,
    TASK_LEASE=5, FAST_PATH=False))`."""
    changed = dict(base or {})
    advanced = dict(changed.get("ADVANCED") or {})
    for name, value in changes.items():
        if name in ADVANCED_DEFAULTS:
            advanced[name] = value
            changed.pop(name, None)  # the old place, which would be read only without ADVANCED's
        elif name in DEFAULTS:
            changed[name] = value
        else:
            raise ValueError(f"{name!r} is no MCP_EXPOSE setting.")
    if advanced:
        changed["ADVANCED"] = advanced
    return changed


@cache
def get_settings() -> ExposeSettings:
    return ExposeSettings(getattr(settings, "MCP_EXPOSE", None))


@receiver(setting_changed)
def _reload_settings(*, setting: str, **kwargs: Any) -> None:
    if setting == "MCP_EXPOSE":
        get_settings.cache_clear()
