"""View- and model-backed tools: the same request over HTTP and over MCP, as the same user, must agree.

The MCP side is `mcp_expose.testing`'s client, the way a project tests its own tools: the real server and
dispatcher, in this test's transaction (pytest-django's plain `db`), each answer read off the wire.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import mcp_types as types
import pytest
from django.contrib.auth.models import Permission, User
from django.core.cache import cache
from django.test import Client

from mcp_expose import ModelTools
from mcp_expose.catalog.compiled import provider
from mcp_expose.core.errors import DeclarationError
from mcp_expose.declare.json_schemas import thaw
from mcp_expose.declare.model_tools import ACTIONS as MODEL_ACTIONS
from mcp_expose.declare.registry import CapabilityRegistry
from mcp_expose.testing import McpTestClient, assert_cannot_call, assert_tool_error
from project.library.models import Author, Book, Loan
from project.library.seed import seed_library

pytestmark = pytest.mark.django_db

SCOPES = frozenset({"mcp", "library:read", "library:write"})


@pytest.fixture(autouse=True)
def library() -> Iterator[None]:
    seed_library()
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def alice() -> User:
    return User.objects.create_user("alice", password="pw")


@pytest.fixture
def bob() -> User:
    return User.objects.create_user("bob", password="pw")


@pytest.fixture
def librarian() -> User:
    user = User.objects.create_user("libby", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="library"))
    return user


def book_id(title: str) -> int:
    return Book.objects.get(title=title).pk


def author_id(name: str) -> int:
    return Author.objects.get(name=name).pk


@dataclass(frozen=True)
class Answer:
    """A call's result as it came over the wire, read as the dispatcher's outcome: the value (one that is not
    an object arrives as {"result": ...}), or the failure."""

    result: types.CallToolResult

    @property
    def ok(self) -> bool:
        return not self.result.is_error

    @property
    def value(self) -> Any:
        content = self.result.structured_content
        assert content is not None and not self.result.is_error, self.result
        return content["result"] if set(content) == {"result"} else content

    @property
    def failure(self) -> Any:
        error = assert_tool_error(self.result)
        return SimpleNamespace(code=error["code"], message=error["message"], details=error.get("details"))


def caller(user: Any, scopes: frozenset[str] = SCOPES) -> McpTestClient:
    """`user` with `scopes`; None: an anonymous caller, with the settings' anonymous scopes."""
    return McpTestClient(user, scopes) if user is not None else McpTestClient()


def mcp(user: Any, tool: str, arguments: dict[str, Any] | None = None) -> Answer:
    result = caller(user).call_tool(tool, arguments or {})
    assert isinstance(result, types.CallToolResult), result
    return Answer(result)


