"""The fast path answers stateless 2025-11-25 exchanges exactly as the SDK's stateless transport does.

The same differential test as for 2026-07-28 (`test_fastpath`): a generated corpus of valid and invalid
`initialize`, `notifications/initialized`, `ping`, `tools/list` and `tools/call` requests goes to two live servers
on one database, with and without the fast path, in SSE and in JSON mode, and every answer must match: status,
content type, and every message (log messages included) with its id, error and result.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from . import test_fastpath
from .live import LIVE_SETTINGS, LiveServer, run_server
from .test_fastpath import (
    GOOD_ARGUMENTS,
    HEADERS,
    answer,
    answered_plainly,
    events,
    fast_answers,
    picked_headers,
    picked_message,
)

# The same four servers as the 2026-07-28 test's, started again for this module.
fast, fast_json = test_fastpath.fast, test_fastpath.fast_json
through_sdk, through_sdk_json = test_fastpath.through_sdk, test_fastpath.through_sdk_json

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
CORPUS_SIZE = 2000
METHODS = ["initialize", "notifications/initialized", "ping", "tools/list", "tools/call", "tools/call"]
LEGACY_ARGUMENTS = {**GOOD_ARGUMENTS, "toolbox.chatty": {}, "toolbox.greet": {}}
CLIENT_INFO = {"name": "corpus", "version": "1"}


def _choices(key: str, method: str) -> list[Any]:
    """The values each part of a request may take; the first is the valid one."""
    notification = method == "notifications/initialized"
    others = [name for name in dict.fromkeys(METHODS) if name != method]
    return {
        "content_type": ["application/json"] * 6
        + ["application/json; charset=utf-8", "text/plain", None, "application/json, text/plain"],
        "accept": ["application/json, text/event-stream"] * 6 + ["application/json", "text/event-stream", "*/*", None],
        # A client sends no version header with `initialize`; after it, the version it negotiated.
        "version": ([None] if method == "initialize" else [LEGACY]) * 7 + [LEGACY, None, "2025-06-18", MODERN],
        "session": [None] * 8 + ["a-session-id"],
        "method_header": [None] * 9 + [method],
        "depth": [None] * 8 + ["2", "x", "99"],
        "id": (["MISSING"] * 4 + [1] if notification else [1, 2, "abc", "ünï", 0, -5, 2**70])
        + [1.5, None, True, "MISSING" if not notification else 1],
        "jsonrpc": ["2.0"] * 8 + ["1.0", "MISSING"],
        "method": [method] * 10 + [*others, "resources/list", "logging/setLevel"],
        "params": ["PARAMS"] * 4 + [None, {}, [], "text"] + _extra_params(method),
        "meta": [None] * 6
        + [
            {},
            {"progressToken": 7},
            {"io.modelcontextprotocol/protocolVersion": MODERN},
            {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
            {"extra": [1, 2]},
            "all",
        ],
        "shape": ["object"] * 12 + ["batch", "not json", "empty"],
        # tools/call only
        "tool": ["library.echo"] * 4 + [name for name in LEGACY_ARGUMENTS if name != "library.echo"],
        "arguments": ["GOOD"] * 6
        + ["MISSING", None, {}, "text", {"message": 5}, {"book_id": 99999}, {"message": "x" * 1001}, {"count": -1}],
        # initialize only
        "requested": [LEGACY] * 5 + ["2025-06-18", "2024-11-05", "2026-07-28", "1999-01-01", 5, "MISSING"],
        "capabilities": [{}] * 5 + [{"elicitation": {}, "sampling": {}}, "MISSING", "all"],
        "client_info": [CLIENT_INFO] * 5 + ["MISSING", {"name": 5}, {**CLIENT_INFO, "title": "Corpus"}],
    }[key]


def _extra_params(method: str) -> list[Any]:
    return {
        "tools/list": [{"cursor": "abc"}, {"cursor": None}, {"unexpected": True}],
        "tools/call": [{"task": {}}, {"requestState": "abc"}, {"unexpected": 1}],
        "initialize": [{"unexpected": 1}],
    }.get(method, [{"unexpected": 1}])


COMMON = ["content_type", "accept", "version", "session", "method_header", "depth", "id", "jsonrpc", "method"]
KEYS = {
    "initialize": [*COMMON, "params", "meta", "shape", "requested", "capabilities", "client_info"],
    "notifications/initialized": [*COMMON, "params", "meta", "shape"],
    "ping": [*COMMON, "params", "meta", "shape"],
    "tools/list": [*COMMON, "params", "meta", "shape"],
    "tools/call": [*COMMON, "params", "meta", "shape", "tool", "arguments"],
}


def generated_requests(count: int, seed: int = 20261202) -> Iterator[tuple[dict[str, str], bytes]]:
    """A valid request of a stateless exchange with none, one, two or many of its parts changed."""
    rng = random.Random(seed)
    for _ in range(count):
        method = rng.choice(METHODS)
        keys = KEYS[method]
        pick = {key: _choices(key, method)[0] for key in keys}
        for key in rng.sample(keys, rng.choice([0, 0, 1, 1, 1, 2, 2, len(keys)])):
            pick[key] = rng.choice(_choices(key, method))
        if method == "tools/call" and rng.random() < 0.5:
            pick["tool"] = rng.choice(_choices("tool", method))  # every tool, valid or not, in many requests
        yield _request(method, pick)


def _request(method: str, pick: dict[str, Any]) -> tuple[dict[str, str], bytes]:
    headers = picked_headers(pick, {**HEADERS, "Mcp-Session-Id": "session"})
    params = pick["params"]
    if isinstance(params, dict) or params == "PARAMS":
        params = {**_valid_params(method, pick), **(params if isinstance(params, dict) else {})}
        if pick["meta"] is not None:
            params["_meta"] = pick["meta"]
    message = picked_message(pick, params)
    if pick["shape"] == "not json":
        return headers, b'{"jsonrpc": "2.0", "id": 1,'
    return headers, json.dumps({"object": message, "batch": [message], "empty": {}}[pick["shape"]]).encode()


def _valid_params(method: str, pick: dict[str, Any]) -> dict[str, Any]:
    if method == "tools/call":
        params: dict[str, Any] = {"name": pick["tool"]}
        arguments = LEGACY_ARGUMENTS[pick["tool"]] if pick["arguments"] == "GOOD" else pick["arguments"]
        if arguments != "MISSING":
            params["arguments"] = arguments
        return params
    if method == "initialize":
        parts = {"protocolVersion": "requested", "capabilities": "capabilities", "clientInfo": "client_info"}
        return {name: pick[key] for name, key in parts.items() if pick[key] != "MISSING"}
    return {}


def assert_same_answers(fast: LiveServer, through_sdk: LiveServer, key: str, size: int) -> None:
    served_plainly = 0
    before = fast_answers(fast)
    with httpx2.Client(timeout=10) as client:
        for index, (headers, body) in enumerate(generated_requests(size)):
            expected = answer(client, through_sdk, key, headers, body, duplicate=False)
            got = answer(client, fast, key, headers, body, duplicate=False)
            assert got == expected, f"request {index}: {headers} {body!r}"
            served_plainly += answered_plainly(expected)
    # The corpus exercises both sides: plenty of requests answered, plenty of refusals; and a good share of
    # the calls were answered by the fast path itself.
    assert size * 0.2 < served_plainly < size * 0.8
    assert fast_answers(fast) - before > size * 0.05


def test_stateless_legacy_exchanges_are_answered_exactly_as_the_sdk_answers_them(
    fast: LiveServer, through_sdk: LiveServer, key: str
) -> None:
    assert_same_answers(fast, through_sdk, key, test_fastpath.differential_size(CORPUS_SIZE))


def test_stateless_legacy_exchanges_are_answered_exactly_as_the_sdk_answers_them_in_json_mode(
    fast_json: LiveServer, through_sdk_json: LiveServer, key: str
) -> None:
    assert_same_answers(fast_json, through_sdk_json, key, test_fastpath.differential_size(CORPUS_SIZE // 2))


def test_a_legacy_call_streams_its_log_messages_before_its_answer(fast: LiveServer, key: str) -> None:
    headers = {
        "Authorization": f"Bearer {key}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": LEGACY,
    }
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "toolbox.chatty", "arguments": {}}}
    before = fast_answers(fast)
    response = httpx2.post(fast.mcp_url, json=body, headers=headers)
    messages = [json.loads(data) for data in events(response.text)]
    assert [message.get("method") for message in messages] == ["notifications/message"] * 2 + [None]
    assert [message["params"]["level"] for message in messages[:2]] == ["info", "debug"]
    assert messages[1]["params"]["data"] == {"step": 1, "of": 2}
    assert messages[2]["id"] == 7 and messages[2]["result"]["structuredContent"] == {"result": "done"}
    assert fast_answers(fast) == before + 1  # and it was the fast path that answered


def test_the_handshake_is_answered_from_what_the_sdk_said_first(fast: LiveServer, key: str) -> None:
    """The first `initialize` is the SDK's; later ones are its kept answer, each with its own id, and a request
    for another version gets that version's answer, not the kept one."""
    headers = {
        "Authorization": f"Bearer {key}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }

    def initialize(request_id: int, version: str) -> dict[str, Any]:
        params = {"protocolVersion": version, "capabilities": {}, "clientInfo": CLIENT_INFO}
        body = {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}
        (data,) = events(httpx2.post(fast.mcp_url, json=body, headers=headers).text)
        return dict(json.loads(data))

    first, second = initialize(1, LEGACY), initialize(2, LEGACY)
    assert first["result"] == second["result"] and (first["id"], second["id"]) == (1, 2)
    assert first["result"]["protocolVersion"] == LEGACY and first["result"]["serverInfo"]["name"]
    assert initialize(3, "2025-06-18")["result"]["protocolVersion"] == "2025-06-18"
    assert initialize(4, "1999-01-01")["result"]["protocolVersion"] == LEGACY


def test_stateful_sessions_stay_with_the_sdk(data: Path, key: str) -> None:
    """With LEGACY_SESSIONS on, `initialize` opens a session (its id in the answer's headers): the fast path
    never answers any of it."""
    with run_server(
        data, **LIVE_SETTINGS, MCP_TEST_FAST_PATH="1", MCP_TEST_LEGACY_SESSIONS="1", MCP_EXPOSE_LOG_LEVEL="DEBUG"
    ) as server:
        headers = {
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": CLIENT_INFO}
        opened = httpx2.post(
            server.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}, headers=headers
        )
        session = opened.headers["mcp-session-id"]
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "library.echo"}}
        call["params"]["arguments"] = {"message": "hi"}  # type: ignore[index]
        answered = httpx2.post(
            server.mcp_url,
            json=call,
            headers={**headers, "MCP-Protocol-Version": LEGACY, "Mcp-Session-Id": session},
        )
        (data_line,) = [json.loads(item) for item in events(answered.text) if '"id":2' in item.replace(" ", "")]
        assert data_line["result"]["structuredContent"]["message"] == "hi"
        assert fast_answers(server) == 0


