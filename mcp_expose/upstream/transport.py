"""The HTTP under the SDK's client when it talks to an upstream: guarded, pinned and bounded.

Each request is checked by the SSRF guard as it leaves (the host is resolved again, so a name that now points
behind the deployment is refused) and sent to the address that was checked, so nothing can resolve it again
in between. Answers are read as sent (no compression: a small compressed answer can unpack to gigabytes), and
no answer to a POST may be longer than the limit. A `tools/list` page is read by the bounded reader before the
SDK's models see it: they see only the entries that passed, so one hostile entry never fails the page. Its
entries are parsed one by one, each within `UPSTREAM_MAX_ENTRY_BYTES`; a page longer than
`UPSTREAM_MAX_LISTING_BYTES` is read up to that point, and the entries complete before it are kept.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2

from mcp_expose.core.chain import INSTANCE_HEADER, instance_mark
from mcp_expose.core.conf import get_settings
from mcp_expose.core.db import in_worker_thread
from mcp_expose.core.errors import McpExposeError
from mcp_expose.core.ssrf_guard import AddressRefused, connectable_address
from mcp_expose.upstream.bounded_json import UnreadableJSON, loads_listing
from mcp_expose.upstream.lean_http import LEAN, LeanTransport
from mcp_expose.upstream.reader import Diagnostic, ToolDefinition, read_tools
from mcp_expose.upstream.tls import upstream_tls

# A page's JSON may nest this deep before a value is cut out (a schema's own limit is checked per tool).
PAGE_DEPTH = 64
# The SDK client's own timeouts (30 s; a stream may stay quiet for 5 minutes), spelled here because the SDK keeps
# them in a private module: for HTTP clients we hand to the SDK's `streamable_http_client`.
MCP_CLIENT_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
# A host's addresses, looked up and checked off the event loop (DNS may take long; a cancelled request leaves it).
resolve_in_thread = in_worker_thread(connectable_address, abandon_on_cancel=True)


class UpstreamRefused(McpExposeError, httpx2.TransportError):
    """An upstream, or its answer, that is not accepted; the message says why (and nothing it sent)."""


class BoundedTransport(httpx2.AsyncBaseTransport):
    """One upstream's connection pool, with the guard, the pin and the bounds above. `pages` collects the raw
    entries of each `tools/list` page read, for discovery to read as one listing. A request marked `LEAN` (the
    fast path's) goes over `lean_http`'s connections instead of httpx's, behind the same checks."""

    def __init__(self, server: str, *, max_bytes: int, inner: httpx2.AsyncBaseTransport | None = None) -> None:
        self.server = server
        self.max_bytes = max_bytes
        self.inner = inner if inner is not None else httpx2.AsyncHTTPTransport(trust_env=False, verify=upstream_tls())
        self.pages: list[list[Any]] = []
        self.notes: list[Diagnostic] = []  # what was left unread of the pages (a page cut at the listing limit)
        self.refusal_status: int | None = None  # the last error status an upstream answered, for the diagnostic
        self._lean: LeanTransport | None = None  # made on the first fast-path request

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            if _is_address(request.url.host):  # nothing to look up: checked here, without a thread
                host, _port, addresses = connectable_address(str(request.url))
            else:
                host, _port, addresses = await resolve_in_thread(str(request.url))
        except AddressRefused as exc:
            raise UpstreamRefused(str(exc), request=request) from None
        request.headers["accept-encoding"] = "identity"
        request.headers[INSTANCE_HEADER] = instance_mark()  # our own edge refuses it: a loop, not a call
        listing_id = _listing_request_id(request)
        if request.method == "POST":
            self.refusal_status = None
        response = await send_pinned(self._carrier(request), request, host, addresses)
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            await response.aclose()
            raise UpstreamRefused(f"the upstream answered compressed ({encoding}), which is not read", request=request)
        if response.status_code >= 400 and request.method == "POST":
            self.refusal_status = response.status_code
        if request.method != "POST":
            return response  # the standing event stream: the SDK bounds each of its events
        if listing_id is not None and response.status_code == 200:
            limit = get_settings().UPSTREAM_MAX_LISTING_BYTES
            body, cut = await _read_up_to(response, limit)
            content_type = response.headers.get("content-type", "")
            # Read in a worker thread: bounded and linear, but seconds for the largest page.
            content = await in_worker_thread(self._read_listing)(body, content_type, listing_id, request, cut)
            headers = [(name, value) for name, value in response.headers.items() if name.lower() != "content-length"]
            return httpx2.Response(response.status_code, headers=headers, content=content, request=request)
        response.stream = _Bounded(response.stream, self.max_bytes, request)
        return response

    async def aclose(self) -> None:
        if self._lean is not None:
            await self._lean.aclose()
        await self.inner.aclose()

    def _carrier(self, request: httpx2.Request) -> httpx2.AsyncBaseTransport:
        if not request.extensions.get(LEAN):
            return self.inner
        if self._lean is None:
            self._lean = LeanTransport(upstream_tls())
        return self._lean

    def _read_listing(
        self, body: bytes, content_type: str, request_id: Any, request: httpx2.Request, cut: bool
    ) -> bytes:
        """The page as the SDK will read it: the answer to our request with only the entries that passed, and
        any other message of an event stream as it was parsed here (bounded), never as it was sent. `cut`: the
        body is the first `UPSTREAM_MAX_LISTING_BYTES` of a longer answer."""
        if content_type.split(";", 1)[0].strip().lower() == "text/event-stream":
            return _rewrite_events(
                body, lambda data, last: self._rewrite_message(data, request_id, request, alone=False, cut=cut and last)
            )
        return self._rewrite_message(body, request_id, request, alone=True, cut=cut)

    def _rewrite_message(
        self, data: bytes, request_id: Any, request: httpx2.Request, *, alone: bool, cut: bool = False
    ) -> bytes:
        conf = get_settings()
        try:
            message, read, cut = loads_listing(
                data, max_depth=PAGE_DEPTH, max_entry_bytes=conf.UPSTREAM_MAX_ENTRY_BYTES, cut=cut
            )
        except UnreadableJSON as exc:
            if cut:
                exc = UnreadableJSON(f"the answer is over {conf.UPSTREAM_MAX_LISTING_BYTES} bytes, and {exc}")
            raise UpstreamRefused(f"its tools/list answer cannot be read: {exc}", request=request) from None
        if cut:
            self.notes.append(
                Diagnostic(
                    None,
                    "tools",
                    f"a tools/list answer is over {conf.UPSTREAM_MAX_LISTING_BYTES} bytes (UPSTREAM_MAX_LISTING_BYTES): "
                    f"the {read} entries before that point were read, the rest and any later page were not",
                )
            )
        if not isinstance(message, dict):
            raise UpstreamRefused("its tools/list answer is not a JSON-RPC message", request=request)
        is_answer = "result" in message or "error" in message
        if is_answer and (message.get("id") != request_id or type(message.get("id")) is not type(request_id)):
            raise UpstreamRefused("it answered tools/list with a message that is not the answer to it", request=request)
        if not is_answer:
            if alone:
                raise UpstreamRefused("it answered tools/list with a message that is not an answer", request=request)
            return json.dumps(message).encode()  # a notification before the answer: the SDK reads it, bounded
        if "result" not in message:
            return json.dumps(message).encode()  # an error: the SDK reports it
        result = message["result"]
        if not isinstance(result, dict):
            raise UpstreamRefused("its tools/list result is not an object", request=request)
        entries = result.get("tools")
        entries = entries if isinstance(entries, list) else []
        kept = sum(len(page) for page in self.pages)
        room = max(get_settings().UPSTREAM_MAX_TOOLS + 1 - kept, 0)  # one past the limit: read_tools says it was hit
        self.pages.append(entries[:room])
        definitions, _ = read_tools(entries[:room], self.server)
        cursor = result.get("nextCursor")
        page: dict[str, Any] = {"tools": [wire_tool(definition) for definition in definitions]}
        if isinstance(cursor, str) and 0 < len(cursor) <= 1024 and not cut:
            page["nextCursor"] = cursor
        page["_meta"] = _plain_meta(result.get("_meta"))
        # What the 2026-07-28 models require of every result: an upstream that leaves them out gets no caching.
        page["resultType"] = "complete"
        page["ttlMs"] = 0
        page["cacheScope"] = "private"
        return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": page}).encode()


def wire_tool(definition: ToolDefinition) -> dict[str, Any]:
    """A definition as `tools/list` carries it."""
    stored = definition.as_json()
    tool: dict[str, Any] = {"name": stored["name"], "description": stored["description"]}
    tool["inputSchema"] = stored["input_schema"]
    if stored["title"] is not None:
        tool["title"] = stored["title"]
    if stored["output_schema"] is not None:
        tool["outputSchema"] = stored["output_schema"]
    if stored["annotations"]:
        tool["annotations"] = stored["annotations"]
    return tool


def _plain_meta(meta: Any) -> dict[str, Any]:
    """Of a result's `_meta`, only the server's identity stamp the SDK reads; bounded like everything else."""
    if not isinstance(meta, dict):
        return {}
    info = meta.get("io.modelcontextprotocol/serverInfo")
    if isinstance(info, dict) and len(json.dumps(info)) <= 4096:
        return {"io.modelcontextprotocol/serverInfo": info}
    return {}


# How many of a name's checked addresses a request tries, in the resolver's order, before it fails: each may take
# the connect timeout.
ADDRESSES_TRIED = 3


async def send_pinned(
    inner: httpx2.AsyncBaseTransport,
    request: httpx2.Request,
    host: str,
    addresses: list[ipaddress.IPv4Address | ipaddress.IPv6Address],
) -> httpx2.Response:
    """Send `request` through `inner` to the first of `addresses` (each checked by the guard) that takes the
    connection. A name may resolve to an address this host cannot reach (IPv6 first, without an IPv6 route) and to
    one that serves. Only a failed connection moves on: nothing of the request was sent."""
    tried = addresses[:ADDRESSES_TRIED]
    for address in tried[:-1]:
        try:
            return await inner.handle_async_request(pinned(request, host, address))
        except (httpx2.ConnectError, httpx2.ConnectTimeout):
            continue
    return await inner.handle_async_request(pinned(request, host, tried[-1]))


def pinned(
    request: httpx2.Request, host: str, address: ipaddress.IPv4Address | ipaddress.IPv6Address
) -> httpx2.Request:
    """A copy of `request` sent to the checked address, its Host header and TLS name still the URL's host. The
    client keeps the original, so redirects and the SDK's same-origin rule still see the URL it asked for."""
    try:
        ipaddress.ip_address(host)
        return request  # already an address
    except ValueError:
        pass
    extensions = dict(request.extensions)
    if request.url.scheme == "https":
        extensions["sni_hostname"] = host
    headers = httpx2.Headers(request.headers)
    headers.setdefault("host", request.url.netloc.decode("ascii"))
    return httpx2.Request(
        request.method,
        request.url.copy_with(host=str(address)),
        headers=headers,
        stream=request.stream,
        extensions=extensions,
    )


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _listing_request_id(request: httpx2.Request) -> Any:
    """The JSON-RPC id of a `tools/list` request, or None for any other."""
    if request.method != "POST":
        return None
    if request.headers.get("mcp-method", "tools/list") != "tools/list":
        return None  # a 2026-07-28 request names its method: a call's body need not be parsed
    try:
        message = json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        return None
    if isinstance(message, dict) and message.get("method") == "tools/list" and "id" in message:
        return message["id"]
    return None


async def _read_up_to(response: httpx2.Response, limit: int) -> tuple[bytes, bool]:
    """The first `limit` bytes of the body, and whether there was more (then the rest is not read: the
    connection is closed)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_raw():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            await response.aclose()
            return b"".join(chunks)[:limit], True
    await response.aclose()
    return b"".join(chunks), False


def _rewrite_events(body: bytes, rewrite: Any) -> bytes:
    """An event stream with each event's data passed through `rewrite(data, last)` (its other fields kept);
    `last` is true for the stream's last event."""
    out: list[bytes] = []
    events = [event for event in body.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n\n") if event.strip()]
    for number, event in enumerate(events, 1):
        lines = event.split(b"\n")
        data = b"\n".join(line[5:].removeprefix(b" ") for line in lines if line.startswith(b"data:"))
        kept = [line for line in lines if not line.startswith(b"data:")]
        if data:
            kept.extend(b"data: " + line for line in rewrite(data, number == len(events)).split(b"\n"))
        out.append(b"\n".join(kept))
    return b"\n\n".join(out) + b"\n\n"


class _Bounded(httpx2.AsyncByteStream):
    """A response body that ends in `UpstreamRefused` past `limit` bytes, streamed as it comes."""

    def __init__(self, stream: Any, limit: int, request: httpx2.Request) -> None:
        self.stream = stream
        self.limit = limit
        self.request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self.stream:
            size += len(chunk)
            if size > self.limit:
                raise UpstreamRefused(f"its answer is over {self.limit} bytes", request=self.request)
            yield chunk

    async def aclose(self) -> None:
        await self.stream.aclose()