def http(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def failure(outcome: Answer) -> str:
    return outcome.failure.code


# DRF viewsets ---------------------------------------------------------------------------------------------------


def test_list_with_search_matches_http(alice: User) -> None:
    over_http = http(alice).get("/api/books/", {"search": "sagan"}).json()
    over_mcp = mcp(alice, "library.books.list", {"search": "sagan"}).value
    assert over_mcp["results"] == over_http["results"] and over_mcp["count"] == over_http["count"] == 2


def test_retrieve_matches_http(alice: User) -> None:
    cosmos = book_id("Cosmos")
    assert (
        mcp(alice, "library.books.retrieve", {"pk": str(cosmos)}).value
        == http(alice).get(f"/api/books/{cosmos}/").json()
    )
    assert failure(mcp(alice, "library.books.retrieve", {"pk": "999999"})) == "not_found"
    assert http(alice).get("/api/books/999999/").status_code == 404


def test_pagination_round_trips_through_the_cursor(alice: User) -> None:
    first = mcp(alice, "library.books.list", {"ordering": "title"}).value
    second = mcp(alice, "library.books.list", {"ordering": "title", "cursor": first["next_cursor"]}).value
    http_second = http(alice).get("/api/books/", {"ordering": "title", "page": 2}).json()
    assert len(first["results"]) == 3 and second["results"] == http_second["results"]
    assert second["previous_cursor"] is not None
    last = mcp(alice, "library.books.list", {"ordering": "title", "page": 3}).value
    assert last["next_cursor"] is None and len(last["results"]) == 2
    forged = mcp(alice, "library.books.list", {"cursor": first["next_cursor"][:-3] + "abc"})
    assert failure(forged) == "invalid_input"


def test_ordering_accepts_only_what_the_view_allows(alice: User) -> None:
    outcome = mcp(alice, "library.books.list", {"ordering": "-isbn"})
    assert (
        failure(outcome) == "invalid_input"
        and "Allowed: title, published, price." in outcome.failure.details[0]["message"]
    )
    assert "isbn" not in outcome.failure.details[0]["message"]  # the value is not echoed


def test_view_permission_classes_apply(alice: User, librarian: User) -> None:
    book = {"title": "New", "author": author_id("Carl Sagan"), "isbn": "1-2-3", "genre": "fiction", "copies": 1}
    assert http(alice).post("/api/books/", book, content_type="application/json").status_code == 403
    assert failure(mcp(alice, "library.books.create", book)) == "permission_denied"
    assert not Book.objects.filter(isbn="1-2-3").exists()
    created = mcp(librarian, "library.books.create", book).value
    assert created["title"] == "New" and Book.objects.filter(isbn="1-2-3").exists()


def test_serializer_validation_becomes_invalid_input_with_paths(librarian: User) -> None:
    outcome = mcp(librarian, "library.books.create", {"title": "X", "author": 999_999, "isbn": "978-0-547-72202-3"})
    assert failure(outcome) == "invalid_input"
    paths = {problem["path"] for problem in outcome.failure.details}
    assert paths == {"$.author", "$.isbn"}


def test_owner_and_non_owner_see_what_they_see_over_http(alice: User, bob: User) -> None:
    loan = mcp(alice, "library.loans.create", {"book": book_id("Cosmos"), "days": 5}).value
    assert Loan.objects.get(pk=loan["id"]).borrower == alice
    assert (
        mcp(alice, "library.loans.retrieve", {"pk": str(loan["id"])}).value
        == http(alice).get(f"/api/loans/{loan['id']}/").json()
    )
    # Object-level permission: bob may not see alice's loan, over HTTP or MCP.
    assert http(bob).get(f"/api/loans/{loan['id']}/").status_code == 403
    denied = mcp(bob, "library.loans.retrieve", {"pk": str(loan["id"])})
    assert failure(denied) == "permission_denied" and denied.failure.message == "This loan belongs to someone else."
    assert mcp(bob, "library.loans.mine").value == http(bob).get("/api/loans/").json() == []
    assert [row["id"] for row in mcp(alice, "library.loans.mine").value] == [loan["id"]]
    returned = mcp(alice, "library.loans.return_book", {"pk": str(loan["id"])}).value
    assert returned["returned_at"] is not None


def test_throttles_apply_to_mcp_calls(alice: User) -> None:
    # tests/settings.py gives the "loans" throttle scope 8 calls a minute per user.
    for _ in range(7):
        assert mcp(alice, "library.loans.mine").ok
    assert http(alice).get("/api/loans/").status_code == 200  # the 8th, over HTTP: one shared budget
    limited = mcp(alice, "library.loans.mine")
    assert failure(limited) == "rate_limited" and 1 <= limited.failure.details["retry_after"] <= 60
    assert http(alice).get("/api/loans/").status_code == 429


def test_a_failing_write_leaves_nothing_behind(alice: User) -> None:
    Book.objects.filter(title="SPQR").update(copies=0)
    before = Loan.objects.count()
    outcome = mcp(alice, "library.loans.create", {"book": book_id("SPQR"), "days": 3})
    assert failure(outcome) == "invalid_input" and outcome.failure.details == [
        {"path": "$.book", "message": "Every copy is out on loan."}
    ]
    assert Loan.objects.count() == before


def test_deletes_are_destructive_and_wait_for_a_person(librarian: User) -> None:
    entry = provider.get_sync().get("library.books.destroy")
    assert entry is not None and entry.requires_confirmation and entry.annotations.destructive is True
    outcome = mcp(librarian, "library.books.destroy", {"pk": str(book_id("Cosmos"))})
    assert failure(outcome) == "confirmation_required" and Book.objects.filter(title="Cosmos").exists()


def test_annotations_follow_http_semantics() -> None:
    catalog = provider.get_sync()
    assert catalog.get("library.books.list").annotations.read_only is True
    assert catalog.get("library.books.partial_update").annotations.read_only is False
    assert catalog.get("library.loans.return_book").annotations.read_only is False
    assert catalog.get("library.authors.delete").annotations.destructive is True


def test_http_behaviour_is_unchanged_by_exposure(alice: User) -> None:
    from rest_framework.viewsets import ViewSetMixin

    from project.library.api import BookViewSet

    page = http(alice).get("/api/books/").json()
    assert page["next"].startswith("http://testserver/api/books/?page=2") and "next_cursor" not in page
    assert BookViewSet.as_view.__func__ is ViewSetMixin.as_view.__func__  # type: ignore[attr-defined]
    assert not [name for name in vars(BookViewSet) if "mcp" in name.lower()]
    assert Client().get("/api/books/").status_code == 403  # still needs a login over HTTP


def test_no_schema_has_references() -> None:
    for entry in provider.get_sync().tools:
        text = repr(thaw(entry.input_schema))
        assert "$ref" not in text and "$defs" not in text, entry.name
        assert entry.input_schema["additionalProperties"] is False


def test_view_schemas_come_from_what_the_view_declares() -> None:
    catalog = provider.get_sync()
    listing = thaw(catalog.get("library.books.list").input_schema)["properties"]
    assert set(listing) == {"genre", "author", "search", "ordering", "page", "page_size", "cursor"}
    ordering = re.compile(listing["ordering"]["pattern"])
    assert ordering.search("-published") and ordering.search("-price, title") and not ordering.search("isbn")
    patch_pk = thaw(catalog.get("library.books.partial_update").input_schema)["properties"]["pk"]
    assert [branch["type"] for branch in patch_pk["anyOf"]] == ["integer", "string"]  # the id a list returned
    create = thaw(catalog.get("library.books.create").input_schema)
    assert create["properties"]["title"] == {
        "type": "string",
        "maxLength": 300,
        "description": "The book's title as printed.",
    }
    assert create["properties"]["genre"]["enum"] == ["fiction", "science", "history", "children"]
    assert "author_detail" not in create["properties"] and "available" not in create["properties"]
    assert set(create["required"]) == {"title", "author", "isbn"}
    patch = thaw(catalog.get("library.books.partial_update").input_schema)
    assert patch["required"] == ["pk"]
    loans = thaw(catalog.get("library.loans.create").input_schema)["properties"]
    assert loans["days"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 30,
        "default": 14,
        "description": "How many days to borrow the book for.",
    }


# Plain Django views -----------------------------------------------------------------------------------------------


def test_a_list_view_returns_its_main_content_as_text(alice: User) -> None:
    page = http(alice).get("/books/", {"q": "the"}).content.decode()
    text = mcp(alice, "library.catalogue_page", {"q": "the"}).value
    titles_http = re.findall(r"<li>(.*?) by", page)
    assert titles_http == ["The Left Hand of Darkness"]
    assert text == "Books\nThe Left Hand of Darkness by Ursula K. Le Guin (Fiction)"
    second = mcp(alice, "library.catalogue_page", {"page": 2}).value
    assert "More on page" not in second and "Small Gods" in second


def test_form_views_keep_their_permissions_and_validation(alice: User, librarian: User) -> None:
    assert http(alice).post("/authors/new/", {"name": "X"}).status_code == 403
    assert failure(mcp(alice, "library.add_author_form", {"name": "X"})) == "permission_denied"
    invalid = mcp(librarian, "library.add_author_form", {"name": "Ursula K. Le Guin"})
    assert failure(invalid) == "invalid_input" and invalid.failure.details[0]["path"] == "$.name"
    created = mcp(librarian, "library.add_author_form", {"name": "Octavia Butler", "born": 1947})
    assert created.value == {"status": 302, "redirect": "/books/"}
    assert Author.objects.get(name="Octavia Butler").born == 1947


def test_login_required_views_refuse_callers_without_a_user(settings: Any) -> None:
    settings.MCP_EXPOSE = {**settings.MCP_EXPOSE, "ALLOW_ANONYMOUS": True, "ANONYMOUS_SCOPES": ["library:read"]}
    assert failure(mcp(None, "library.my_summary")) == "permission_denied"
    assert Client().get("/me/summary/").status_code == 302


def test_json_views_return_data(alice: User) -> None:
    mcp(alice, "library.loans.create", {"book": book_id("Pale Blue Dot"), "days": 4})
    assert mcp(alice, "library.my_summary").value == http(alice).get("/me/summary/").json()
    assert mcp(alice, "library.my_summary").value["on_loan"] == 1


# Model tools ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "path"),
    [
        ({"filters": {"password__startswith": "x"}}, "$.filters.password__startswith"),
        ({"filters": {"user__password": "x"}}, "$.filters.user__password"),
        ({"filters": {"name__regex": ".*"}}, "$.filters.name__regex"),
        ({"order_by": "-password"}, "$.order_by"),
        ({"where": "1=1"}, "$.where"),
        ({"page_size": 1000}, "$.page_size"),
    ],
)
def test_hostile_filters_and_ordering_are_refused_naming_what_is_allowed(
    librarian: User, arguments: dict, path: str
) -> None:
    outcome = mcp(librarian, "library.authors.list", arguments)
    assert failure(outcome) == "invalid_input"
    problem = outcome.failure.details[0]
    assert problem["path"] == path
    if "filters" in arguments:
        assert "name__icontains" in problem["message"] and "born__gte" in problem["message"]
    if "order_by" in arguments:
        assert '"-born"' in problem["message"]


