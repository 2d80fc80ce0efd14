"""The baseline: a bare `mcp` SDK low-level `Server` offering the same tools as ours, nothing more.

Served by uvicorn as `bench.bare_server:app` (built by the SDK's `streamable_http_app`: a
`StreamableHTTPSessionManager`, stateless, SSE mode like our default, DNS-rebinding checks on).
No Django: rows come straight from the demo's SQLite file with `sqlite3`, on one connection
opened at startup, inline in the handler (a primary-key lookup takes microseconds).

Environment:
- BENCH_BARE_CATALOG: two | many | calls | oauth | orm (which tools are listed; oauth = calls + a token check;
  orm = calls with `bench.read_book` read through Django's ORM, as ours reads it: `bench.settings`, the same
  query, in a worker thread the way ours hops, `sync_to_async(thread_sensitive=False)`)
- BENCH_DB: the demo's SQLite file
- BENCH_RESOURCE, BENCH_TOKEN (oauth only): this endpoint's URL and the one token accepted
"""

from __future__ import annotations

import json
import os
import sqlite3
from decimal import Decimal
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.shared.exceptions import MCPError

from bench.toolspec import (
    BOOK_COLUMNS,
    BOOK_TOOL,
    ECHO_TOOL,
    MANY_TOOLS,
    READ_TOOL,
    VIEW_TOOL,
    definition,
    many_tool_name,
)

CATALOGS: dict[str, list[str]] = {
    "two": [BOOK_TOOL, ECHO_TOOL],
    "many": [many_tool_name(index) for index in range(MANY_TOOLS)],
    "calls": [BOOK_TOOL, ECHO_TOOL, READ_TOOL, VIEW_TOOL],
}
CATALOGS["oauth"] = CATALOGS["orm"] = CATALOGS["calls"]


def orm_reader() -> Any:
    """`bench.read_book` through Django's ORM with our settings (bench.settings), off the event loop."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django
    from asgiref.sync import sync_to_async

    django.setup()
    from project.library.models import Book

    def read(book_id: int) -> dict[str, Any]:
        try:
            book = Book.objects.get(pk=book_id)
        except Book.DoesNotExist:
            raise MCPError(code=types.INVALID_PARAMS, message=f"No book {book_id}") from None
        values = {column: getattr(book, column) for column in BOOK_COLUMNS}
        return {key: value.isoformat() if hasattr(value, "isoformat") else value for key, value in values.items()}

    return sync_to_async(read, thread_sensitive=False)


class FixedTokenVerifier:
    """Accepts exactly one token, issued for this resource with the base scope (the SDK checks the rest)."""

    def __init__(self, token: str, resource: str) -> None:
        self.token, self.resource = token, resource

    async def verify_token(self, token: str) -> AccessToken | None:
        if token != self.token:
            return None
        return AccessToken(token=token, client_id="bench", scopes=["mcp"], resource=self.resource, subject="admin")


class Books:
    """The same rows our tools read, through `sqlite3`."""

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)

    def _available(self, book_id: int, copies: int) -> int:
        (out,) = self.db.execute(
            "SELECT COUNT(*) FROM library_loan WHERE book_id = ? AND returned_at IS NULL", (book_id,)
        ).fetchone()
        return copies - out

    def row(self, book_id: int) -> dict[str, Any]:
        """bench.read_book: one row of library_book (all columns read, as Django does)."""
        found = self.db.execute(
            "SELECT id, title, author_id, isbn, genre, published, price, copies FROM library_book WHERE id = ?",
            (book_id,),
        ).fetchone()
        if found is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"No book {book_id}")
        columns = dict(
            zip(("id", "title", "author_id", "isbn", "genre", "published", "price", "copies"), found, strict=True)
        )
        return {column: columns[column] for column in BOOK_COLUMNS}

    def detail(self, book_id: int) -> dict[str, Any]:
        """library.get_book and library.books.retrieve: the book, its author and the copies on the shelf."""
        found = self.db.execute(
            "SELECT b.id, b.title, b.isbn, b.genre, b.published, b.price, b.copies, a.id, a.name, a.born "
            "FROM library_book b JOIN library_author a ON a.id = b.author_id WHERE b.id = ?",
            (book_id,),
        ).fetchone()
        if found is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"No book {book_id}")
        bid, title, isbn, genre, published, price, copies, author_id, author, born = found
        return {
            "id": bid,
            "title": title,
            "isbn": isbn,
            "genre": genre,
            "published": published,
            "price": f"{Decimal(str(price)):.2f}",
            "copies": copies,
            "available": self._available(bid, copies),
            "author": {"id": author_id, "name": author, "born": born},
        }


def _result(value: dict[str, Any]) -> types.CallToolResult:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=value)


def build(catalog: str, db_path: str) -> Server[Any]:
    names = CATALOGS[catalog]
    listing = types.ListToolsResult(tools=[types.Tool.model_validate(definition(name)) for name in names])
    served = frozenset(names)
    books = Books(db_path)
    read_through_orm = orm_reader() if catalog == "orm" else None

    async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
        return listing

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
        name, arguments = params.name, params.arguments or {}
        if name not in served:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {name}")
        if name == ECHO_TOOL:
            token = get_access_token()
            return _result({"message": arguments["message"], "caller": token.subject if token else "anonymous"})
        if name == READ_TOOL and read_through_orm is not None:
            return _result(await read_through_orm(int(arguments["book_id"])))
        if name == READ_TOOL:
            return _result(books.row(int(arguments["book_id"])))
        if name == BOOK_TOOL:
            book = books.detail(int(arguments["book_id"]))
            book["author"] = book["author"]["name"]
            del book["price"]
            return _result(book)
        if name == VIEW_TOOL:
            book = books.detail(int(arguments["pk"]))
            author = book["author"]
            return _result({**book, "author": author["id"], "author_detail": author})
        return _result({"result": str(arguments["text"]) * int(arguments.get("count", 1))})

    return Server("bench-bare", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


def app_from_environment() -> Any:
    catalog = os.environ.get("BENCH_BARE_CATALOG", "calls")
    server = build(catalog, os.environ["BENCH_DB"])
    if catalog != "oauth":
        return server.streamable_http_app(stateless_http=True)
    resource = os.environ["BENCH_RESOURCE"]
    auth = AuthSettings(
        issuer_url=resource.rsplit("/mcp", 1)[0],
        resource_server_url=resource,
        required_scopes=["mcp"],
        validate_token_resource=True,
    )
    return server.streamable_http_app(
        stateless_http=True, auth=auth, token_verifier=FixedTokenVerifier(os.environ["BENCH_TOKEN"], resource)
    )


app = app_from_environment()
