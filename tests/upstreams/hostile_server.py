"""A hostile upstream: raw ASGI that speaks just enough 2026-07-28 to be asked `tools/list`, then misbehaves.

`uvicorn tests.upstreams.hostile_server:app`. The path chooses the misbehaviour: /mcp/<case>, see CASES.
It answers pinned 2026-07-28 clients (which send no `server/discover` first), and 2025-11-25 clients with a
sessionless `initialize`. A path /mcp/sse-<case> answers <case>'s listing as an event stream.
"""

from __future__ import annotations

import gzip
import json
from typing import Any

from tests.upstreams import read_body


def tool(name: Any, **fields: Any) -> dict[str, Any]:
    return {"name": name, "description": f"The {name} tool.", "inputSchema": {"type": "object"}, **fields}


def deep(levels: int) -> Any:
    text = "[" * levels + "]" * levels
    return text


# Each listing case: the tools of its one page; the raw text of a value may be spliced in for "DEEP".
LISTINGS: dict[str, list[dict[str, Any]]] = {
    "listing": [
        tool("fine"),
        tool("other.fine"),
        tool(".hidden"),
        tool("other..fine"),
        tool("huge", description="x" * (1024 * 1024)),
        tool("deep", inputSchema={"type": "object", "properties": {"x": "DEEP"}}),
        tool("remote", inputSchema={"type": "object", "properties": {"x": {"$ref": "https://evil.example/x.json"}}}),
        tool("Fine2"),
        tool("fine2"),
        tool("also_fine", annotations={"readOnlyHint": True, "destructiveHint": "surely not"}),
    ],
}


# The tools of /mcp/calls: each misbehaves when called, as its name says.
CALL_TOOLS = [
    tool("fine_call", inputSchema={"type": "object", "properties": {"text": {"type": "string"}}}),
    tool("hang"),
    tool("oversized"),
    tool("error5xx"),
    tool("closed"),
    tool("malformed"),
    tool("is_error"),
    tool("deep_result"),
    tool("unknown_content"),
    tool(
        "bad_output",
        outputSchema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    ),
    tool(
        "good_output",
        outputSchema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    ),
]
# Answers whose reading the fast path and the SDK's client must agree on (tests/test_upstream_fast_call.py).
CALL_TOOLS += [
    tool(name)
    for name in (
        "sse_answer",
        "sse_no_answer",
        "sse_bad_event",
        "other_id",
        "input_required",
        "unauthorized",
        "json_error_404",
        "redirect_same",
        "redirect_away",
        "html",
        "accepted",
        "negative_ttl",
        "not_jsonrpc",
        "structured_list",
        "empty",
    )
]
LISTINGS["calls"] = CALL_TOOLS
# Ten good tools around one whose schema alone is 5 MB: only that one is refused.
LISTINGS["big-entry"] = [tool(f"good{number}") for number in range(5)] + [
    tool(
        "vast", inputSchema={"type": "object", "properties": {"p": {"type": "string", "description": "x" * 5_000_000}}}
    ),
    *(tool(f"good{number}") for number in range(5, 10)),
]
# 200 tools of about 1 KiB each: a listing limit below 200 KiB cuts it.
LISTINGS["many"] = [tool(f"t{number:03}", description="m" * 1000) for number in range(200)]
# 2025-11-25 sessions: each initialize opens "s-N"; POST /forget makes every session opened so far unknown (404),
# as a restart would; GET /stats says how many were opened.
SESSIONS = {"opened": 0, "forgotten": 0}
LEGACY_INITIALIZE = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"tools": {}},
    "serverInfo": {"name": "hostile", "version": "1.0.0"},
}


def _result(request_id: Any, result: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"resultType": "complete", **result}}).encode()


