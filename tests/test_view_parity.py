"""A DRF view called through MCP accepts, returns and refuses what it does over HTTP, as the same user.

Each case is one request made both ways: over HTTP with DRF's test client, and through the MCP dispatcher
(the same one the endpoint uses). A write made over HTTP is rolled back before the MCP call, so both start
from the same rows. A new view pattern is one more `Case`.

What the two must agree on:
- HTTP 2xx: the call succeeds with the same data (a paginated list: the same results).
- HTTP 400: `invalid_input` with the same field paths.
- HTTP 401/403: `permission_denied` with the view's own message.
- HTTP 404: `not_found`, or `invalid_input` naming the URL argument when the value cannot be a URL of the
  route at all (documented: the schema carries the route's pattern).
The deliberate differences (docs/how-to/expose-views.md, "Where MCP and HTTP differ") have cases of their own below.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction
from django.test import override_settings
from rest_framework.test import APIClient

from mcp_expose import expose_view
from mcp_expose.calls.dispatch import ToolOutcome, call_tool
from mcp_expose.catalog.compiled import compile_catalog
from mcp_expose.core.content import ContentBundle, EmbeddedResource
from mcp_expose.core.errors import DeclarationError
from mcp_expose.core.principal import Principal, principal_for_user
from mcp_expose.declare.json_schemas import thaw
from mcp_expose.declare.registry import CapabilityRegistry
from project.library import api as library_api
from project.library.models import Author, Book, Loan
from tests.apps.parity import api
from tests.test_views import library  # noqa: F401  (autouse: the seeded library, a clear cache)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.urls("tests.apps.parity.urls")]

SCOPES = frozenset({"mcp", "library:read", "library:write"})
PNG_HEAD = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24


@pytest.fixture
def people() -> dict[str, Any]:
    from django.contrib.auth.models import Permission

    staff = User.objects.create_user("libby", password="pw", is_staff=True)
    staff.user_permissions.add(*Permission.objects.filter(content_type__app_label="library"))
    return {"alice": User.objects.create_user("alice", password="pw"), "staff": staff, "anonymous": None}


@pytest.fixture
def catalog() -> Any:
    registry = CapabilityRegistry()
    with override_settings(ROOT_URLCONF="tests.apps.parity.urls"):
        for view in (
            library_api.BookViewSet,
            library_api.LoanViewSet,
            library_api.AuthorViewSet,
            api.BookReport,
            api.CoverUpload,
            api.TagCheck,
            api.CheapBooks,
            api.AuthorNotes,
            api.Withdrawn,
            api.Shelf,
            api.ReportedBy,
        ):
            expose_view(view, registry=registry, requires_confirmation=False)
        for capability in registry:
            capability.signature  # noqa: B018  (built inside the URLconf it was declared for)
    return compile_catalog(list(registry), {})


def principal(user: User | None) -> Principal:
    if user is None:
        return Principal(user=AnonymousUser(), scopes=SCOPES, method="oauth", client_id="machine")
    return principal_for_user(user, SCOPES, "api_key")


def mcp(catalog: Any, user: User | None, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
    return async_to_sync(call_tool)(catalog, principal(user), tool, arguments)


def http(user: User | None, method: str, path: str, data: Any = None, fmt: str = "json") -> Any:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    with transaction.atomic():
        response = (
            getattr(client, method)(path, data, format=fmt) if data is not None else getattr(client, method)(path)
        )
        transaction.set_rollback(True)  # the MCP call starts from the same rows
    return response


def book(title: str) -> int:
    return Book.objects.get(title=title).pk


@dataclass
class Case:
    id: str
    user: str
    method: str
    path: Callable[[], str] | str
    tool: str
    arguments: Callable[[], dict[str, Any]] | dict[str, Any]
    body: Any = None
    fmt: str = "json"
    # Leave out of the comparison what differs by design (a paginated list's links become cursors).
    results_only: bool = False
    ignore: frozenset[str] = field(default_factory=frozenset)


def _value(value: Any) -> Any:
    return value() if callable(value) else value


CASES = [
    Case(
        "retrieve by integer pk",
        "alice",
        "get",
        lambda: f"/api/books/{book('Cosmos')}/",
        "library.books.retrieve",
        lambda: {"pk": book("Cosmos")},
    ),
    Case(
        "retrieve by digit-string pk",
        "alice",
        "get",
        lambda: f"/api/books/{book('Cosmos')}/",
        "library.books.retrieve",
        lambda: {"pk": str(book("Cosmos"))},
    ),
    Case(
        "retrieve a pk that does not exist",
        "alice",
        "get",
        "/api/books/999999/",
        "library.books.retrieve",
        {"pk": 999999},
    ),
    Case(
        "partial update by integer pk",
        "staff",
        "patch",
        lambda: f"/api/books/{book('SPQR')}/",
        "library.books.partial_update",
        lambda: {"pk": book("SPQR"), "copies": 5},
        body={"copies": 5},
    ),
    Case(
        "several validation errors at once",
        "staff",
        "post",
        "/api/books/",
        "library.books.create",
        {"title": "", "author": 999999, "isbn": "978-0-345-53943-4", "genre": "poetry", "price": "abc"},
        body={"title": "", "author": 999999, "isbn": "978-0-345-53943-4", "genre": "poetry", "price": "abc"},
    ),
    Case(
        "ordering by two fields",
        "alice",
        "get",
        "/api/books/?ordering=-price,title",
        "library.books.list",
        {"ordering": "-price,title"},
        results_only=True,
    ),
    Case(
        "a decimal NumberFilter",
        "alice",
        "get",
        "/parity/cheap/?cheaper_than=12.5",
        "parity.cheap",
        {"cheaper_than": 12.5},
    ),
    Case(
        "a decimal NumberFilter as text",
        "alice",
        "get",
        "/parity/cheap/?cheaper_than=12.5",
        "parity.cheap",
        {"cheaper_than": "12.5"},
    ),
    Case(
        "a ListField within its max_length",
        "alice",
        "post",
        "/parity/tags/",
        "parity.tags",
        {"tags": ["a", "b", "c", "d", "e"]},
        body={"tags": ["a", "b", "c", "d", "e"]},
    ),
    Case(
        "a ListField over its max_length",
        "alice",
        "post",
        "/parity/tags/",
        "parity.tags",
        {"tags": ["a", "b", "c", "d", "e", "f"]},
        body={"tags": ["a", "b", "c", "d", "e", "f"]},
    ),
    Case(
        "a ListField under its min_length",
        "alice",
        "post",
        "/parity/tags/",
        "parity.tags",
        {"tags": []},
        body={"tags": []},
    ),
    Case(
        "staff lend to a member (their serializer)",
        "staff",
        "post",
        "/api/loans/",
        "library.loans.create",
        lambda: {"book": book("Cosmos"), "borrower": "alice", "days": 3},
        body=lambda: {"book": book("Cosmos"), "borrower": "alice", "days": 3},
        ignore=frozenset({"id"}),
    ),
    Case(
        "a member borrows (the default serializer)",
        "alice",
        "post",
        "/api/loans/",
        "library.loans.create",
        lambda: {"book": book("Cosmos")},
        body=lambda: {"book": book("Cosmos")},
        ignore=frozenset({"id"}),
    ),
    Case(
        "staff-only fields from get_fields",
        "staff",
        "post",
        "/parity/author-notes/",
        "parity.author_notes.create",
        {"name": "Italo Calvino", "born": 1923},
        body={"name": "Italo Calvino", "born": 1923},
    ),
    Case(
        "a slug lookup", "alice", "get", "/api/authors/carl-sagan/", "library.authors.retrieve", {"slug": "carl-sagan"}
    ),
    Case(
        "a slug that exists nowhere",
        "alice",
        "get",
        "/api/authors/nobody-at-all/",
        "library.authors.retrieve",
        {"slug": "nobody-at-all"},
    ),
    Case(
        "a slug lookup that renames the slug",
        "staff",
        "patch",
        "/api/authors/carl-sagan/",
        "library.authors.partial_update",
        {"url_slug": "carl-sagan", "slug": "carl-e-sagan"},
        body={"slug": "carl-e-sagan"},
    ),
    Case("a re_path slug", "alice", "get", "/parity/shelves/top-floor/", "parity.shelves", {"shelf": "top-floor"}),
    Case(
        "an anonymous writer",
        "anonymous",
        "post",
        "/api/books/",
        "library.books.create",
        {"title": "T", "author": 1, "isbn": "1"},
        body={"title": "T", "author": 1, "isbn": "1"},
    ),
    Case(
        "a member may not write books",
        "alice",
        "post",
        "/api/books/",
        "library.books.create",
        {"title": "T", "author": 1, "isbn": "1"},
        body={"title": "T", "author": 1, "isbn": "1"},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_mcp_answers_as_http_does(case: Case, people: dict[str, Any], catalog: Any) -> None:
    user = people[case.user]
    response = http(user, case.method, _value(case.path), _value(case.body), case.fmt)
    outcome = mcp(catalog, user, case.tool, _value(case.arguments))
    status = response.status_code
    if status < 300:
        assert outcome.failure is None, outcome.failure
        expected, got = response.json(), outcome.value
        if case.results_only:
            expected, got = expected["results"], got["results"]
        assert _without(got, case.ignore) == _without(expected, case.ignore)
    elif status == 400:
        assert outcome.failure is not None and outcome.failure.code == "invalid_input"
        assert {problem["path"] for problem in outcome.failure.details} == set(_paths(response.json()))
    elif status in (401, 403):
        assert outcome.failure is not None and outcome.failure.code == "permission_denied"
        assert outcome.failure.message == response.json()["detail"]
    elif status == 404:
        assert outcome.failure is not None and outcome.failure.code == "not_found", outcome.failure
    else:
        pytest.fail(f"no rule for HTTP {status}")


def _without(value: Any, keys: frozenset[str]) -> Any:
    return {key: item for key, item in value.items() if key not in keys} if isinstance(value, dict) else value


def _paths(errors: Any, path: str = "$") -> list[str]:
    if isinstance(errors, dict):
        return [found for key, item in errors.items() for found in _paths(item, f"{path}.{key}")]
    if isinstance(errors, list) and errors and not all(isinstance(item, str) for item in errors):
        return [found for index, item in enumerate(errors) for found in _paths(item, f"{path}[{index}]")]
    return [path]


def test_the_multiple_errors_case_reports_what_only_the_view_knows(people: dict[str, Any], catalog: Any) -> None:
    """The schema alone sees one problem (the genre); the view sees five, and all five are reported."""
    outcome = mcp(
        catalog,
        people["staff"],
        "library.books.create",
        {"title": "", "author": 999999, "isbn": "978-0-345-53943-4", "genre": "poetry", "price": "abc"},
    )
    assert {problem["path"] for problem in outcome.failure.details} == {
        "$.title",
        "$.author",
        "$.isbn",
        "$.genre",
        "$.price",
    }
    assert Book.objects.filter(title="").count() == 0


# Each caller sees, and is checked against, the schema the view takes from them ----------------------------------


def test_a_per_user_serializer_gives_each_caller_their_schema(people: dict[str, Any], catalog: Any) -> None:
    entry = catalog.get("library.loans.create")
    assert entry.varies_by_caller
    staff = thaw(entry.input_schema_for(principal(people["staff"])))["properties"]
    member = thaw(entry.input_schema_for(principal(people["alice"])))["properties"]
    assert "borrower" in staff and "borrower" not in member
    notes = catalog.get("parity.author_notes.create")
    assert "born" in thaw(notes.input_schema_for(principal(people["staff"])))["properties"]
    assert "born" not in thaw(notes.input_schema_for(principal(people["alice"])))["properties"]
    # A view that never reads the caller has one schema for everyone.
    assert not catalog.get("library.books.create").varies_by_caller


def test_a_member_naming_a_borrower_is_refused_where_http_ignores_it(people: dict[str, Any], catalog: Any) -> None:
    """Documented difference: a key the caller's serializer lacks is refused, not silently dropped."""
    alice, staff = people["alice"], people["staff"]
    response = http(alice, "post", "/api/loans/", {"book": book("Cosmos"), "borrower": "libby"})
    assert response.status_code == 201 and response.json()["borrower"] == "alice"  # HTTP drops it
    outcome = mcp(catalog, alice, "library.loans.create", {"book": book("Cosmos"), "borrower": "libby"})
    assert outcome.failure.code == "invalid_input"
    assert outcome.failure.details == [
        {"path": "$.borrower", "message": "Unexpected argument; allowed here: book, days."}
    ]
    assert not Loan.objects.filter(borrower=staff).exists()


