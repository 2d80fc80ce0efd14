"""`LiveMcpServer`: a real uvicorn serving the project on 127.0.0.1, and the official SDK client over HTTP.

It serves what the project deploys (settings.ASGI_APPLICATION, else `mcp_expose.asgi`'s application) in a
thread of this process, on a port of its own, with its lifespan. Its requests run on connections of their
own, like pytest-django's `live_server`: the rows a test makes must be committed (`transactional_db`).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import AsyncIterator, Iterable
from contextlib import ExitStack, asynccontextmanager
from types import TracebackType
from typing import Any

import httpx2
import uvicorn
from mcp import Client

from mcp_expose.core.db import in_worker_thread
from mcp_expose.testing.client import ERA_MODES, MODERN_ERA

# Every wait below ends on its event; this only stops a hang.
HANG_GUARD_SECONDS = 120.0
KEY_NAME = "mcp_expose.testing"


class LiveMcpServer:
    """Start it with `with LiveMcpServer() as server:` (or `start()` and `stop()`).

    `application`: the ASGI app to serve (default: the project's, made afresh: an app's MCP session manager
    runs once). `batch_usage`: keep the usage log's batching on; off by default, so that a call's usage row
    is written before its answer, as a test reading it expects.
    """

    def __init__(self, application: Any = None, *, host: str = "127.0.0.1", batch_usage: bool = False) -> None:
        self.application = application
        self.host = host
        self.batch_usage = batch_usage
        self.port: int | None = None
        self._settings = ExitStack()
        self._server: _ReadyServer | None = None
        self._serving: Any = None  # the app being served
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("The live server is not started.")
        return f"http://{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """The MCP endpoint (the default one, at `PATH`)."""
        return self.url_of()

    def url_of(self, endpoint: str = "default") -> str:
        """The URL of the endpoint named `endpoint` (one of `ENDPOINTS`, or "default")."""
        from mcp_expose.core.endpoints import endpoint_named, endpoints

        found = endpoint_named(endpoint)
        if found is None:
            raise ValueError(
                f"No MCP endpoint is named {endpoint!r}; the endpoints are {[e.name for e in endpoints()]}."
            )
        return self.base_url + found.path

    def start(self) -> None:
        """Serve, and return once uvicorn's startup is over; raises when it failed."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        from django.test.utils import modify_settings

        # Undone by `stop`, in reverse: the socket closed, the host no longer allowed.
        self._settings.enter_context(modify_settings(ALLOWED_HOSTS={"append": self.host}))
        listening = self._settings.enter_context(socket.socket())
        listening.bind((self.host, 0))
        self.port = listening.getsockname()[1]
        self._serving = self.application or project_application()
        config = uvicorn.Config(self._serving, lifespan="on", log_config=None, access_log=False)
        server = self._server = _ReadyServer(config)
        self._thread = threading.Thread(
            target=self._serve, args=(server, listening), name="mcp-live-server", daemon=True
        )
        with ExitStack() as starting:
            # Read once, by the lifespan's startup: usage rows written before each answer unless batching is asked
            # for, and the collector left alone (FREEZE_GC is for a server's own process; frozen here, every
            # object the test run had made before this server would stay in memory to its end).
            starting.enter_context(_startup_settings(batch_usage=self.batch_usage))
            self._thread.start()
            server.ready.wait(HANG_GUARD_SECONDS)
        if not server.started:
            raise RuntimeError(f"The live MCP server did not start ({self._failure!r}); its log says why.")

    def stop(self) -> None:
        if self._server is not None:
            # uvicorn waits for open responses before it stops: open listen streams end first.
            if hasattr(self._serving, "begin_stopping"):
                self._serving.begin_stopping()
            self._server.should_exit = True
        thread = self._thread
        if thread is not None:
            thread.join(HANG_GUARD_SECONDS)
        self._server = self._thread = None
        self._settings.close()
        if thread is not None and thread.is_alive():
            raise RuntimeError(
                f"The live MCP server did not stop within {HANG_GUARD_SECONDS:g} s: a response it serves is still"
                " open (a client's stream the test left open, or a tool that does not return)."
            )

    def __enter__(self) -> LiveMcpServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    def _serve(self, server: _ReadyServer, listening: socket.socket) -> None:
        try:
            server.run(sockets=[listening])
        except BaseException as exc:  # noqa: BLE001  (reported by `start`, which waits for it)
            self._failure = exc
        finally:
            server.ready.set()

    def create_key(self, user: Any, scopes: Iterable[str] | None = None) -> str:
        """A new API key of `user` (a user or a username) with `scopes` (default: every scope the catalog's
        tools use); returns its secret. Sync: writes the key's row."""
        from django.contrib.auth import get_user_model

        from mcp_expose.catalog.compiled import provider
        from mcp_expose.models import ApiKey

        if isinstance(user, str):
            user = get_user_model()._default_manager.get_by_natural_key(user)
        if scopes is None:
            scopes = frozenset().union(*(entry.scopes for entry in provider.get_sync().tools))
        return ApiKey.create_key(user=user, name=KEY_NAME, scopes=" ".join(sorted(scopes)))[1]

    @asynccontextmanager
    async def connect(
        self,
        user: Any,
        scopes: Iterable[str] | None = None,
        *,
        era: str = MODERN_ERA,
        endpoint: str = "default",
        **client_options: Any,
    ) -> AsyncIterator[Client]:
        """The official SDK client, connected over HTTP with a new API key of `user` holding `scopes`, to the
        endpoint named `endpoint`."""
        if era not in ERA_MODES:
            raise ValueError(f"era must be one of {sorted(ERA_MODES)}, not {era!r}.")
        url = self.url_of(endpoint)
        secret = await in_worker_thread(self.create_key)(user, scopes)
        async with connect_http(url, secret, mode=ERA_MODES[era], **client_options) as client:
            yield client


