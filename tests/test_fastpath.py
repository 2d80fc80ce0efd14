"""The fast path for 2026-07-28 `tools/list` and `tools/call` answers exactly as the SDK does.

A differential test: the same generated corpus of valid and invalid requests goes to two live servers on
one database, one with the fast path and one without, and every answer must match (status, content type,
JSON-RPC error code, id and result). Plus the listing counter the fast path keeps in memory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import random
import signal
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx2
import pytest

from mcp_expose.calls.listing_count import ListingTally
from mcp_expose.operator.usage_report import list_calls

from .live import LIVE_SETTINGS, LiveServer, prepare_demo, run_server, run_snippet

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
CORPUS_SIZE = 2500
# Over HTTP, the differential tests send the corpus in full where MCP_TEST_FULL_CORPUS=1 (scripts/test sets it on
# its first leg, so every run of the test command sends all of it once), and otherwise a fixed slice: the first
# quarter of the same seeded corpus, the same requests at every run. The in-process checks always take it whole.
FULL_CORPUS = os.environ.get("MCP_TEST_FULL_CORPUS") == "1"


def differential_size(full: int) -> int:
    """How many requests of a corpus of `full` a differential test sends over HTTP in this run."""
    return full if FULL_CORPUS else full // 4


@pytest.fixture(scope="module")
def fast(data: Path) -> Iterator[LiveServer]:
    # At DEBUG the fast path logs each call it answers itself, so tests can tell who answered.
    with run_server(data, **LIVE_SETTINGS, MCP_TEST_FAST_PATH="1", MCP_EXPOSE_LOG_LEVEL="DEBUG") as live:
        yield live


@pytest.fixture(scope="module")
def through_sdk(data: Path) -> Iterator[LiveServer]:
    with run_server(data, **LIVE_SETTINGS, MCP_TEST_FAST_PATH="0") as live:
        yield live


GOOD_ARGUMENTS = {
    "library.echo": {"message": "hi"},
    "library.get_book": {"book_id": 1},
    "toolbox.header_names": {},
    "toolbox.chain_info": {},
    "toolbox.greet": {},
    "library.whoami": {},
    "toolbox.big": {"count": 3},
    "toolbox.sdk_caller": {},
    "toolbox.colliding_keys": {},
    "no.such_tool": {},
}


def _choices(key: str, method: str) -> list[Any]:
    """The values each part of a request may take; the first is the valid one."""
    meta_variants: list[Any] = [
        META,
        META,
        META,
        {**META, "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}},
        {**META, "io.modelcontextprotocol/clientInfo": {"name": 5}},
        {"io.modelcontextprotocol/protocolVersion": MODERN},
        {"io.modelcontextprotocol/clientCapabilities": {}},
        {**META, "io.modelcontextprotocol/protocolVersion": "2025-11-25"},
        {**META, "io.modelcontextprotocol/clientCapabilities": "all"},
        {**META, "io.modelcontextprotocol/clientCapabilities": {"sampling": {}, "elicitation": {"form": {}}}},
        {**META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}},
        {**META, "progressToken": 7},
        {**META, "io.modelcontextprotocol/logLevel": "info"},
        {**META, "io.modelcontextprotocol/logLevel": "loud"},
        {**META, "extra": [1, 2]},
    ]
    other = "tools/call" if method == "tools/list" else "tools/list"
    return {
        "content_type": ["application/json"] * 6 + ["application/json; charset=utf-8", "text/plain", None],
        "accept": ["application/json, text/event-stream"] * 6
        + ["application/json", "text/event-stream", "*/*", None, "application/json;q=0.9, text/event-stream"],
        "version": [MODERN] * 8 + ["2025-11-25", "2099-01-01", None],
        "method_header": [method] * 8 + [other, method.upper(), None],
        "duplicate_method": [False] * 9 + [True],
        "depth": [None] * 8 + ["2", "x", "99"],
        "param_header": [None] * 9 + ["Mcp-Param-Region"],
        "id": [1, 2, "abc", "ünï", 0, -5, 2**70, 1.5, None, True, "MISSING"],
        "jsonrpc": ["2.0"] * 8 + ["1.0", "MISSING"],
        "method": [method] * 8 + [other, "resources/list"],
        "params": ["META"] * 3
        + [None, {}, [], "text"]
        + (
            [{"cursor": "abc"}, {"cursor": None}, {"cursor": 5}, {"unexpected": True}]
            if method == "tools/list"
            else [
                {"requestState": "abc"},
                {"requestState": None},
                {"inputResponses": {}},
                {"task": {}},
                {"unexpected": 1},
            ]
        ),
        "meta": meta_variants,
        "shape": ["object"] * 12 + ["batch", "not json", "notification", "empty"],
        # tools/call only
        "tool": ["library.echo"] * 4 + [name for name in GOOD_ARGUMENTS if name != "library.echo"],
        "arguments": ["GOOD"] * 6
        + ["MISSING", None, {}, "text", {"message": 5}, {"book_id": 99999}, {"message": "x" * 1001}, {"count": -1}],
        "name_header": ["SAME"] * 8 + [None, "library.get_book", "Library.echo"],
    }[key]


KEYS = {
    "tools/list": [
        "content_type",
        "accept",
        "version",
        "method_header",
        "duplicate_method",
        "depth",
        "param_header",
        "id",
        "jsonrpc",
        "method",
        "params",
        "meta",
        "shape",
    ],
}
KEYS["tools/call"] = [*KEYS["tools/list"], "tool", "arguments", "name_header"]


def generated_requests(
    count: int, method: str = "tools/list", seed: int = 20261130
) -> Iterator[tuple[dict[str, str], bytes]]:
    """A valid request with none, one, two or many of its parts changed, each to a value from its list."""
    rng = random.Random(seed)
    keys = KEYS[method]
    valid = {key: _choices(key, method)[0] for key in keys}
    for _ in range(count):
        pick = dict(valid)
        changed = rng.choice([0, 0, 1, 1, 1, 2, 2, len(keys)])
        for key in rng.sample(keys, changed):
            pick[key] = rng.choice(_choices(key, method))
        if method == "tools/call" and rng.random() < 0.5:
            pick["tool"] = rng.choice(_choices("tool", method))  # every tool, valid or not, in many requests
        yield _request(pick)


def picked_headers(pick: dict[str, Any], names: dict[str, str]) -> dict[str, str]:
    """The headers a generated request carries: each header name's picked value, unless it is None."""
    return {name: pick[key] for name, key in names.items() if pick[key] is not None}