# URL arguments -------------------------------------------------------------------------------------------------


def test_a_value_that_cannot_be_in_the_url_is_refused_naming_the_argument(people: dict[str, Any], catalog: Any) -> None:
    assert http(people["alice"], "get", "/api/authors/Carl%20Sagan/").status_code == 404
    outcome = mcp(catalog, people["alice"], "library.authors.retrieve", {"slug": "Carl Sagan"})
    assert outcome.failure.code == "invalid_input" and [p["path"] for p in outcome.failure.details] == ["$.slug"]
    shelf = thaw(catalog.get("parity.shelves").input_schema)["properties"]["shelf"]
    assert shelf["pattern"] == "^(?:[a-z0-9-]+)$"
    pk = thaw(catalog.get("library.books.retrieve").input_schema)["properties"]["pk"]
    assert pk["anyOf"][0] == {"type": "integer"} and pk["anyOf"][1]["pattern"] == "^-?[0-9]+$"


def test_a_lookup_clashing_with_a_field_is_named_url_slug(people: dict[str, Any], catalog: Any) -> None:
    properties = thaw(catalog.get("library.authors.partial_update").input_schema)
    assert properties["required"] == ["url_slug"] and {"url_slug", "slug"} <= set(properties["properties"])
    outcome = mcp(
        catalog, people["staff"], "library.authors.partial_update", {"url_slug": "carl-sagan", "slug": "sagan"}
    )
    assert outcome.value["slug"] == "sagan" and Author.objects.filter(slug="sagan", name="Carl Sagan").exists()