def test_model_list_filters_orders_and_pages(librarian: User) -> None:
    first = mcp(librarian, "library.authors.list", {"order_by": "-born", "page_size": 2}).value
    names = [row["name"] for row in first["results"]]
    assert names == ["Mary Beard", "Terry Pratchett"]
    second = mcp(
        librarian, "library.authors.list", {"order_by": "-born", "page_size": 2, "cursor": first["next_cursor"]}
    ).value
    assert [row["name"] for row in second["results"]] == ["Carl Sagan", "Ursula K. Le Guin"]
    mismatched = mcp(librarian, "library.authors.list", {"order_by": "name", "cursor": first["next_cursor"]})
    assert failure(mismatched) == "invalid_input"
    filtered = mcp(librarian, "library.authors.list", {"filters": {"name__icontains": "SAGAN"}}).value
    assert [row["name"] for row in filtered["results"]] == ["Carl Sagan"] and filtered["next_cursor"] is None


def test_model_tools_follow_model_permissions(alice: User, librarian: User) -> None:
    assert_cannot_call(caller(alice), "library.authors.list")
    alice.user_permissions.add(Permission.objects.get(codename="view_author"))
    assert (
        mcp(alice, "library.authors.get", {"id": author_id("Ursula K. Le Guin")}).value["name"] == "Ursula K. Le Guin"
    )
    assert_cannot_call(caller(alice), "library.authors.create", {"name": "Someone"})


