"""The WSGI entry: the ASGI entry in its `streams=False` mode, driven from a WSGI server's worker threads.

`McpExposeWSGI` sends the MCP paths (every endpoint, the RFC 9728 metadata, health) to `AsgiBridge` and every
other request straight to Django's `WSGIHandler`, so the admin, OAuth and the connect page are plain WSGI. The
bridge runs `McpExposeASGI(streams=False)`: the same edge checks, authentication, policy, dispatcher, fast path
and usage log as under uvicorn, answering what needs a stream with an error naming the ASGI entry.

Each worker process gets one event loop, in a daemon thread started by its first MCP request (a pre-forking
server such as gunicorn forks after importing the app, and a thread does not survive a fork). That loop runs
the ASGI lifespan once (the SDK's managers, the usage writer, the revision audit) and every request, each turned
from an environ into an HTTP scope and answered whole: JSON answers only, so nothing is ever streamed, and an
answer that does not come within the bound (the longest tool timeout plus a margin) is cancelled and answered
504. At the process's exit the lifespan's shutdown writes the last usage rows.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import concurrent.futures.thread  # registers its exit hook first, so that ours runs before it (see _on_exit)
import json
import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote
from wsgiref.util import is_hop_by_hop

from mcp_types import INTERNAL_ERROR
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_expose.catalog.compiled import CatalogProvider
from mcp_expose.core.conf import get_settings
from mcp_expose.serving.asgi import McpExposeASGI

logger = logging.getLogger("mcp_expose.wsgi")

StartResponse = Callable[..., Any]
WSGIApplication = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]

# What an answer may take beyond the longest tool timeout (TOOL_TIMEOUT: code and the admin only shorten it):
# authentication, the catalog's compilation, the usage row, the SDK.
ANSWER_MARGIN_SECONDS = 15.0
# The lifespan's startup (every declaration's schema built) and shutdown (the last usage rows written): only
# guards against a hang, each ends on its event.
STARTUP_GUARD_SECONDS = 300.0
SHUTDOWN_GUARD_SECONDS = 30.0


def get_wsgi_application(django_app: WSGIApplication | None = None, *, timeout: float | None = None) -> McpExposeWSGI:
    """Wrap Django's WSGI app (or `django_app`) with the MCP endpoint's stateless paths.

    `timeout`: seconds an MCP answer may take before it is cancelled and answered 504 (default: TOOL_TIMEOUT
    plus ANSWER_MARGIN_SECONDS). Keep the WSGI server's own worker timeout above it."""
    if django_app is None:
        from django.core.wsgi import get_wsgi_application as django_wsgi

        django_app = cast(WSGIApplication, django_wsgi())
    return McpExposeWSGI(django_app, timeout=timeout)


class McpExposeWSGI:
    """The MCP paths to the bridge, everything else to Django."""

    def __init__(
        self,
        django_app: WSGIApplication,
        *,
        provider: CatalogProvider | None = None,
        timeout: float | None = None,
    ) -> None:
        self.django_app = django_app
        self.mcp = McpExposeASGI(_not_served, provider=provider, streams=False)
        self.bridge = AsgiBridge(self.mcp, timeout=timeout)
        self.paths = frozenset([*self.mcp.routes, *self.mcp.metadata_routes, *(self.mcp.health or ())])

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if _path(environ) in self.paths:
            return self.bridge(environ, start_response)
        return self.django_app(environ, start_response)