def picked_message(pick: dict[str, Any], params: Any) -> dict[str, Any]:
    """The JSON-RPC message a generated request carries, with its picked envelope members (or without them)."""
    message: dict[str, Any] = {"method": pick["method"]}
    if pick["jsonrpc"] != "MISSING":
        message["jsonrpc"] = pick["jsonrpc"]
    if pick["id"] != "MISSING":
        message["id"] = pick["id"]
    if params is not None:
        message["params"] = params
    return message


HEADERS = {
    "Content-Type": "content_type",
    "Accept": "accept",
    "MCP-Protocol-Version": "version",
    "Mcp-Method": "method_header",
    "X-Agent-Depth": "depth",
}


def _request(pick: dict[str, Any]) -> tuple[dict[str, str], bytes]:
    headers = picked_headers(pick, HEADERS)
    if pick["param_header"]:
        headers[pick["param_header"]] = "eu"
    params = pick["params"]
    if isinstance(params, dict) or params == "META":
        params = {"_meta": pick["meta"], **(params if isinstance(params, dict) else {})}
        if "tool" in pick:
            params["name"] = pick["tool"]
            arguments = GOOD_ARGUMENTS[pick["tool"]] if pick["arguments"] == "GOOD" else pick["arguments"]
            if arguments != "MISSING":
                params["arguments"] = arguments
    if "tool" in pick and pick["name_header"] is not None:
        headers["Mcp-Name"] = pick["tool"] if pick["name_header"] == "SAME" else pick["name_header"]
    message = picked_message(pick, params)
    body = (
        json.dumps(
            {
                "object": message,
                "batch": [message],
                "notification": {k: v for k, v in message.items() if k != "id"},
                "empty": {},
            }.get(pick["shape"], message)
        ).encode()
        if pick["shape"] != "not json"
        else b'{"jsonrpc": "2.0", "id": 1,'
    )
    return headers, body