@asynccontextmanager
async def connect_http(
    url: str, credential: str | None, *, mode: str = "auto", headers: dict[str, str] | None = None, **options: Any
) -> AsyncIterator[Client]:
    """The official SDK client on `url`, sending `credential` as a bearer token (`options` go to `Client`)."""
    from mcp.client.streamable_http import streamable_http_client

    headers = {**(headers or {}), **({"Authorization": f"Bearer {credential}"} if credential else {})}
    http = mcp_http_client(headers=headers)
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode, **options) as client:
        yield client


def mcp_http_client(headers: dict[str, str] | None = None, auth: httpx2.Auth | None = None) -> httpx2.AsyncClient:
    """An HTTP client for the SDK's `streamable_http_client`, with the SDK client's own timeouts."""
    from mcp_expose.upstream.transport import MCP_CLIENT_TIMEOUT

    return httpx2.AsyncClient(headers=headers, auth=auth, timeout=MCP_CLIENT_TIMEOUT)


def project_application() -> Any:
    """The project's ASGI app, made afresh when it is ours (settings.ASGI_APPLICATION, else ours)."""
    from django.conf import settings
    from django.utils.module_loading import import_string

    from mcp_expose.serving.asgi import McpExposeASGI, get_asgi_application

    name = getattr(settings, "ASGI_APPLICATION", None)
    if not name:
        return get_asgi_application()
    application = import_string(name)
    if isinstance(application, McpExposeASGI):
        # A session manager runs once: the same Django app and catalog, with a manager of this server's own.
        return McpExposeASGI(application.django_app, provider=application.provider)
    return application


class _ReadyServer(uvicorn.Server):
    """uvicorn's server, telling a waiting thread when its startup is over (serving, or failed)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets)
        finally:
            self.ready.set()


def _startup_settings(*, batch_usage: bool) -> Any:
    from django.conf import settings
    from django.test.utils import override_settings

    from mcp_expose.core.conf import changed_settings

    overrides: dict[str, Any] = {"FREEZE_GC": False}
    if not batch_usage:
        overrides["USAGE_BATCH_SECONDS"] = 0
    return override_settings(MCP_EXPOSE=changed_settings(getattr(settings, "MCP_EXPOSE", {}), **overrides))