def test_a_token_granted_reading_cannot_write_authors(librarian: User) -> None:
    reading = caller(librarian, frozenset({"library:read"}))  # widened to "mcp" too, as a credential's scopes are
    listed = reading.call_tool("library.authors.list", {})
    assert Answer(listed).value["results"]
    for tool, arguments in [
        ("library.authors.create", {"name": "Ada Lovelace"}),
        ("library.authors.update", {"id": author_id("Carl Sagan"), "born": 1}),
        ("library.authors.delete", {"id": author_id("Carl Sagan")}),
    ]:
        assert_cannot_call(reading, tool, arguments)
    assert not Author.objects.filter(name="Ada Lovelace").exists()
    assert Author.objects.get(name="Carl Sagan").born == 1934


def test_model_tools_scopes_for_reading_and_writing(registry: CapabilityRegistry) -> None:
    split = ModelTools(Author, actions=list(MODEL_ACTIONS), read_scopes=["r"], write_scopes=["w"], registry=registry)
    assert {c.name.rsplit(".", 1)[1]: set(c.scopes) for c in split.capabilities} == {
        "list": {"r"},
        "get": {"r"},
        "create": {"w"},
        "update": {"w"},
        "delete": {"w"},
    }
    every = ModelTools(Author, actions=list(MODEL_ACTIONS), scopes=["s"], prefix="all", registry=registry)
    assert {frozenset(c.scopes) for c in every.capabilities} == {frozenset({"s"})}
    only_reads = ModelTools(Author, read_scopes=["r"], prefix="reads", registry=registry)
    assert {frozenset(c.scopes) for c in only_reads.capabilities} == {frozenset({"r"})}
    with pytest.raises(DeclarationError, match="scopes= applies to every action"):
        ModelTools(Author, scopes=["s"], write_scopes=["w"], prefix="x", registry=registry)
    with pytest.raises(DeclarationError, match=r"\['create'\] needing no scope at all; give write_scopes="):
        ModelTools(Author, actions=["list", "create"], read_scopes=["r"], prefix="y", registry=registry)