def _masked(value: Any) -> Any:
    """The answer with what differs on every call by design replaced: sealed request state, incident ids."""
    if isinstance(value, dict):
        return {
            key: "<varies>" if key in ("requestState", "incident") and isinstance(item, str) else _masked(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_masked(item) for item in value]
    if isinstance(value, str) and '"incident"' in value:
        return _masked(json.loads(value)) if value.startswith("{") else value
    return value


def answer(
    client: httpx2.Client, server: LiveServer, key: str, headers: dict[str, str], body: bytes, duplicate: bool
) -> tuple[Any, ...]:
    sent = [("Authorization", f"Bearer {key}"), *headers.items()]
    if duplicate and "Mcp-Method" in headers:
        sent.append(("Mcp-Method", headers["Mcp-Method"]))
    response = client.post(server.mcp_url, content=body, headers=sent)
    kind = response.headers.get("content-type", "").split(";")[0]
    if kind == "application/json" and response.content:
        return (response.status_code, kind, *_parts(response.json()))
    if kind == "text/event-stream":  # every message on the stream, in order (comments, such as pings, aside)
        return response.status_code, kind, [_parts(json.loads(data)) for data in events(response.text)]
    return response.status_code, kind, response.text


def _parts(message: Any) -> tuple[Any, ...]:
    """A JSON-RPC message's id, error and result, or a notification's method and params, masked."""
    if not isinstance(message, dict):
        return (message,)
    if "method" in message:
        return message["method"], _masked(message.get("params"))
    return message.get("id"), _masked(message.get("error")), _masked(message.get("result"))


def events(stream: str) -> list[str]:
    """The data of each event of an event stream."""
    found = []
    for event in stream.replace("\r\n", "\n").split("\n\n"):
        data = [line.removeprefix("data:").removeprefix(" ") for line in event.split("\n") if line.startswith("data:")]
        if data:
            found.append("\n".join(data))
    return found


@pytest.fixture(scope="module")
def fast_json(data: Path) -> Iterator[LiveServer]:
    with run_server(
        data, **LIVE_SETTINGS, MCP_TEST_FAST_PATH="1", MCP_TEST_JSON_RESPONSE="1", MCP_EXPOSE_LOG_LEVEL="DEBUG"
    ) as live:
        yield live


@pytest.fixture(scope="module")
def through_sdk_json(data: Path) -> Iterator[LiveServer]:
    with run_server(data, **LIVE_SETTINGS, MCP_TEST_FAST_PATH="0", MCP_TEST_JSON_RESPONSE="1") as live:
        yield live


@pytest.mark.parametrize("method", ["tools/list", "tools/call"])
def test_the_fast_path_answers_exactly_as_the_sdk(
    fast: LiveServer, through_sdk: LiveServer, key: str, method: str
) -> None:
    assert_same_answers(fast, through_sdk, key, method, differential_size(CORPUS_SIZE))


@pytest.mark.parametrize("method", ["tools/list", "tools/call"])
def test_the_fast_path_answers_exactly_as_the_sdk_in_json_mode(
    fast_json: LiveServer, through_sdk_json: LiveServer, key: str, method: str
) -> None:
    assert_same_answers(fast_json, through_sdk_json, key, method, differential_size(CORPUS_SIZE // 4))


def assert_same_answers(fast: LiveServer, through_sdk: LiveServer, key: str, method: str, size: int) -> None:
    served_plainly = 0
    answered_fast = fast_answers(fast)
    with httpx2.Client(timeout=10) as client:
        for index, (headers, body) in enumerate(generated_requests(size, method)):
            duplicate = index % 10 == 0
            expected = answer(client, through_sdk, key, headers, body, duplicate)
            got = answer(client, fast, key, headers, body, duplicate)
            assert got == expected, f"request {index}: {headers} {body!r}"
            served_plainly += answered_plainly(expected)
    # The corpus exercises both sides: plenty of requests answered, plenty of refusals.
    assert size * 0.2 < served_plainly < size * 0.8
    if method == "tools/call":  # and a good share of the calls were answered by the fast path itself
        assert fast_answers(fast) - answered_fast > size * 0.1


def answered_plainly(answer: tuple[Any, ...]) -> bool:
    """A 200 carrying a result (in JSON, or as the last message of a stream), not an error."""
    if answer[0] != 200:
        return False
    parts = answer[2][-1] if answer[1] == "text/event-stream" and answer[2] else answer[2:]
    return len(parts) == 3 and parts[1] is None and parts[2] is not None


def fast_answers(server: LiveServer) -> int:
    return server.log().count("on the fast path")  # logged before each such answer is sent


def test_the_fast_path_serves_what_the_caller_may_see(fast: LiveServer, key: str, data: Path) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}})
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/list",
    }
    names = []
    for credential in (key, None):
        auth = {"Authorization": f"Bearer {credential}"} if credential else {}
        for _ in range(2):  # the second answer comes from the encoded listing
            response = httpx2.post(fast.mcp_url, content=body, headers={**headers, **auth})
            names.append(
                response.status_code
                if response.status_code != 200
                else sorted(tool["name"] for tool in response.json()["result"]["tools"])
            )
    assert names[0] == names[1] and "library.borrow_book" in names[0]
    assert names[2] == names[3] == 401  # no credential, no listing: authentication comes first