async def _call(scope: Any, receive: Any, send: Any, request: dict[str, Any]) -> None:
    name = request["params"]["name"]
    request_id = request["id"]
    headers = {key.decode().lower(): value.decode() for key, value in scope["headers"]}
    if name == "fine_call":
        shown = {key: headers[key] for key in ("x-agent-depth", "x-conversation-id", "authorization") if key in headers}
        text = json.dumps({"arguments": request["params"].get("arguments"), "headers": shown})
        await _send(send, 200, _result(request_id, {"content": [{"type": "text", "text": text}]}))
    elif name == "hang":
        while (await receive())["type"] != "http.disconnect":
            pass
    elif name == "oversized":
        await _send(send, 200, _result(request_id, {"content": [{"type": "text", "text": "x" * (2 * 1024 * 1024)}]}))
    elif name == "error5xx":
        await _send(send, 502, b"<html>Bad Gateway</html>", b"text/html")
    elif name == "closed":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b'event: message\ndata: {"jsonrpc"', "more_body": True})
        raise RuntimeError("the connection is closed mid-stream")
    elif name == "malformed":
        await _send(send, 200, b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() + b',"result":{"content":[}')
    elif name == "is_error":
        text = "Ticket 12 is locked.\x1b[31m" + "y" * 5000
        await _send(send, 200, _result(request_id, {"content": [{"type": "text", "text": text}], "isError": True}))
    elif name == "deep_result":
        body = _result(request_id, {"content": [], "structuredContent": {"x": "DEEP"}}).decode()
        await _send(send, 200, body.replace('"DEEP"', deep(1000)).encode())
    elif name == "unknown_content":
        await _send(send, 200, _result(request_id, {"content": [{"type": "hologram", "data": "?"}]}))
    elif name == "bad_output":
        await _send(send, 200, _result(request_id, {"content": [], "structuredContent": {"n": "seven"}}))
    elif name in ODD_ANSWERS:
        await ODD_ANSWERS[name](scope, receive, send, request_id)
    elif name == "good_output":
        await _send(
            send, 200, _result(request_id, {"content": [{"type": "text", "text": "{}"}], "structuredContent": {"n": 7}})
        )
    else:
        error = {"code": -32602, "message": f"Unknown tool: {name}"}
        await _send(send, 200, json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode())


async def _events(send: Any, *events: bytes) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    for event in events:
        await send({"type": "http.response.body", "body": event, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


def _event(message: dict[str, Any], kind: bytes = b"message") -> bytes:
    return b"event: " + kind + b"\ndata: " + json.dumps(message).encode() + b"\n\n"


def _text(request_id: Any, text: str, **extra: Any) -> bytes:
    return _result(request_id, {"content": [{"type": "text", "text": text}], **extra})


ODD_ANSWERS: dict[str, Any] = {
    "sse_answer": lambda scope, receive, send, request_id: _events(
        send,
        _event({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}}),
        _event({"jsonrpc": "2.0", "id": 99, "result": {"resultType": "complete", "content": []}}, b"other"),
        b"event: message\ndata:\n\n",
        _event(json.loads(_text(request_id, "after the notes"))),
    ),
    "sse_no_answer": lambda scope, receive, send, request_id: _events(
        send, _event({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}})
    ),
    "sse_bad_event": lambda scope, receive, send, request_id: _events(send, b"event: message\ndata: {nope\n\n"),
    "other_id": lambda scope, receive, send, request_id: _send(send, 200, _text(f"x{request_id}", "not yours")),
    "input_required": lambda scope, receive, send, request_id: _send(
        send,
        200,
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "result": {
                    "resultType": "input_required",
                    "inputRequests": {"q": {"method": "elicitation/create", "params": {"message": "?"}}},
                },
            }
        ).encode(),
    ),
    "unauthorized": lambda scope, receive, send, request_id: _send(send, 401, b"{}", www_authenticate=b"Bearer"),
    "json_error_404": lambda scope, receive, send, request_id: _send(
        send, 404, json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "no"}}).encode()
    ),
    "redirect_same": lambda scope, receive, send, request_id: (
        _send(send, 200, _text(request_id, "redirected"))
        if scope["path"].endswith("/")
        else _send(send, 307, b"", b"text/plain", location=b"/mcp/calls/")
    ),
    "redirect_away": lambda scope, receive, send, request_id: _send(
        send, 302, b"", b"text/plain", location=b"http://elsewhere.invalid/mcp"
    ),
    "html": lambda scope, receive, send, request_id: _send(send, 200, b"<html>hello</html>", b"text/html"),
    "accepted": lambda scope, receive, send, request_id: _send(send, 202, b"", b"text/plain"),
    "negative_ttl": lambda scope, receive, send, request_id: _send(send, 200, _text(request_id, "ttl", ttlMs=-5)),
    "not_jsonrpc": lambda scope, receive, send, request_id: _send(send, 200, b'{"jsonrpc": "1.0", "id": 1}'),
    "structured_list": lambda scope, receive, send, request_id: _send(
        send, 200, _result(request_id, {"content": [], "structuredContent": [1, 2]})
    ),
    "empty": lambda scope, receive, send, request_id: _send(send, 200, b""),
}