def test_model_writes_validate_and_leave_nothing_on_failure(librarian: User) -> None:
    before = Author.objects.count()
    duplicate = mcp(librarian, "library.authors.create", {"name": "Carl Sagan"})
    assert failure(duplicate) == "invalid_input" and duplicate.failure.details[0]["path"] == "$.name"
    assert Author.objects.count() == before
    created = mcp(librarian, "library.authors.create", {"name": "Ada Lovelace", "born": 1815}).value
    updated = mcp(librarian, "library.authors.update", {"id": created["id"], "born": 1816}).value
    assert updated == {"id": created["id"], "name": "Ada Lovelace", "born": 1816}
    assert failure(mcp(librarian, "library.authors.update", {"id": created["id"], "born": -5})) == "invalid_input"
    assert Author.objects.get(pk=created["id"]).born == 1816
    assert failure(mcp(librarian, "library.authors.get", {"id": 999_999})) == "not_found"


def test_model_deletes_need_confirmation(librarian: User) -> None:
    entry = provider.get_sync().get("library.authors.delete")
    assert entry.requires_confirmation and entry.annotations.destructive is True
    sagan = author_id("Carl Sagan")
    assert failure(mcp(librarian, "library.authors.delete", {"id": sagan})) == "confirmation_required"
    assert Author.objects.filter(pk=sagan).exists()


def test_django_filter_parameters_filter_as_over_http(alice: User) -> None:
    over_http = http(alice).get("/api/books/", {"genre": "science", "ordering": "title"}).json()
    over_mcp = mcp(alice, "library.books.list", {"genre": "science", "ordering": "title"}).value
    assert (
        [book["title"] for book in over_mcp["results"]]
        == [book["title"] for book in over_http["results"]]
        == ["Cosmos", "Pale Blue Dot", "Silent Spring"]
    )
    bad = mcp(alice, "library.books.list", {"genre": "poetry"})
    assert failure(bad) == "invalid_input" and bad.failure.details[0]["path"] == "$.genre"


# Bounded strings ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments", "path"),
    [
        ("library.authors.list", {"filters": {"name__icontains": "x" * 60_000}}, "$.filters.name__icontains"),
        ("library.books.list", {"search": "x" * 60_000}, "$.search"),
        ("library.catalogue_page", {"q": "x" * 60_000}, "$.q"),
        ("library.search_books", {"query": "x" * 60_000}, "$.query"),
    ],
)
def test_a_long_search_string_never_reaches_the_database(
    alice: User, caplog: pytest.LogCaptureFixture, tool: str, arguments: dict[str, Any], path: str
) -> None:
    alice.user_permissions.add(Permission.objects.get(codename="view_author"))
    with caplog.at_level(logging.INFO):
        outcome = mcp(alice, tool, arguments)
    assert failure(outcome) == "invalid_input"
    assert outcome.failure.details == [{"path": path, "message": "At most 1000 characters."}]
    assert not [record for record in caplog.records if record.levelno >= logging.WARNING or record.exc_info]


def test_a_search_string_at_the_cap_is_searched(alice: User) -> None:
    alice.user_permissions.add(Permission.objects.get(codename="view_author"))
    listing = mcp(alice, "library.authors.list", {"filters": {"name__icontains": "x" * 1000}}).value
    assert listing == {"results": [], "next_cursor": None}
    assert mcp(alice, "library.books.list", {"search": "x" * 1000}).value["results"] == []