def test_callers_who_see_different_tools_get_different_listings(fast: LiveServer, key: str, data: Path) -> None:
    code = (
        "from mcp_expose.models import ApiKey; from django.contrib.auth.models import User; "
        "admin = User.objects.get(username='admin'); "
        "print(ApiKey.create_key(user=admin, name='reader', scopes='library:read')[1], "
        "ApiKey.create_key(user=admin, name='reader2', scopes='library:read unused:scope')[1])"
    )
    reader, reader_with_extra = run_snippet(data, code).stdout.split()[-2:]
    body = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {"_meta": META}})
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/list",
    }

    def listing(credential: str) -> list[str]:
        response = httpx2.post(fast.mcp_url, content=body, headers={**headers, "Authorization": f"Bearer {credential}"})
        return sorted(tool["name"] for tool in response.json()["result"]["tools"])

    admin_sees, reader_sees = listing(key), listing(reader)
    assert listing(key) == admin_sees and listing(reader) == reader_sees  # again, from the encoded listings
    assert "library.borrow_book" in admin_sees and "library.borrow_book" not in reader_sees
    assert "library.search_books" in reader_sees
    # A scope no tool asks for changes nothing the caller sees.
    assert listing(reader_with_extra) == reader_sees


def test_callers_differing_only_in_what_no_tool_asks_share_one_encoded_listing(registry: Any) -> None:
    import mcp_expose
    from mcp_expose.access.policy import listing_key
    from mcp_expose.catalog.compiled import compile_catalog
    from mcp_expose.core.principal import Principal

    def read() -> None:
        return None

    mcp_expose.tool(registry=registry, key="t.read", scopes=["shop:read"], permissions=["shop.view_order"])(read)
    catalog = compile_catalog(registry, {}, "r")

    def caller(scopes: set[str], permissions: set[str], client_id: str | None = None) -> Principal:
        return Principal(
            user=None, scopes=frozenset(scopes), method="oauth", permissions=frozenset(permissions), client_id=client_id
        )

    base = listing_key(caller({"shop:read"}, {"shop.view_order"}), catalog)
    assert (
        listing_key(caller({"shop:read", "mail:send"}, {"shop.view_order", "auth.add_user"}, "app-1"), catalog) == base
    )
    assert listing_key(caller(set(), {"shop.view_order"}), catalog) != base
    assert listing_key(caller({"shop:read"}, set()), catalog) != base