@pytest.mark.anyio
async def test_the_corpus_takes_the_fast_path_often_and_not_always() -> None:
    from mcp_expose.serving import fastpath_legacy

    admitted = 0
    for headers, body in generated_requests(CORPUS_SIZE):
        lowered = {name.lower(): value for name, value in headers.items()}
        scope = {"type": "http", "method": "POST", "path": "/mcp", "query_string": b""}
        scope["headers"] = [(name.encode(), value.encode()) for name, value in lowered.items()]
        if fastpath_legacy.is_legacy_candidate("POST", lowered, sessions=False):
            admitted += await fastpath_legacy.plain_legacy_request(scope, lowered, body, False) is not None
    assert CORPUS_SIZE * 0.15 < admitted < CORPUS_SIZE * 0.8


@pytest.mark.anyio
async def test_a_slow_legacy_call_is_pinged_and_a_gone_client_cancels_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stream opens at once and is pinged every interval until the answer; a disconnect cancels the call
    and nothing more is written."""
    import anyio

    from mcp_expose.serving import fastpath_legacy, fastpath_replies

    monkeypatch.setattr(fastpath_legacy, "LEGACY_PING_INTERVAL", 0.01)
    monkeypatch.setattr(fastpath_replies, "WATCH_AFTER", 0.0)
    sent: list[dict[str, Any]] = []
    pinged_twice = anyio.Event()

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if sum(message.get("body", b"").startswith(b": ping") for message in sent) >= 2:
            pinged_twice.set()

    never = anyio.Event()

    async def stays(*_: Any) -> dict[str, Any]:
        await never.wait()
        return {"type": "http.disconnect"}

    async def slow_call(log: Any) -> tuple[int, bytes]:
        await log("info", "working")
        await pinged_twice.wait()
        return 200, b'{"jsonrpc":"2.0","id":1,"result":{}}'

    with anyio.fail_after(30):
        await fastpath_legacy.answer_as_event_stream(slow_call, stays, send)
    assert sent[0]["status"] == 200 and (b"content-type", b"text/event-stream") in sent[0]["headers"]
    bodies = [message["body"] for message in sent[1:]]
    assert bodies[0].startswith(b'event: message\r\ndata: {"jsonrpc":"2.0","method":"notifications/message"')
    assert sum(body.startswith(b": ping - ") for body in bodies) >= 2
    assert bodies[-1] == b'event: message\r\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\r\n\r\n'
    assert sent[-1]["more_body"] is False and all(message.get("more_body") for message in sent[1:-1])

    sent.clear()
    cancelled = anyio.Event()
    started = anyio.Event()

    async def goes_away(*_: Any) -> dict[str, Any]:
        await started.wait()
        return {"type": "http.disconnect"}

    async def abandoned_call(log: Any) -> tuple[int, bytes]:
        started.set()
        try:
            await never.wait()
        finally:
            cancelled.set()
        raise AssertionError("not reached")

    with anyio.fail_after(30):
        await fastpath_legacy.answer_as_event_stream(abandoned_call, goes_away, send)
    assert cancelled.is_set()
    assert not any(message.get("more_body") is False for message in sent)  # no answer, and the stream not ended