# Answers that are not DRF data ---------------------------------------------------------------------------------


def test_a_csv_response_comes_back_as_text_with_its_media_type(people: dict[str, Any], catalog: Any) -> None:
    response = http(people["alice"], "get", "/parity/report.csv")
    outcome = mcp(catalog, people["alice"], "parity.report.csv", {})
    assert isinstance(outcome.value, ContentBundle)
    [item] = outcome.value.items
    assert isinstance(item, EmbeddedResource) and item.mime_type == "text/csv"
    assert item.text == response.content.decode() and "Cosmos,18.00" in item.text
    assert item.uri == "http://localhost/parity/report.csv"


def test_an_upload_travels_as_base64_and_arrives_as_over_http(people: dict[str, Any], catalog: Any) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("cover.png", PNG_HEAD, content_type="image/png")
    response = http(people["alice"], "post", "/parity/covers/", {"title": "Cosmos", "cover": upload}, fmt="multipart")
    schema = thaw(catalog.get("parity.covers").input_schema)
    assert schema["properties"]["cover"]["required"] == ["filename", "content_base64"]
    outcome = mcp(
        catalog,
        people["alice"],
        "parity.covers",
        {
            "title": "Cosmos",
            "cover": {
                "filename": "cover.png",
                "content_base64": base64.b64encode(PNG_HEAD).decode(),
                "content_type": "image/png",
            },
        },
    )
    assert response.status_code == 201 and outcome.value == response.json()
    broken = mcp(
        catalog,
        people["alice"],
        "parity.covers",
        {"title": "Cosmos", "cover": {"filename": "cover.png", "content_base64": "not base64!"}},
    )
    assert broken.failure.code == "invalid_input" and broken.failure.details[0]["path"] == "$.cover.content_base64"