async def counted() -> int:
    """Listings counted in the last two hours, read from an async test."""
    from asgiref.sync import sync_to_async

    return await sync_to_async(list_calls)(timedelta(hours=2))


@pytest.mark.anyio
async def test_a_failed_flush_keeps_its_count_and_an_idle_tally_flushes_by_itself(
    transactional_db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    import anyio

    from mcp_expose.calls import listing_count

    tally = ListingTally(flush_seconds=0.05)
    before = await counted()
    real = listing_count.count_list_call
    written = threading.Event()

    def database_down(count: int = 1, hour: Any = None) -> None:
        raise ConnectionError("database unavailable")

    def write(count: int = 1, hour: Any = None) -> None:
        real(count, hour)
        written.set()

    monkeypatch.setattr(listing_count, "count_list_call", database_down)
    for _ in range(3):
        with contextlib.suppress(ConnectionError):
            await tally.count()
    assert tally.pending == 3 and await counted() == before
    monkeypatch.setattr(listing_count, "count_list_call", write)
    async with anyio.create_task_group() as group:
        group.start_soon(tally.keep_flushing)
        await anyio.to_thread.run_sync(written.wait)  # no listing arrives: the tally flushes on its own
        group.cancel_scope.cancel()
    assert tally.pending == 0 and await counted() == before + 3


@pytest.mark.anyio
async def test_listings_are_counted_in_memory_and_flushed(transactional_db: None) -> None:
    tally = ListingTally(flush_seconds=3600)
    before = await counted()
    for _ in range(5):
        await tally.count()
    assert await counted() == before  # not yet flushed
    await tally.flush()
    assert await counted() == before + 5
    await tally.flush()
    assert await counted() == before + 5  # nothing counted twice


@pytest.mark.anyio
async def test_a_flush_cancelled_while_it_writes_counts_once(
    transactional_db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing's task may be cancelled while its flush is being written: the write then lands all the
    same, so the tally must not take the count back to write it again."""
    import threading

    import anyio

    from mcp_expose.calls import listing_count

    tally = ListingTally(flush_seconds=3600)
    before = await counted()
    writing, release, written = threading.Event(), threading.Event(), threading.Event()
    real = listing_count.count_list_call

    def slow_write(count: int = 1, hour: Any = None) -> None:
        writing.set()
        release.wait(10)
        real(count, hour)
        written.set()

    monkeypatch.setattr(listing_count, "count_list_call", slow_write)
    for _ in range(3):
        await tally.count()
    async with anyio.create_task_group() as group:
        group.start_soon(tally.flush)
        await anyio.to_thread.run_sync(writing.wait)
        group.cancel_scope.cancel()
        release.set()
    await anyio.to_thread.run_sync(written.wait)
    assert tally.pending == 0
    await tally.flush()
    assert await counted() == before + 3


def test_the_listing_count_is_kept_when_the_cache_is_cleared(transactional_db: None) -> None:
    """A cache may evict or expire any key (the file cache culls at random past MAX_ENTRIES, and its
    read-then-write increment reset the key to the default five-minute timeout): the count is not kept there."""
    from mcp_expose.calls.listing_count import count_list_call
    from mcp_expose.core.process_cache import process_cache

    before = list_calls(timedelta(hours=2))
    count_list_call(4)
    process_cache().clear()
    assert list_calls(timedelta(hours=2)) == before + 4


def test_the_listing_count_covers_every_hour_its_window_reaches(transactional_db: None) -> None:
    from mcp_expose.calls.listing_count import count_list_call, listing_hour

    count_list_call(2)
    count_list_call(7, listing_hour() - timedelta(hours=3))
    assert list_calls(timedelta(minutes=30)) == 2  # less than an hour still reaches the current one
    assert list_calls(timedelta(hours=2)) == 2
    assert list_calls(timedelta(days=1)) == 9


def test_pruning_usage_deletes_old_listing_counts(db: None) -> None:
    from io import StringIO

    from django.core.management import call_command

    from mcp_expose.calls.listing_count import count_list_call, listing_hour

    count_list_call(2)
    count_list_call(5, listing_hour() - timedelta(days=8))
    out = StringIO()
    call_command("mcp_prune_usage", "--days", "7", stdout=out)
    assert "1 hourly listing counts" in out.getvalue()
    assert list_calls(timedelta(days=30)) == 2


@pytest.mark.parametrize("method", ["tools/list", "tools/call"])
def test_the_corpus_is_varied(method: str) -> None:
    corpus = list(itertools.islice(generated_requests(CORPUS_SIZE, method), CORPUS_SIZE))
    # A quarter are the valid listing itself; the rest differ from it in one, two or every part.
    assert len({(tuple(sorted(headers.items())), body) for headers, body in corpus}) > CORPUS_SIZE // 8


def test_every_listing_is_counted_once_whoever_answers_it(tmp_path: Path) -> None:
    """Its own database and server, so no other server's listings land in the count; stopping the server
    flushes its tally, so the count is read after that event, not after a guessed delay."""
    key = prepare_demo(tmp_path)
    body = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": META}})
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/list",
        "Authorization": f"Bearer {key}",
    }
    with run_server(tmp_path, **LIVE_SETTINGS, MCP_TEST_FAST_PATH="1") as server:
        # The first listing is the SDK's (nothing encoded yet), the other four the encoded bytes.
        for _ in range(5):
            assert httpx2.post(server.mcp_url, content=body, headers=headers).status_code == 200
    # A clean shutdown, which flushes the tally (uvicorn ends by raising the signal it handled).
    assert server.process.returncode in (0, -signal.SIGTERM), server.log()
    count = (
        "from datetime import timedelta; from mcp_expose.operator.usage_report import list_calls; "
        "print(list_calls(timedelta(hours=2)))"
    )
    assert int(run_snippet(tmp_path, count, env=LIVE_SETTINGS).stdout.split()[-1]) == 5


async def _admitted(headers: dict[str, str], body: bytes) -> bool:
    from mcp_expose.serving import fastpath_requests

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "query_string": b"",
        "headers": [(name.lower().encode(), value.encode()) for name, value in headers.items()],
    }
    lowered = {name.lower(): value for name, value in headers.items()}
    return await fastpath_requests.plain_request(scope, lowered, body, json_response=False) is not None


@pytest.mark.anyio
@pytest.mark.parametrize("method", ["tools/list", "tools/call"])
async def test_the_corpus_takes_the_fast_path_often_and_not_always(method: str) -> None:
    admitted = [await _admitted(headers, body) for headers, body in generated_requests(CORPUS_SIZE, method)]
    assert CORPUS_SIZE * 0.15 < sum(admitted) < CORPUS_SIZE * 0.8


def test_colliding_result_keys_are_refused_alike_on_both_paths(
    fast: LiveServer, through_sdk: LiveServer, key: str
) -> None:
    """The fast path projects a result with the dispatcher's projection: keys that collide as strings are an
    internal failure with an incident id there too, not a result missing a value."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "toolbox.colliding_keys",
    }
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "toolbox.colliding_keys", "arguments": {}, "_meta": META},
        }
    ).encode()
    before = fast_answers(fast)
    with httpx2.Client(timeout=10) as client:
        answers = [answer(client, server, key, headers, body, False) for server in (fast, through_sdk)]
    assert answers[0] == answers[1] and fast_answers(fast) == before + 1
    result = answers[0][4]
    assert result["isError"] is True and result["structuredContent"]["error"]["code"] == "internal"
    assert result["structuredContent"]["error"]["incident"] == "<varies>"


