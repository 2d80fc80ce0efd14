"""`McpTestClient`: list, call and read as a given caller, in process, through the real server.

The client builds the server `manage.py mcp_stdio` serves (`build_server`, our handlers) and connects the
official SDK client to it in memory: the dispatcher, policy, rate limits, confirmation and the usage log all
run as they do over HTTP. Only the HTTP edge is left out; what it would refuse (no usable credential, an OAuth
token short of scopes) raises `HttpRefusal` instead.

Its work runs on the test's own database connection: while it calls, the dispatcher's thread hops run on the
caller's thread (`core.db.hops_on_callers_thread`), which the sync methods block (asgiref's `async_to_sync`).
So a tool sees the rows the test made inside its transaction (pytest-django's `db`, Django's `TestCase`), and
what it writes is rolled back with the test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import mcp_types as types
from asgiref.sync import async_to_sync
from mcp import Client
from mcp.client.extension import ClientExtension

from mcp_expose.catalog.compiled import Catalog
from mcp_expose.core.conf import get_settings
from mcp_expose.core.db import hops_on_callers_thread, in_worker_thread
from mcp_expose.core.endpoints import DEFAULT_ENDPOINT, Endpoint, endpoint_named, endpoints
from mcp_expose.core.principal import Principal
from mcp_expose.declare.apps import APP_MIME_TYPE, EXTENSION_ID
from mcp_expose.declare.names import served_name
from mcp_expose.declare.registry import TOOL_KINDS, CapabilityRegistry
from mcp_expose.serving.server import build_server
from mcp_expose.testing.answering import Answerer, Person, approval_url
from mcp_expose.testing.caller import Caller, CatalogView, HttpRefusal, refusal_at_edge

MODERN_ERA = "2026-07-28"
LEGACY_ERA = "2025-11-25"
# The SDK client's mode for each protocol era: the modern one discovers, the legacy one initializes.
ERA_MODES = {MODERN_ERA: "auto", LEGACY_ERA: "legacy"}
# Rounds of questions a call may ask before the client gives up (the SDK client's own default).
MAX_ROUNDS = 10

P = ParamSpec("P")
R = TypeVar("R")


class AppsHost(ClientExtension):
    """What a host that renders MCP Apps declares: the extension, with the page MIME type it renders."""

    identifier = EXTENSION_ID

    def settings(self) -> dict[str, Any]:
        return {"mimeTypes": [APP_MIME_TYPE]}


@dataclass(frozen=True, slots=True)
class Connected:
    """One in-memory connection, and who it is for."""

    client: Client
    principal: Principal
    catalog: Catalog


class McpTestClient:
    """An MCP client for tests, calling as `user` with `scopes` (see the module's docstring).

    - `user`: a user or a username; None is an anonymous caller (with `ANONYMOUS_SCOPES`, when
      `ALLOW_ANONYMOUS` is on).
    - `scopes`: the credential's scopes, widened by `SCOPE_HIERARCHY`. Default: every scope the catalog's
      tools use, as `manage.py mcp_stdio --user` holds them.
    - `oauth_client`: a django-oauth-toolkit Application or its client_id: the caller is that OAuth client's
      token (allowed-clients rules and the step-up challenge apply). Without it, a local caller.
    - `era`: the protocol revision, "2026-07-28" or "2025-11-25".
    - `confirm`: True approves confirmations (in the client's form, or on the approval page), False declines
      them, None leaves them (a `confirmation_required` error, or an unanswered form with `forms=True`).
    - `answer(message, schema)`: fills in the forms a tool asks; returns the content, or None to decline.
    - `forms`: whether the client declares form support (default: when it can answer one).
    - `registry`: serve these declarations instead of the project's.
    - `apps`: the client declares MCP Apps (a host that renders `ui://` pages): tools shown by a page carry
      `_meta.ui`, and their pages are listed and readable.
    - `endpoint`: the name of the endpoint (in `ENDPOINTS`) to connect to: its toolset, server name and
      instructions. Default: the one at `PATH`.
    """

    def __init__(
        self,
        user: Any = None,
        scopes: Iterable[str] | None = None,
        *,
        oauth_client: Any = None,
        era: str = MODERN_ERA,
        confirm: bool | None = None,
        answer: Answerer | None = None,
        forms: bool | None = None,
        base_url: str = "http://testserver",
        registry: CapabilityRegistry | None = None,
        apps: bool = False,
        endpoint: str = DEFAULT_ENDPOINT,
    ) -> None:
        if era not in ERA_MODES:
            raise ValueError(f"era must be one of {sorted(ERA_MODES)}, not {era!r}.")
        if user is None and (scopes is not None or oauth_client is not None):
            raise ValueError("An anonymous caller holds ANONYMOUS_SCOPES and no OAuth client: pass a user.")
        client_id = getattr(oauth_client, "client_id", oauth_client)
        self.caller = Caller(user, frozenset(scopes) if scopes is not None else None, client_id)
        self.era = era
        self.person = Person(confirm, answer)
        self.forms = forms if forms is not None else self.person.answers_forms
        self.base_url = base_url
        self._catalog = CatalogView(registry)
        self.apps = apps
        self.endpoint_name = endpoint

    # The async API: the same methods, `a`-prefixed, for async tests. -----------------------------------------

    @asynccontextmanager
    async def connect(self, **client_options: Any) -> AsyncIterator[Client]:
        """The official SDK client, connected as this caller (`client_options` go to `mcp.Client`). The
        edge's checks for a tool's scopes are made only by this class's own methods."""
        async with self._connected(**client_options) as connected:
            yield connected.client

    async def alist_tools(self) -> types.ListToolsResult:
        return await self._run(lambda connected: connected.client.list_tools())

    async def atool_names(self) -> list[str]:
        return [tool.name for tool in (await self.alist_tools()).tools]

    async def acall_tool(
        self, name: str, arguments: dict[str, Any] | None = None
    ) -> types.CallToolResult | types.InputRequiredResult:
        """The tool's result; an `InputRequiredResult` when it asked what this client does not answer."""

        async def call(connected: Connected) -> Any:
            refusal = refusal_at_edge(connected.principal, connected.catalog, name)
            if refusal is not None:
                raise refusal

            async def send(responses: dict[str, Any] | None, state: str | None) -> Any:
                return await connected.client.session.call_tool(
                    name, arguments, input_responses=responses, request_state=state, allow_input_required=True
                )

            result = await self._answered(send)
            url = approval_url(result)
            if url is None or self.person.confirm is None:
                return result
            # The person answers on the approval page, and the call is made again, as the error asks.
            await in_worker_thread(self.person.answer_on_page)(connected.principal.user, url)
            return await self._answered(send)

        return await self._run(call)

    async def alist_resources(self) -> types.ListResourcesResult:
        return await self._run(lambda connected: connected.client.list_resources())

    async def aread_resource(self, uri: str) -> types.ReadResourceResult | types.InputRequiredResult:
        async def read(connected: Connected) -> Any:
            async def send(responses: dict[str, Any] | None, state: str | None) -> Any:
                return await connected.client.session.read_resource(
                    uri, input_responses=responses, request_state=state, allow_input_required=True
                )

            return await self._answered(send)

        return await self._run(read)

    async def alist_prompts(self) -> types.ListPromptsResult:
        return await self._run(lambda connected: connected.client.list_prompts())

    async def aget_prompt(
        self, name: str, arguments: dict[str, str] | None = None
    ) -> types.GetPromptResult | types.InputRequiredResult:
        async def get(connected: Connected) -> Any:
            async def send(responses: dict[str, Any] | None, state: str | None) -> Any:
                return await connected.client.session.get_prompt(
                    name, arguments, input_responses=responses, request_state=state, allow_input_required=True
                )

            return await self._answered(send)

        return await self._run(get)

    # The sync API, for sync tests: each call blocks the test's thread, whose connection the tools use. ------

    def list_tools(self) -> types.ListToolsResult:
        return _blocking(self.alist_tools)()

    def tool_names(self) -> list[str]:
        """The names of the tools this caller sees, in the catalog's order."""
        return _blocking(self.atool_names)()

    def call_tool(
        self, name: str, arguments: dict[str, Any] | None = None
    ) -> types.CallToolResult | types.InputRequiredResult:
        return _blocking(self.acall_tool)(name, arguments)

    def list_resources(self) -> types.ListResourcesResult:
        return _blocking(self.alist_resources)()

    def read_resource(self, uri: str) -> types.ReadResourceResult | types.InputRequiredResult:
        return _blocking(self.aread_resource)(uri)

    def list_prompts(self) -> types.ListPromptsResult:
        return _blocking(self.alist_prompts)()

    def get_prompt(
        self, name: str, arguments: dict[str, str] | None = None
    ) -> types.GetPromptResult | types.InputRequiredResult:
        return _blocking(self.aget_prompt)(name, arguments)

    # -----------------------------------------------------------------------------------------------------------

    async def _run(self, action: Callable[[Connected], Awaitable[R]]) -> R:
        """`action` on a fresh connection. What it raises is raised as it is, once the connection is closed
        (inside, the SDK client's task group would wrap it in an exception group)."""
        failure: Exception | None = None
        async with self._connected() as connected:
            try:
                result = await action(connected)
            except Exception as exc:  # noqa: BLE001  (raised below)
                failure = exc
        if failure is not None:
            raise failure
        return result

    @asynccontextmanager
    async def _connected(self, **client_options: Any) -> AsyncIterator[Connected]:
        """A fresh in-memory connection, as the caller stands now (checked as the edge checks them)."""
        with hops_on_callers_thread():
            principal, catalog = await in_worker_thread(self._caller_now)()
            refusal = refusal_at_edge(principal, catalog)
            if refusal is not None:
                raise refusal

            async def resolve(ctx: Any) -> tuple[Principal, Catalog]:
                # Each request sees the rows and settings as they are now, as over HTTP.
                return principal, await in_worker_thread(self._endpoint_catalog)()

            server = build_server(
                resolve=resolve, base_url=self.base_url, stateful_legacy=True, endpoint=self._endpoint()
            )
            options: dict[str, Any] = {"elicitation_callback": self.person.elicit} if self.forms else {}
            if self.apps:
                options["extensions"] = [AppsHost()]
            async with Client(server, mode=ERA_MODES[self.era], **options, **client_options) as client:
                yield Connected(client, principal, catalog)

    def known_tool_names(self) -> frozenset[str]:
        """Every name a tool of this deployment goes by on the wire, served now or not (disabled, off this
        endpoint): what tells a tool hidden from this caller apart from a name no tool has, such as one written in
        the other WIRE_NAMES style."""
        whole = self._catalog.get()
        style = get_settings().WIRE_NAMES
        declared = {served_name(c.name, style) for c in whole.capabilities.values() if c.kind in TOOL_KINDS}
        return frozenset(declared | {entry.name for entry in whole.tools})

    def _caller_now(self) -> tuple[Principal, Catalog]:
        catalog = self._endpoint_catalog()
        return self.caller.principal(catalog), catalog

    def _endpoint(self) -> Endpoint:
        endpoint = endpoint_named(self.endpoint_name)
        if endpoint is None:
            names = [endpoint.name for endpoint in endpoints()]
            raise ValueError(f"No MCP endpoint is named {self.endpoint_name!r}; the endpoints are {names}.")
        return endpoint

    def _endpoint_catalog(self) -> Catalog:
        return self._catalog.get().for_endpoint(self._endpoint())

    async def _answered(self, send: Callable[[dict[str, Any] | None, str | None], Awaitable[Any]]) -> Any:
        """Send the request, and again with the answers while the server asks what the test answers."""
        result = await send(None, None)
        for _ in range(MAX_ROUNDS):
            if not isinstance(result, types.InputRequiredResult):
                return result
            answers = self.person.answer_round(result)
            if answers is None:
                return result
            result = await send(answers, result.request_state)
        raise AssertionError(f"The server asked more than {MAX_ROUNDS} rounds of questions; the last: {result!r}")


def _blocking(method: Callable[P, Awaitable[R]]) -> Callable[P, R]:
    """`method` for sync code: the event loop runs in a thread of its own while this thread serves the hops."""
    return async_to_sync(method)


__all__ = ["HttpRefusal", "LEGACY_ERA", "MODERN_ERA", "McpTestClient"]
