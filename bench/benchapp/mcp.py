"""The bench tools, declared through the public API like any project's tools.

`bench.tool_000` … `bench.tool_199` (served as `bench_tool_000` …) are trivial (the tools/list workload only lists them);
`bench.read_book` reads exactly one row through the ORM (the one-row read workload).
All start disabled: `bench.catalogs` enables the set a workload needs, as an admin would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mcp_expose
from bench.toolspec import BOOK_COLUMNS, MANY_TOOLS, many_tool_description
from project.library.models import Book


def _many_tool(index: int) -> Callable[..., str]:
    def tool(text: str, count: int = 1) -> str:
        return text * count

    tool.__name__ = tool.__qualname__ = f"tool_{index:03d}"
    tool.__doc__ = many_tool_description(index)
    return tool


for _index in range(MANY_TOOLS):
    mcp_expose.tool(_many_tool(_index), read_only=True, open_world=False, enabled=False)


@mcp_expose.tool(read_only=True, open_world=False, enabled=False)
def read_book(book_id: int) -> dict[str, Any]:
    """One row of the book table, by primary key."""
    book = Book.objects.get(pk=book_id)
    return {column: getattr(book, column) for column in BOOK_COLUMNS}