def test_a_question_asked_on_the_fast_path_is_answered_through_the_sdk(fast: LiveServer, key: str) -> None:
    """The request state the fast path seals (with the SDK's boundary) opens on the SDK path, which takes
    every later round: the second round of the call completes."""
    capabilities = {**META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "toolbox.greet",
        "Authorization": f"Bearer {key}",
    }
    params: dict[str, Any] = {"name": "toolbox.greet", "arguments": {}, "_meta": capabilities}
    before = fast_answers(fast)
    first = httpx2.post(
        fast.mcp_url, headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    ).json()["result"]
    assert first["resultType"] == "input_required" and list(first["inputRequests"]) == ["who"]
    answer = {"action": "accept", "content": {"name": "Ada"}}
    second = httpx2.post(
        fast.mcp_url,
        headers=headers,
        json={
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {**params, "requestState": first["requestState"], "inputResponses": {"who": answer}},
        },
    ).json()["result"]
    assert second["structuredContent"] == {"result": "Hello, Ada!"}
    assert fast_answers(fast) == before + 1  # the first round on the fast path, the second through the SDK
    # Without the capability, the same question is the SDK's -32021, from the fast path too.
    refused = httpx2.post(
        fast.mcp_url,
        headers=headers,
        json={"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {**params, "_meta": META}},
    )
    assert refused.json()["error"]["code"] == -32021 and fast_answers(fast) == before + 2


@pytest.mark.anyio
async def test_a_slow_call_in_sse_mode_is_kept_alive_and_a_gone_client_cancels_it(monkeypatch: Any) -> None:
    """Past the ping interval the answer becomes an event stream with pings (the SDK's headers and interval,
    the framing of its `_sse_event`); a disconnect cancels the call."""
    import anyio

    from mcp_expose.serving import fastpath_replies
    from mcp_expose.serving.sdk_internals import borrowed

    sdk = borrowed()
    assert sdk is not None
    monkeypatch.setattr(fastpath_replies, "sdk_pieces", lambda: dataclasses.replace(sdk, sse_ping_interval=0.05))
    monkeypatch.setattr(fastpath_replies, "WATCH_AFTER", 0.01)  # a call still running after this is watched
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def stays(*_: Any) -> dict[str, Any]:
        await anyio.sleep(10)
        return {"type": "http.disconnect"}

    async def slow_call() -> tuple[int, bytes]:
        await anyio.sleep(0.18)
        return 200, b'{"jsonrpc":"2.0","id":1,"result":{}}'

    await fastpath_replies.answer_in_sse_mode(slow_call(), stays, send)
    assert sent[0]["status"] == 200 and (b"content-type", b"text/event-stream") in sent[0]["headers"]
    bodies = [message["body"] for message in sent[1:]]
    assert len(bodies) >= 3 and set(bodies[:-1]) == {b": ping\r\n\r\n"}
    assert bodies[-1] == b'event: message\r\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\r\n\r\n'

    # The stream starts (the timer fires) just as the answer arrives: headers still go before anything else.
    sent.clear()
    keep_alive = fastpath_replies.KeepAlive(send)
    keep_alive.start()
    await keep_alive.stop()
    assert [message["type"] for message in sent][:1] == ["http.response.start"]

    # A client that goes away before the first ping: no ping may come first however slow this machine is.
    monkeypatch.setattr(fastpath_replies, "sdk_pieces", lambda: dataclasses.replace(sdk, sse_ping_interval=60))
    sent.clear()
    cancelled = anyio.Event()

    async def goes_away(*_: Any) -> dict[str, Any]:
        await anyio.sleep(0.02)
        return {"type": "http.disconnect"}

    async def abandoned_call() -> tuple[int, bytes]:
        try:
            await anyio.sleep(10)
        finally:
            cancelled.set()
        raise AssertionError("not reached")

    with anyio.fail_after(5):
        await fastpath_replies.answer_in_sse_mode(abandoned_call(), goes_away, send)
    assert cancelled.is_set() and sent == []


def test_code_written_for_the_sdk_sees_the_caller_on_the_fast_path(fast: LiveServer, key: str) -> None:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "toolbox.sdk_caller",
        "Authorization": f"Bearer {key}",
    }
    before = fast_answers(fast)
    result = httpx2.post(
        fast.mcp_url,
        headers=headers,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "toolbox.sdk_caller", "arguments": {}, "_meta": META},
        },
    ).json()["result"]["structuredContent"]
    assert result["client_id"] == f"api-key:{key.split('_')[1]}" and "mcp" in result["scopes"]
    assert fast_answers(fast) == before + 1