def test_an_upload_cannot_write_the_multipart_headers_or_parts(people: dict[str, Any], catalog: Any) -> None:
    """What the caller sends goes into a multipart body: it can neither break a part's headers nor end a part."""
    cover = {"filename": "cover.png", "content_base64": base64.b64encode(PNG_HEAD).decode()}
    for hostile in (
        {"filename": 'x.png"; name="title'},
        {"filename": "a\r\nb.png"},
        {"content_type": 'image/png\r\nContent-Disposition: form-data; name="title"'},
    ):
        outcome = mcp(catalog, people["alice"], "parity.covers", {"title": "T", "cover": {**cover, **hostile}})
        assert outcome.failure.code == "invalid_input", hostile
        assert outcome.failure.details[0]["path"].startswith("$.cover."), outcome.failure.details
    smuggling = 'Cosmos\r\n--BoUnDaRyStRiNg\r\nContent-Disposition: form-data; name="title"\r\n\r\nforged'
    outcome = mcp(catalog, people["alice"], "parity.covers", {"title": smuggling[:100], "cover": cover})
    assert outcome.value["title"] == smuggling[:100]  # one field, as sent


def test_a_view_no_call_could_reach_is_refused_at_declaration() -> None:
    registry = CapabilityRegistry()
    with override_settings(ROOT_URLCONF="tests.apps.parity.urls"):
        [capability] = expose_view(api.RawUpload, registry=registry)
        with pytest.raises(DeclarationError, match="parses no multipart/form-data"):
            capability.signature  # noqa: B018
        assert registry.resolution_problems()[0][0] == "mcp_expose.E012"