class AsgiBridge:
    """A WSGI application answering each request with an ASGI app run on this process's event loop."""

    def __init__(self, app: ASGIApp, *, timeout: float | None = None) -> None:
        self.app = app
        self.timeout = timeout if timeout is not None else get_settings().TOOL_TIMEOUT + ANSWER_MARGIN_SECONDS
        self._lock = threading.Lock()
        self._loop: _ProcessLoop | None = None
        os.register_at_fork(after_in_child=self._forget_parent)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        loop = self._running()
        if loop.failure is not None:
            return _reply(start_response, 500, _rpc_error(loop.failure))
        limit = get_settings().MAX_REQUEST_BODY_SIZE
        body = _read_body(environ, limit)
        if body is None:
            error = {"error": "request_too_large", "error_description": "The request body is too large."}
            return _reply(start_response, 413, json.dumps(error).encode())
        exchange = _Exchange(body)
        loop.loop.call_soon_threadsafe(exchange.start, self.app, _scope(environ))
        if not exchange.wait(self.timeout):
            loop.loop.call_soon_threadsafe(exchange.cancel)
            logger.warning("An MCP request got no answer within %.0f s: cancelled, answered 504", self.timeout)
            message = f"The server did not answer within {self.timeout:.0f} s; the request was cancelled."
            return _reply(start_response, 504, _rpc_error(message))
        if exchange.failure is not None:
            logger.error("The MCP endpoint failed before answering (WSGI entry)", exc_info=exchange.failure)
            return _reply(start_response, 500, _rpc_error("The server failed unexpectedly; its log says why."))
        status, headers, content = exchange.answer
        start_response(_status_line(status), _wsgi_headers(headers, len(content)))
        return [content]

    def _running(self) -> _ProcessLoop:
        """This process's loop, started (with the lifespan) on the first request after the process began."""
        loop = self._loop
        if loop is not None and loop.pid == os.getpid():
            return loop
        with self._lock:
            if self._loop is None or self._loop.pid != os.getpid():
                self._loop = _ProcessLoop(self.app)
            return self._loop

    def _forget_parent(self) -> None:
        """In a forked child: the parent's loop thread did not come along, and its lock may be held."""
        self._lock = threading.Lock()
        self._loop = None

    def shutdown(self) -> None:
        """Run the lifespan's shutdown now (it runs at the process's exit otherwise)."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None and loop.pid == os.getpid():
            loop.shutdown()


class _ProcessLoop:
    """One event loop in a daemon thread, with the ASGI lifespan started on it; `failure` says why it did not."""

    def __init__(self, app: ASGIApp) -> None:
        self.pid = os.getpid()
        self.app = app
        self.loop = asyncio.new_event_loop()
        self.failure: str | None = None
        self._stopping: asyncio.Event | None = None
        self._stopped: concurrent.futures.Future[None] | None = None
        threading.Thread(target=self.loop.run_forever, name="mcp_expose-wsgi-loop", daemon=True).start()
        started: concurrent.futures.Future[str | None] = concurrent.futures.Future()
        asyncio.run_coroutine_threadsafe(self._lifespan(started), self.loop)
        try:
            problem = started.result(STARTUP_GUARD_SECONDS)
        except concurrent.futures.TimeoutError:
            problem = f"its startup did not finish within {STARTUP_GUARD_SECONDS:.0f} s"
        if problem is not None:
            # The reason (declarations, module paths, import errors) is for the log; callers get an incident id.
            incident = uuid.uuid4().hex[:16]
            logger.error(
                "The MCP endpoint did not start in this worker process (pid %d, incident %s): %s",
                self.pid,
                incident,
                problem,
            )
            self.failure = (
                f"The MCP endpoint could not start in this worker process (incident {incident}). The server's log "
                "says why."
            )
            return
        _on_exit(self.shutdown)

    async def _lifespan(self, started: concurrent.futures.Future[str | None]) -> None:
        self._stopping = asyncio.Event()
        stopped = self._stopped = concurrent.futures.Future()
        announced = False

        async def receive() -> Message:
            nonlocal announced
            if not announced:
                announced = True
                return {"type": "lifespan.startup"}
            assert self._stopping is not None
            await self._stopping.wait()
            return {"type": "lifespan.shutdown"}

        async def send(message: Message) -> None:
            if message["type"] == "lifespan.startup.complete":
                started.set_result(None)
            elif message["type"] == "lifespan.startup.failed":
                started.set_result(message.get("message") or "the lifespan's startup failed")
            elif message["type"].startswith("lifespan.shutdown.") and not stopped.done():
                stopped.set_result(None)

        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}
        try:
            await self.app(scope, receive, send)
        except BaseException as exc:  # noqa: BLE001  (told to the request that waits for the startup)
            if not started.done():
                started.set_result(f"{type(exc).__name__}: {exc}")
            else:
                logger.exception("The MCP endpoint's lifespan failed (WSGI entry)")
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
        finally:
            if not started.done():
                started.set_result("the lifespan ended before its startup completed")
            if not stopped.done():
                stopped.set_result(None)

    def shutdown(self) -> None:
        """The lifespan's shutdown (the last usage rows written), then the loop stopped. Once; blocking."""
        stopping, stopped, self._stopped = self._stopping, self._stopped, None
        if self.pid != os.getpid() or stopping is None or stopped is None:
            return
        self.loop.call_soon_threadsafe(stopping.set)
        try:
            stopped.result(SHUTDOWN_GUARD_SECONDS)
        except concurrent.futures.TimeoutError:
            logger.error("The MCP endpoint's shutdown did not finish within %.0f s", SHUTDOWN_GUARD_SECONDS)
        self.loop.call_soon_threadsafe(self.loop.stop)


