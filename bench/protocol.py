"""MCP over HTTP as the bench client speaks it, in both protocol eras, with only the standard library.

2026-07-28: no handshake; every request carries the `_meta` envelope and the `MCP-Protocol-Version`,
`Mcp-Method` (and for tools/call `Mcp-Name`) headers.
2025-11-25: the client sends `initialize` (no version header yet) and `notifications/initialized`,
then every request with `MCP-Protocol-Version: 2025-11-25` and no session id: both servers run the
SDK's stateless legacy transport, which needs neither message (it is "born ready"), but a real
legacy client sends them, so each run starts with them and checks they are answered.
"""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
ERAS = (MODERN, LEGACY)
ACCEPT = "application/json, text/event-stream"
CLIENT_INFO = {"name": "mcp-expose-bench", "version": "1.0"}


@dataclass(frozen=True)
class Reply:
    status: int
    content_type: str
    body: bytes
    session_id: str | None = None

    def message(self) -> Any:
        """The JSON-RPC message in a JSON or an SSE body (the last `data:` event), or None."""
        text = self.body.decode("utf-8", "replace")
        if "text/event-stream" in self.content_type:
            events = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
            text = events[-1] if events else ""
        try:
            return json.loads(text)
        except ValueError:
            return None


def headers(era: str, method: str, tool: str | None, authorization: str | None) -> dict[str, str]:
    out = {"Content-Type": "application/json", "Accept": ACCEPT, "MCP-Protocol-Version": era}
    if era == MODERN:
        out["Mcp-Method"] = method
        if tool is not None:
            out["Mcp-Name"] = tool
    if authorization:
        out["Authorization"] = authorization
    return out


def body(era: str, method: str, params: dict[str, Any], request_id: int = 1) -> str:
    params = dict(params)
    if era == MODERN:
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
        }
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}, separators=(",", ":"))


def post(url: str, data: str, request_headers: dict[str, str], timeout: float = 10.0) -> Reply:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout)
    try:
        connection.request("POST", parts.path, body=data.encode(), headers=request_headers)
        response = connection.getresponse()
        session = response.getheader("mcp-session-id")
        return Reply(response.status, response.getheader("content-type", ""), response.read(), session)
    finally:
        connection.close()


def get(url: str, request_headers: dict[str, str], timeout: float = 10.0) -> Reply:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout)
    try:
        connection.request("GET", parts.path, headers=request_headers)
        response = connection.getresponse()
        return Reply(response.status, response.getheader("content-type", ""), response.read())
    finally:
        connection.close()


def legacy_handshake(url: str, authorization: str | None) -> str | None:
    """What a 2025-11-25 client does first; raises if either step is refused. Returns the session id a
    stateful server gave (None from a stateless one)."""
    hello = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": CLIENT_INFO}
    first = {"Content-Type": "application/json", "Accept": ACCEPT}
    if authorization:
        first["Authorization"] = authorization
    reply = post(url, body(LEGACY, "initialize", hello, request_id=0), first)
    result = (reply.message() or {}).get("result") if reply.status == 200 else None
    if not isinstance(result, dict) or result.get("protocolVersion") != LEGACY:
        raise RuntimeError(f"initialize: HTTP {reply.status} {reply.body[:300]!r}")
    notification = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
    session = {"Mcp-Session-Id": reply.session_id} if reply.session_id else {}
    answered = post(url, notification, {**headers(LEGACY, "notifications/initialized", None, authorization), **session})
    if answered.status not in (200, 202, 204):
        raise RuntimeError(f"notifications/initialized: HTTP {answered.status} {answered.body[:300]!r}")
    return reply.session_id
