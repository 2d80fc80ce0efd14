"""The bench's tools, shared by every peer's tool module (standard library and typing_extensions only).

On the peers' PYTHONPATH (bench.peers.COMMON_DIR, set by the runner), so each peer imports it by this unique
name. BENCH_PEER_PROFILE: two / calls -> echo + get_book; many -> tool_000 ... tool_199. The tools are async;
each peer registers them with its library's own decorator through `register`.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

from typing_extensions import TypedDict  # pydantic refuses typing.TypedDict before Python 3.12

PROFILES = ("two", "many", "calls")
PROFILE = os.environ.get("BENCH_PEER_PROFILE", "two")
if PROFILE not in PROFILES:
    raise SystemExit(f"BENCH_PEER_PROFILE={PROFILE!r}: expected two, many or calls")

Tool = Callable[..., Awaitable[Any]]


class Echoed(TypedDict):
    message: str


class Book(TypedDict):
    id: int
    title: str


async def echo(message: str) -> Echoed:
    """Echo the message back."""
    return {"message": message}


async def get_book(book_id: int) -> Book:
    """Return one book by id (a fixed record, no database)."""
    return {"id": book_id, "title": f"Book {book_id}"}


def _numbered(index: int) -> Tool:
    async def tool(text: str, count: int = 1) -> str:
        return text * count

    tool.__name__ = tool.__qualname__ = f"tool_{index:03d}"
    tool.__doc__ = f"Bench tool number {index}."
    return tool


def many_tools() -> list[tuple[str, Tool]]:
    """The `many` profile's 200 tools, as (name, function): tool_000 ... tool_199."""
    return [(f"tool_{index:03d}", _numbered(index)) for index in range(200)]


def tools(profile: str = PROFILE) -> list[tuple[str, Tool]]:
    """The (name, function) pairs a peer serves for `profile`."""
    return many_tools() if profile == "many" else [("echo", echo), ("get_book", get_book)]


def register(add_tool: Callable[[str, Tool], object], profile: str = PROFILE) -> None:
    """Call `add_tool(name, function)` for each tool of `profile`; the description is the function's docstring."""
    for name, function in tools(profile):
        add_tool(name, function)
