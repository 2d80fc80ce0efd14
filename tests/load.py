"""A steady mixed load of 2026-07-28 requests on several server processes, every answer kept.

Workers send, in turn, each kind of request a deployment serves (a listing, a call that needs nothing but the
catalog and the credential, a write, a rate-limited call) to each server in turn, and record what came back:
the HTTP status and content type, a JSON-RPC error, a tool's error code, how long it took. Each tools/call
carries a conversation id of its own, so its usage row can be found (or found twice).
"""

from __future__ import annotations

import itertools
import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2

from .live import jsonrpc_body, modern_headers

# Every kind of request the load sends: (JSON-RPC method, tool name or None).
KINDS: dict[str, tuple[str, str | None]] = {
    "list": ("tools/list", None),
    "echo": ("tools/call", "library.echo"),
    "write": ("tools/call", "library.authors.create"),
    "limited": ("tools/call", "toolbox.limited"),
}
# Tool error codes that tell the caller to come back later.
RETRYABLE_TOOL_ERRORS = frozenset({"unavailable", "rate_limited"})
# A client gives up on an answer after this long: long past any latency a test accepts, so a hung server
# shows as slow answers and then as timeouts instead of hanging the test.
CLIENT_TIMEOUT_SECONDS = 15.0
# Each worker waits this long between its requests: a steady load that leaves the servers room to answer.
PACE_SECONDS = 0.05
# An idle pooled connection is dropped well before uvicorn closes it (after 5 s): reusing one just as the
# server closes it fails the request, a race of the client's making and not a fault of the server's.
KEEPALIVE_SECONDS = 1.0


@dataclass(frozen=True)
class Answer:
    """What one request got back; `sent` is seconds since the load started."""

    kind: str
    server: int
    sent: float
    latency: float
    conversation: str | None = None
    status: int | None = None  # None: no HTTP answer at all (see `transport_error`)
    content_type: str = ""
    retry_after: str | None = None  # the Retry-After header
    json_body: bool = False  # the body (or its SSE message) is JSON
    result: dict[str, Any] | None = None
    rpc_error: dict[str, Any] | None = None
    transport_error: str | None = None
    body: str = ""  # the start of the body, for messages

    @property
    def tool_error(self) -> dict[str, Any] | None:
        """The `{"code", "message", "details"}` of a tools/call answered with an error result."""
        if self.result is None or not self.result.get("isError"):
            return None
        return (self.result.get("structuredContent") or {}).get("error") or {"code": "?", "message": self.body}

    @property
    def succeeded(self) -> bool:
        """The request got the answer a healthy server gives (for the rate-limited tool, a refusal is one)."""
        if self.status != 200 or self.result is None:
            return False
        if self.kind == "list":
            return "library.echo" in {tool.get("name") for tool in self.result.get("tools", [])}
        error = self.tool_error
        return error is None or (self.kind == "limited" and error.get("code") == "rate_limited")

    @property
    def retryable(self) -> bool:
        """A clear "come back later": a tool error with `retry_after`, or a JSON 503 with Retry-After."""
        error = self.tool_error
        if error is not None:
            return error.get("code") in RETRYABLE_TOOL_ERRORS and "retry_after" in (error.get("details") or {})
        return self.status == 503 and bool(self.retry_after) and self.json_body

    @property
    def label(self) -> str:
        """A short name for what came back, to count answers by."""
        if self.transport_error is not None:
            return f"no answer ({self.transport_error})"
        if self.status != 200:
            kind = "JSON" if self.json_body else (self.content_type or "no content type")
            return f"HTTP {self.status} {kind}" + (" + Retry-After" if self.retry_after else "")
        if self.rpc_error is not None:
            return f"JSON-RPC {self.rpc_error.get('code')} {str(self.rpc_error.get('message'))[:60]}"
        error = self.tool_error
        if error is None:
            return "ok" if self.result is not None else "200 without a result"
        details = error.get("details") or {}
        return f"tool error {error.get('code')}" + (" + retry_after" if "retry_after" in details else "")