def test_every_4xx_has_a_code_of_its_own(people: dict[str, Any], catalog: Any) -> None:
    assert http(people["alice"], "get", "/parity/withdrawn/").status_code == 410
    outcome = mcp(catalog, people["alice"], "parity.withdrawn", {})
    assert outcome.failure.code == "gone" and outcome.failure.message == "This title was withdrawn."
    assert outcome.failure.details == {"status": 410}


@override_settings(ALLOWED_HOSTS=["localhost", "library.example.org"])
def test_links_follow_the_base_url_when_there_is_no_host(people: dict[str, Any], catalog: Any) -> None:
    from mcp_expose.calls.dispatch import CallRequest

    plain = mcp(catalog, people["alice"], "parity.link", {})
    assert plain.value == {"link": "http://localhost/api/books/"}
    behind_tls = async_to_sync(call_tool)(
        catalog, principal(people["alice"]), "parity.link", {}, CallRequest(base_url="https://library.example.org")
    )
    assert behind_tls.value == {"link": "https://library.example.org/api/books/"}


def test_mcp_tools_shows_each_user_their_schema(people: dict[str, Any]) -> None:
    import io
    import json

    from django.core.management import call_command

    def loan_arguments(username: str) -> set[str]:
        out = io.StringIO()
        call_command("mcp_tools", "--user", username, "--json", stdout=out)
        tools = {tool["name"]: tool for tool in json.loads(out.getvalue())["tools"]}
        return set(tools["library.loans.create"]["inputSchema"]["properties"])

    assert loan_arguments("libby") == {"book", "borrower", "days"}
    assert loan_arguments("alice") == {"book", "days"}


def test_a_plain_views_404_and_400_pages_are_not_found_and_invalid_input(
    people: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    from tests.apps.parity import pages

    registry = CapabilityRegistry()
    with override_settings(ROOT_URLCONF="tests.apps.parity.urls"):
        expose_view(pages.book_title, name="parity.book_title", registry=registry, read_only=True)
        expose_view(
            pages.shelf_mark,
            name="parity.shelf_mark",
            registry=registry,
            read_only=True,
            query_params={"mark": "A shelf mark"},
        )
        for capability in registry:
            capability.signature  # noqa: B018
        catalog = compile_catalog(list(registry), {})
        missing = Book.objects.order_by("-pk").first().pk + 1
        assert http(people["alice"], "get", f"/parity/pages/books/{missing}/title/").status_code == 404
        assert http(people["alice"], "get", "/parity/pages/shelf-mark/?mark=../x").status_code == 400
        caplog.clear()  # Django's own handler logged the HTTP refusals; from here on, only the MCP calls
        caplog.set_level("INFO", logger="mcp_expose")
        found = mcp(catalog, people["alice"], "parity.book_title", {"book_id": book("Cosmos")})
        assert found.failure is None and found.value == {"title": "Cosmos"}
        gone = mcp(catalog, people["alice"], "parity.book_title", {"book_id": missing})
        assert gone.failure is not None and (gone.failure.code, gone.failure.message) == ("not_found", "Not found.")
        probe = mcp(catalog, people["alice"], "parity.shelf_mark", {"mark": "../x"})
        assert probe.failure is not None and probe.failure.code == "invalid_input", probe.failure
        assert probe.failure.incident is None and "../x" not in probe.failure.message
        assert mcp(catalog, people["alice"], "parity.shelf_mark", {"mark": "b12"}).value == {"mark": "B12"}
    assert "tried to leave the shelves" not in caplog.text  # the view's message stays out of our log
    assert "SuspiciousOperation" in caplog.text  # which names what the view raised