def _on_exit(callback: Callable[[], None]) -> None:
    """Call `callback` when the process exits normally (a WSGI server stopping a worker), while new threads and
    executor jobs can still start: the lifespan's shutdown needs them. `atexit` comes too late for that (the
    executors refuse new work by then); the hook that `concurrent.futures` uses itself runs before them."""
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        register(callback)
    else:  # pragma: no cover  (an interpreter without it: the shutdown may find its executors closed)
        import atexit

        atexit.register(callback)


class _Exchange:
    """One request: its body handed over once, its answer gathered whole, then handed to the waiting thread.

    The request's thread waits on a plain lock, and the loop is told with one `call_soon_threadsafe`: lighter than
    `run_coroutine_threadsafe` and a future, which cost a third of the bridge's time per request."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.answer: tuple[int, list[tuple[bytes, bytes]], bytes] = (500, [], b"")
        self.failure: BaseException | None = None
        self._answered = threading.Lock()
        self._answered.acquire()  # released once, when the answer (or the failure) is there
        self._told = False
        self._status = 0
        self._headers: list[tuple[bytes, bytes]] = []
        self._chunks: list[bytes] = []
        self._done: asyncio.Event | None = None
        self._read = False
        self._task: asyncio.Task[None] | None = None

    def wait(self, timeout: float) -> bool:
        """In the request's thread: True once answered, False after `timeout` seconds without an answer."""
        return self._answered.acquire(timeout=timeout)

    def start(self, app: ASGIApp, scope: Scope) -> None:
        """In the loop."""
        self._task = asyncio.get_running_loop().create_task(self.run(app, scope))

    def cancel(self) -> None:
        """In the loop (after `start`: callbacks run in order)."""
        if self._task is not None:
            self._task.cancel()

    def _tell(self, failure: BaseException | None = None) -> None:
        if not self._told:
            self._told = True
            self.failure = failure
            self._answered.release()

    async def run(self, app: ASGIApp, scope: Scope) -> None:
        self._done = asyncio.Event()
        try:
            await app(scope, self.receive, self.send)
        except asyncio.CancelledError:
            self._tell(RuntimeError("cancelled"))
            raise
        except Exception as exc:  # noqa: BLE001  (answered by the request's thread, or logged here)
            if self._told:
                logger.error("The MCP endpoint failed after it answered (WSGI entry)", exc_info=exc)
            self._tell(exc)
        finally:
            self._done.set()
            self._tell(RuntimeError("The ASGI app returned without a complete response"))

    async def receive(self) -> Message:
        if not self._read:
            self._read = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        # A WSGI server tells nobody of a client that left: the client stays until its answer is complete.
        assert self._done is not None
        await self._done.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self._status = message["status"]
            self._headers = list(message.get("headers", []))
        elif message["type"] == "http.response.body":
            self._chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                assert self._done is not None
                self._done.set()
                if not self._told:
                    self.answer = (self._status, self._headers, b"".join(self._chunks))
                    self._tell()