class Load:
    """Workers sending the KINDS to `urls` in turn until `stop()`; answers gather in `answers`."""

    def __init__(self, urls: Sequence[str], key: str, conversation_prefix: str) -> None:
        self.urls = list(urls)
        self.key = key
        self.prefix = conversation_prefix
        self.answers: list[Answer] = []
        self._counter = itertools.count()
        self._started = time.monotonic()
        self._stopping = False
        self._changed = anyio.Event()

    def now(self) -> float:
        return time.monotonic() - self._started

    def stop(self) -> None:
        """Workers finish the request they are waiting on (so its answer, and its usage row, are known), then end."""
        self._stopping = True

    async def run(self, workers: int = 16) -> None:
        limits = httpx2.Limits(max_connections=workers * 2, keepalive_expiry=KEEPALIVE_SECONDS)
        async with httpx2.AsyncClient(timeout=CLIENT_TIMEOUT_SECONDS, limits=limits) as http:
            async with anyio.create_task_group() as group:
                for _ in range(workers):
                    group.start_soon(self._work, http)

    async def _work(self, http: httpx2.AsyncClient) -> None:
        while not self._stopping:
            number = next(self._counter)
            kind = list(KINDS)[number % len(KINDS)]
            server = (number // len(KINDS)) % len(self.urls)
            self.answers.append(await self._send(http, number, kind, server))
            self._changed.set()
            self._changed = anyio.Event()
            await anyio.sleep(PACE_SECONDS)

    async def _send(self, http: httpx2.AsyncClient, number: int, kind: str, server: int) -> Answer:
        method, tool = KINDS[kind]
        headers = modern_headers(method, self.key, name=tool)
        conversation = None
        params: dict[str, Any] = {}
        if tool is not None:
            conversation = f"{self.prefix}-{number}"
            headers["X-Conversation-Id"] = conversation
            params = {"name": tool, "arguments": _arguments(kind, conversation)}
        sent = self.now()
        base = {"kind": kind, "server": server, "sent": sent, "conversation": conversation}
        try:
            response = await http.post(self.urls[server], content=jsonrpc_body(method, params), headers=headers)
        except httpx2.TransportError as exc:
            return Answer(**base, latency=self.now() - sent, transport_error=type(exc).__name__)
        message = _message(response)
        return Answer(
            **base,
            latency=self.now() - sent,
            status=response.status_code,
            content_type=response.headers.get("content-type", "").split(";")[0],
            retry_after=response.headers.get("retry-after"),
            json_body=message is not None,
            result=(message or {}).get("result"),
            rpc_error=(message or {}).get("error"),
            body=response.text[:300],
        )

    async def all_kinds_succeed(self, since: float, timeout: float) -> float:
        """Wait until every kind has succeeded on every server with a request sent at or after `since`; return
        when the last of them was sent. Fails after `timeout` (a hang guard), saying what is still failing."""
        first: dict[tuple[str, int], float] = {}  # (kind, server): when its first success since `since` was sent
        seen = 0
        with anyio.move_on_after(timeout):
            while True:
                for answer in self.answers[seen:]:
                    if answer.sent >= since and answer.succeeded:
                        first.setdefault((answer.kind, answer.server), answer.sent)
                seen = len(self.answers)
                if len(first) == len(KINDS) * len(self.urls):
                    return max(first.values())
                await self._changed.wait()
        late = Counter((answer.kind, answer.server, answer.label) for answer in self.answers if answer.sent >= since)
        raise AssertionError(f"Not every kind succeeded on every server within {timeout} s of {since:.1f} s: {late}")


def _arguments(kind: str, conversation: str) -> dict[str, Any]:
    if kind == "echo":
        return {"message": conversation}
    if kind == "write":
        return {"name": f"author {conversation}"}
    return {}


def _message(response: httpx2.Response) -> dict[str, Any] | None:
    """The JSON-RPC answer in a JSON body or in the last SSE `data:` line; None when the body holds none."""
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        lines = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        text = lines[-1] if lines else ""
    try:
        message = json.loads(text)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None