def _page(case: str, cursor: str | None) -> str:
    if case == "paged":
        if cursor is None:
            return json.dumps({"tools": [tool("first")], "nextCursor": "page-2"})
        return json.dumps({"tools": [tool("second"), tool("FIRST")]})
    body = json.dumps({"tools": LISTINGS[case]})
    return body.replace('"DEEP"', deep(1000))


async def _send(send: Any, status: int, body: bytes, content_type: bytes = b"application/json", **extra: bytes) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    headers += [(name.replace("_", "-").encode(), value) for name, value in extra.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await receive()  # startup
        await send({"type": "lifespan.startup.complete"})
        await receive()  # shutdown
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["path"] == "/":
        await _send(send, 200, b"hostile upstream", b"text/plain")
        return
    if scope["path"] == "/.well-known/mcp/server-card":
        host = dict(scope["headers"]).get(b"host", b"").decode()
        card = {
            "$schema": "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json",
            "name": "io.example/Ticket Desk!!",
            "version": "1.0.0",
            "remotes": [
                {"type": "sse", "url": "http://elsewhere.invalid/sse"},
                {
                    "type": "streamable-http",
                    "url": f"http://{host}/mcp/listing",
                    "supportedProtocolVersions": ["2025-11-25"],
                },
            ],
        }
        await _send(send, 200, json.dumps(card).encode())
        return
    if scope["path"] == "/big-card":
        await _send(send, 200, b'{"name": "' + b"x" * (300 * 1024) + b'"}')
        return
    if scope["path"] == "/stats":
        await _send(send, 200, json.dumps(SESSIONS).encode())
        return
    if scope["path"] == "/forget":
        SESSIONS["forgotten"] = SESSIONS["opened"]
        await _send(send, 200, b"forgotten", b"text/plain")
        return
    if scope["method"] != "POST":
        await _send(send, 405, b"", b"text/plain")  # no standing stream
        return
    session = dict(scope["headers"]).get(b"mcp-session-id", b"").decode()
    if session.startswith("s-") and int(session[2:]) <= SESSIONS["forgotten"]:
        await _send(send, 404, b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Session not found"}}')
        return
    case = scope["path"].removeprefix("/mcp/")
    request = json.loads(await read_body(receive) or b"{}")
    if "id" not in request:
        await _send(send, 202, b"", b"text/plain")  # a notification: accepted
        return
    if request.get("method") == "initialize":
        SESSIONS["opened"] += 1
        answer = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": LEGACY_INITIALIZE}).encode()
        await _send(send, 200, answer, mcp_session_id=f"s-{SESSIONS['opened']}".encode())
        return
    if case in ("calls", "calls/") and request.get("method") == "tools/call":
        await _call(scope, receive, send, request)
        return
    if request.get("method") != "tools/list":
        await _send(
            send,
            200,
            json.dumps(
                {"jsonrpc": "2.0", "id": request.get("id"), "error": {"code": -32601, "message": "no"}}
            ).encode(),
        )
        return
    head = '{"jsonrpc":"2.0","id":' + json.dumps(request["id"]) + ',"result":'
    if case == "malformed":
        await _send(send, 200, (head + '{"tools": [}').encode())
    elif case == "error5xx":
        await _send(send, 503, b"<html>Service Unavailable</html>", b"text/html")
    elif case == "hang":
        while (await receive())["type"] != "http.disconnect":
            pass  # never answers; ends when the client gives up
    elif case == "oversized":
        await _send(
            send, 200, (head + json.dumps({"tools": [tool("fine")], "padding": "x" * (5 * 1024 * 1024)}) + "}").encode()
        )
    elif case == "compressed":
        await _send(send, 200, gzip.compress((head + _page("listing", None) + "}").encode()), content_encoding=b"gzip")
    elif case == "closed":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send(
            {"type": "http.response.body", "body": b"event: message\ndata: " + head.encode()[:20], "more_body": True}
        )
        raise RuntimeError("the connection is closed mid-stream")
    elif case == "other-id":
        # The answer carries its id as a string: not the answer to our request, so never read as one.
        wrong = '{"jsonrpc":"2.0","id":' + json.dumps(str(request["id"])) + ',"result":'
        await _send(send, 200, (wrong + _page("listing", None) + "}").encode())
    elif case == "sse" or case.startswith("sse-"):
        listing = "listing" if case == "sse" else case.removeprefix("sse-")
        event = b"event: message\ndata: " + (head + _page(listing, None) + "}").encode() + b"\n\n"
        await _send(send, 200, event, b"text/event-stream")
    else:
        cursor = (request.get("params") or {}).get("cursor")
        await _send(send, 200, (head + _page(case, cursor) + "}").encode())