def _path(environ: dict[str, Any]) -> str:
    """PATH_INFO as text (WSGI passes the bytes as latin-1)."""
    return str(environ.get("PATH_INFO", "")).encode("latin-1").decode("utf-8", "replace")


def _scope(environ: dict[str, Any]) -> Scope:
    """An ASGI HTTP scope for the environ's request."""
    headers = []
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            name = key[5:]
        elif key in ("CONTENT_TYPE", "CONTENT_LENGTH") and value:
            name = key
        else:
            continue
        headers.append((name.replace("_", "-").lower().encode("latin-1"), str(value).encode("latin-1")))
    raw_uri = environ.get("RAW_URI") or environ.get("REQUEST_URI")  # gunicorn's and uWSGI's names
    raw_path = (
        str(raw_uri).split("?", 1)[0].encode("latin-1")
        if raw_uri
        else quote(str(environ.get("SCRIPT_NAME", "")) + str(environ.get("PATH_INFO", "")), safe="/").encode()
    )
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": str(environ.get("SERVER_PROTOCOL", "HTTP/1.1")).partition("/")[2] or "1.1",
        "method": str(environ.get("REQUEST_METHOD", "GET")).upper(),
        "scheme": environ.get("wsgi.url_scheme", "http"),
        "path": _path(environ),
        "raw_path": raw_path,
        "root_path": str(environ.get("SCRIPT_NAME", "")).encode("latin-1").decode("utf-8", "replace"),
        "query_string": str(environ.get("QUERY_STRING", "")).encode("latin-1"),
        "headers": headers,
        "state": {},
    }
    if environ.get("SERVER_NAME"):
        scope["server"] = (environ["SERVER_NAME"], _port(environ.get("SERVER_PORT")))
    if environ.get("REMOTE_ADDR"):
        scope["client"] = (environ["REMOTE_ADDR"], _port(environ.get("REMOTE_PORT")))
    return scope


def _port(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def _read_body(environ: dict[str, Any], limit: int) -> bytes | None:
    """The request body, or None when it is larger than `limit` (then it is not read at all, or not further)."""
    stream = environ["wsgi.input"]
    length = _port(environ.get("CONTENT_LENGTH") or 0)
    if length > limit:
        return None
    if length > 0:
        return bytes(stream.read(length))
    if not environ.get("wsgi.input_terminated"):
        return b""  # no length, and a server that does not end the stream: no body (PEP 3333)
    chunks: list[bytes] = []
    size = 0
    while chunk := stream.read(min(64 * 1024, limit + 1 - size)):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return None
    return b"".join(chunks)


def _status_line(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"{status} Unknown"


def _wsgi_headers(headers: list[tuple[bytes, bytes]], length: int) -> list[tuple[str, str]]:
    """The answer's headers for WSGI: text, no hop-by-hop ones (WSGI forbids them), and its length."""
    out = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in headers]
    out = [(name, value) for name, value in out if not is_hop_by_hop(name) and name.lower() != "content-length"]
    return [*out, ("Content-Length", str(length))]


def _reply(start_response: StartResponse, status: int, body: bytes) -> list[bytes]:
    start_response(_status_line(status), [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def _rpc_error(message: str) -> bytes:
    """A JSON-RPC error without an id, as the ASGI entry answers a failure before the request was read."""
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": INTERNAL_ERROR, "message": message}}).encode()


async def _not_served(scope: Scope, receive: Receive, send: Send) -> None:
    """What the ASGI entry would hand to Django: never reached, Django's pages go to its WSGI handler directly."""
    body = b'{"error": "not_found"}'
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 404, "headers": headers})
    await send({"type": "http.response.body", "body": body})
