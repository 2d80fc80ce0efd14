"""An upstream behind OAuth 2.1 client credentials that is its own authorization server. `uvicorn
tests.upstreams.token_server:app`

`POST /token` issues `tok-1`, `tok-2`, … to the client `gateway` with the secret `gateway-secret` (in HTTP Basic,
as the gateway sends them, or in the form), and only the latest token is valid; `POST /revoke` makes it invalid
before it expires, as an authorization server that revoked it would. `/mcp` answers 401 to any other bearer token,
and is the official SDK's server otherwise. `GET /stats` says what it saw: tokens issued, clients refused, MCP
requests refused, and the tokens and forms it accepted.

The `hold` tool says it started (a progress notification) and answers only once `POST /release` is called: a call
that is under way for as long as a test needs.
"""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import parse_qsl

import anyio
from mcp.server.mcpserver import Context, MCPServer

from tests.upstreams import read_body

CLIENT_ID = "gateway"
CLIENT_SECRET = "gateway-secret"

server = MCPServer("token-upstream", log_level="WARNING")
state: dict[str, Any] = {"current": None, "issued": 0, "refused_clients": 0, "refused_calls": 0}
accepted: list[str] = []
forms: list[dict[str, str]] = []
# The event `hold` waits for, made in the server's loop when first asked for; `POST /release` sets it.
gate: dict[str, anyio.Event] = {}


@server.tool()
async def echo(text: str) -> str:
    """Say the text back."""
    return text


@server.tool()
async def hold(ctx: Context) -> str:
    """Say it started, then answer once released."""
    await ctx.report_progress(0, 1, "holding")
    await gate.setdefault("release", anyio.Event()).wait()
    return "released"


_mcp = server.streamable_http_app(stateless_http=True)


async def app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        await _mcp(scope, receive, send)  # the lifespan runs the SDK's session manager
        return
    path, method = scope["path"], scope["method"]
    if path == "/":
        await _send(send, 200, {"server": "token upstream"})
    elif path == "/stats":
        await _send(send, 200, {**state, "accepted": accepted, "forms": forms})
    elif path == "/token" and method == "POST":
        await _token(scope, receive, send)
    elif path == "/revoke" and method == "POST":
        state["current"] = None
        await _send(send, 200, {"revoked": True})
    elif path == "/release" and method == "POST":
        gate.pop("release", anyio.Event()).set()
        await _send(send, 200, {"released": True})
    elif path.startswith("/mcp"):
        token = _headers(scope).get("authorization", "").removeprefix("Bearer ")
        if state["current"] is None or token != state["current"]:
            state["refused_calls"] += 1
            await _send(send, 401, {"error": "invalid_token"}, www_authenticate='Bearer error="invalid_token"')
            return
        if method == "POST":
            accepted.append(token)
        await _mcp(scope, receive, send)
    else:
        await _send(send, 404, {"error": "not_found"})


async def _token(scope: Any, receive: Any, send: Any) -> None:
    form = dict(parse_qsl((await read_body(receive)).decode()))
    client_id, secret = form.pop("client_id", None), form.pop("client_secret", None)
    basic = _headers(scope).get("authorization", "")
    if basic.startswith("Basic "):
        client_id, _, secret = base64.b64decode(basic.removeprefix("Basic ")).decode().partition(":")
    if (client_id, secret) != (CLIENT_ID, CLIENT_SECRET) or form.get("grant_type") != "client_credentials":
        state["refused_clients"] += 1
        await _send(send, 401, {"error": "invalid_client"})
        return
    state["issued"] += 1
    state["current"] = f"tok-{state['issued']}"
    forms.append(form)
    await _send(send, 200, {"access_token": state["current"], "token_type": "Bearer", "expires_in": 3600})


def _headers(scope: Any) -> dict[str, str]:
    return {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}


async def _send(send: Any, status: int, answer: dict[str, Any], **extra: str) -> None:
    body = json.dumps(answer).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(name.replace("_", "-").encode(), value.encode()) for name, value in extra.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
