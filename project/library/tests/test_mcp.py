"""The library's MCP surface, tested as the project's own suite would (docs/testing.md's worked example).

The plugin is on in this project's pytest configuration (`mcp_expose = true`); `mcp_client` calls through the
real server in this test's transaction, `mcp_live` serves the project on a real port.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from mcp import MCPError
from rest_framework.test import APIClient

from mcp_expose.testing import (
    assert_cannot_call,
    assert_hidden,
    assert_tool_error,
    assert_tool_result,
    assert_visible,
)
from project.library.models import Book, Loan
from project.library.seed import seed_library


@pytest.fixture
def library(db: None) -> None:
    seed_library()


@pytest.fixture
def reader(db: None) -> User:
    return User.objects.create_user("reader", password="reader")


def test_a_reader_searches_the_catalogue(mcp_client: Any, library: None, django_user_model: Any) -> None:
    reader = django_user_model.objects.create_user("reader")
    result = mcp_client(user=reader, scopes=["library:read"]).call_tool("library.search_books", {"query": "sagan"})
    assert [book["title"] for book in result.structured_content["result"]] == ["Cosmos", "Pale Blue Dot"]


def test_a_reader_sees_the_reading_tools_and_not_the_writing_ones(mcp_client: Any, reader: User) -> None:
    reading = mcp_client(user=reader, scopes=["library:read"])
    assert_visible(reading, "library.search_books", "library.get_book", "library.my_loans", "library.books.list")
    assert_hidden(reading, "library.borrow_book", "library.loans.create", "library.withdraw_book")


def test_a_key_without_library_write_cannot_borrow(mcp_client: Any, library: None, reader: User) -> None:
    cosmos = Book.objects.get(title="Cosmos")
    assert_cannot_call(mcp_client(user=reader, scopes=["library:read"]), "library.borrow_book", {"book_id": cosmos.pk})
    assert_cannot_call(mcp_client(user=reader, scopes=["library:read"]), "library.loans.create", {"book": cosmos.pk})
    assert not Loan.objects.exists()
    borrowed = mcp_client(user=reader, scopes=["library:write"]).call_tool(
        "library.borrow_book", {"book_id": cosmos.pk}
    )
    assert borrowed.structured_content["book"] == "Cosmos"
    assert Loan.objects.get().borrower == reader


def test_the_tool_returns_what_the_view_returns(mcp_client: Any, library: None, reader: User) -> None:
    cosmos = Book.objects.get(title="Cosmos")
    http = APIClient()
    http.force_authenticate(reader)
    over_http = http.get(f"/api/books/{cosmos.pk}/").json()
    over_mcp = mcp_client(user=reader, scopes=["library:read"]).call_tool(
        "library.books.retrieve", {"pk": str(cosmos.pk)}
    )
    assert_tool_result(over_mcp, over_http)


def test_a_missing_book_is_a_not_found_tool_error(mcp_client: Any, reader: User) -> None:
    result = mcp_client(user=reader, scopes=["library:read"]).call_tool("library.get_book", {"book_id": 999})
    assert_tool_error(result, "not_found")


def test_withdrawing_a_book_waits_for_a_person(mcp_client: Any, library: None, admin_user: User) -> None:
    spqr = Book.objects.get(title="SPQR")
    unconfirmed = mcp_client(user=admin_user).call_tool("library.withdraw_book", {"book_id": spqr.pk})
    assert_tool_error(unconfirmed, "confirmation_required")
    confirmed = mcp_client(user=admin_user, confirm=True).call_tool("library.withdraw_book", {"book_id": spqr.pk})
    assert_tool_result(confirmed, {"withdrawn": "SPQR"})
    assert not Book.objects.filter(title="SPQR").exists()


@pytest.mark.anyio
async def test_over_http_with_an_api_key(mcp_live: Any) -> None:
    reader = await sync_to_async(User.objects.create_user)("reader")
    await sync_to_async(seed_library)()
    async with mcp_live.connect(reader, ["library:read"]) as client:
        found = await client.call_tool("library.search_books", {"query": "earthsea"})
        with pytest.raises(MCPError):
            await client.call_tool("library.borrow_book", {"book_id": 1})
    assert found.structured_content["result"][0]["title"] == "A Wizard of Earthsea"
