"""What the bench tools look like on the wire, shared by our bench app and the bare SDK server.

One place for names, descriptions and schemas, so that both servers list exactly the same tools
(run.py also compares the two `tools/list` answers before it measures anything).
"""

from __future__ import annotations

from typing import Any

MANY_TOOLS = 200
# The names our server serves (the portable style, its default): the bare server lists the same.
ECHO_TOOL = "library_echo"
BOOK_TOOL = "library_get_book"
READ_TOOL = "bench_read_book"
VIEW_TOOL = "library_books_retrieve"
# The upstream name our server gives the bare server in the gateway workloads: its tools are served as
# `gateway_name(name)` (`bench.catalogs gateway`).
GATEWAY = "benchup"


def gateway_name(name: str) -> str:
    """How our gateway serves the bare server's tool `name` (the portable style's `{server}__{tool}`)."""
    return f"{GATEWAY}__{name}"


# The columns `bench.read_book` reads, in order: one row of library_book, no join.
BOOK_COLUMNS = ("id", "title", "isbn", "genre", "published", "copies")


def many_tool_name(index: int) -> str:
    return f"bench_tool_{index:03d}"


def many_tool_description(index: int) -> str:
    return f"Bench tool {index:03d}: repeat a text a number of times."


# The input schema our schema builder derives from `(text: str, count: int = 1)` (checked at run time).
MANY_TOOL_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string"}, "count": {"type": "integer", "default": 1}},
    "required": ["text"],
    "additionalProperties": False,
}

_READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}

# The demo tools the bare server mirrors, as our server lists them (checked at run time).
MIRRORED: dict[str, dict[str, Any]] = {
    ECHO_TOOL: {
        "description": "Repeat a message back, with the name of the caller. Useful to check a connection.",
        "inputSchema": {
            "type": "object",
            "properties": {"message": {"type": "string", "maxLength": 1000}},
            "required": ["message"],
            "additionalProperties": False,
        },
        "annotations": _READ_ONLY,
    },
    BOOK_TOOL: {
        "description": "Everything the library knows about one book, including how many copies are on the shelf.",
        "inputSchema": {
            "type": "object",
            "properties": {"book_id": {"type": "integer", "description": "The book's id, as search_books returns it."}},
            "required": ["book_id"],
            "additionalProperties": False,
        },
        "outputSchema": {
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "title": {"type": "string"},
                "author": {"type": "string"},
                "isbn": {"type": "string"},
                "genre": {"type": "string", "enum": ["fiction", "science", "history", "children"]},
                "published": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "copies": {"type": "integer"},
                "available": {"type": "integer"},
            },
            "required": ["id", "title", "author", "isbn", "genre", "published", "copies", "available"],
        },
        "annotations": _READ_ONLY,
    },
    READ_TOOL: {
        "description": "One row of the book table, by primary key.",
        "inputSchema": {
            "type": "object",
            "properties": {"book_id": {"type": "integer"}},
            "required": ["book_id"],
            "additionalProperties": False,
        },
        "annotations": _READ_ONLY,
    },
    VIEW_TOOL: {
        "description": "Get one book. The library's catalogue.",
        "inputSchema": {
            "type": "object",
            "properties": {"pk": {"type": "string", "minLength": 1, "description": "The pk in the URL."}},
            "required": ["pk"],
            "additionalProperties": False,
        },
        "annotations": {"readOnlyHint": True},
    },
}


def definition(name: str) -> dict[str, Any]:
    """A tool as `tools/list` shows it (wire names, camelCase)."""
    if name in MIRRORED:
        return {"name": name, **MIRRORED[name]}
    index = int(name.rsplit("_", 1)[1])
    return {
        "name": name,
        "description": many_tool_description(index),
        "inputSchema": MANY_TOOL_INPUT,
        "annotations": _READ_ONLY,
    }