FUTURE_SDK = Path(__file__).parent / "future_sdk"


@pytest.mark.anyio
async def test_an_sdk_without_a_borrowed_piece_serves_everything_through_the_sdk(data: Path, key: str) -> None:
    """A later SDK without one of the unpublished pieces the fast path uses, and without a method stateful sessions
    override: the server still starts, warns once for each feature naming the piece, answers tools/list and
    tools/call in both eras through the SDK (no fast answers), and serves 2025-11-25 clients statelessly. A real
    process, because the names must be missing from the interpreter's start (tests/future_sdk), before anything of
    the SDK or of ours is imported: an in-process server would find them already bound."""
    from .live import demo_env
    from .mcp_client import MODES, connect
    from .test_streams import INITIALIZE, legacy_headers

    path = os.pathsep.join([str(FUTURE_SDK), demo_env(data)["PYTHONPATH"]])
    removed = "mcp.server.runner:modern_error_data,mcp.server.streamable_http_manager:StreamableHTTPSessionManager._admit_session"
    with run_server(
        data, **LIVE_SETTINGS, MCP_TEST_FAST_PATH="1", MCP_EXPOSE_LOG_LEVEL="DEBUG", PYTHONPATH=path,
        MCP_TEST_LEGACY_SESSIONS="1", MCP_TEST_REMOVE_SDK_NAMES=removed,
    ) as live:  # fmt: skip
        opened = httpx2.post(live.mcp_url, headers=legacy_headers(key), content=INITIALIZE)
        assert opened.status_code == 200 and "mcp-session-id" not in opened.headers, opened.headers
        for mode in MODES:
            async with connect(live.mcp_url, key, mode) as client:
                assert client.protocol_version == MODES[mode]
                assert "library.echo" in [tool.name for tool in (await client.list_tools()).tools]
                echoed = await client.call_tool("library.echo", {"message": mode})
                assert echoed.structured_content["message"] == mode
                unknown = await client.call_tool("library.get_book", {"book_id": 9999})
                assert unknown.structured_content["error"]["code"] == "not_found"
        log = live.log()
    assert log.count("FAST_PATH is off") == 1, log
    assert "mcp.server.runner.modern_error_data (missing)" in log, log
    assert "Every request is served through the SDK" in log
    assert fast_answers(live) == 0, log
    assert log.count("LEGACY_SESSIONS is off") == 1, log
    assert "StreamableHTTPSessionManager._admit_session (missing)" in log, log
    assert "2025-11-25 clients are served statelessly" in log


def test_borrowed_pieces_are_checked_for_their_shape() -> None:
    """Each borrowed piece is found in this SDK; one that moved, vanished or changed shape is named as such."""
    from mcp_expose.serving.sdk_internals import FAST_PATH_WANTS, probe

    pieces, problems = probe()
    assert pieces is not None and problems == ()
    elsewhere = {
        "sse_headers": ("mcp.server.runner", "no_such_name"),
        "sse_ping_interval": ("mcp.server.runner", "modern_error_data"),  # a function where a number was
        "modern_error_data": ("mcp.server.runner", "serve_one"),  # a function of other parameters
        "check_accept_headers": ("mcp.server.no_such_module", "check_accept_headers"),
    }
    changed = {key: dataclasses.replace(want, module=elsewhere[key][0], name=elsewhere[key][1])
               for key, want in FAST_PATH_WANTS.items()}  # fmt: skip
    pieces, problems = probe(changed)
    assert pieces is None
    assert problems == [
        "mcp.server.runner.no_such_name (missing)",
        "mcp.server.runner.modern_error_data (no longer a positive number of seconds)",
        "mcp.server.runner.serve_one (no longer a function of (exc))",
        "mcp.server.no_such_module.check_accept_headers (its module cannot be imported)",
    ]
