"""A Django Ninja operation called through MCP accepts, returns and refuses what it does over HTTP, as the same user.

Each case is one request made both ways: over HTTP with Django's test client (a write rolled back before the MCP
call, so both start from the same rows), and through MCP with the official SDK client in memory, in both protocol
eras, to tools declared by one `expose_ninja` call over tests/apps/ninja_parity/api.py.

What the two must agree on:
- HTTP 2xx: the call succeeds with the same data (a list comes under "result", as structured content carries it);
- HTTP 422 (Ninja's validation): `invalid_input` with the path of each argument that failed;
- HTTP 401/403: `permission_denied`; 404: `not_found`; 409: `conflict`; another 4xx: its own code; each with the
  operation's message.
The deliberate differences (docs/how-to/expose-ninja.md, "Where MCP and HTTP differ") have cases of their own.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client, override_settings

from mcp_expose import expose_ninja
from mcp_expose.core.errors import DeclarationError
from mcp_expose.declare.json_schemas import thaw
from mcp_expose.declare.registry import CapabilityRegistry
from mcp_expose.testing import McpTestClient
from mcp_expose.testing.assertions import assert_cannot_call, assert_tool_error, assert_tool_result
from project.library.models import Author, Book
from tests.apps.ninja_parity import api as parity
from tests.test_views import library  # noqa: F401  (autouse: the seeded library, a clear cache)

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.apps.ninja_parity.urls")]

ERAS = ["2026-07-28", "2025-11-25"]
CODES = {401: "permission_denied", 403: "permission_denied", 404: "not_found", 409: "conflict", 410: "gone"}
PNG_HEAD = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24


@pytest.fixture
def people() -> dict[str, User | None]:
    return {
        "alice": User.objects.create_user("alice", password="pw"),
        "staff": User.objects.create_user("libby", password="pw", is_staff=True),
        "boss": User.objects.create_superuser("boss", password="pw"),
        "anonymous": None,
    }


@pytest.fixture
def registry() -> CapabilityRegistry:
    registry = CapabilityRegistry()
    with override_settings(ROOT_URLCONF="tests.apps.ninja_parity.urls"):
        expose_ninja(parity.api, registry=registry, requires_confirmation=False)
        for capability in registry:
            capability.signature  # noqa: B018  (built inside the URLconf it was declared for)
    return registry


@pytest.fixture
def anonymous_allowed(settings: Any) -> None:
    settings.MCP_EXPOSE = {**settings.MCP_EXPOSE, "ALLOW_ANONYMOUS": True}


def book(title: str) -> Book:
    return Book.objects.get(title=title)


def author(name: str) -> Author:
    return Author.objects.get(name=name)


def over_http(user: User | None, method: str, path: str, body: Any = None, **options: Any) -> Any:
    client = Client()
    if user is not None:
        client.force_login(user)
    with transaction.atomic():
        if body is not None:
            response = getattr(client, method)(path, json.dumps(body), content_type="application/json", **options)
        else:
            response = getattr(client, method)(path, **options)
        transaction.set_rollback(True)  # the MCP call starts from the same rows
    return response


def over_mcp(registry: CapabilityRegistry, user: User | None, era: str, tool: str, arguments: dict[str, Any]) -> Any:
    return McpTestClient(user, era=era, registry=registry).call_tool(tool, arguments)


def ninja_paths(response: Any, renamed: dict[str, str] | None = None) -> set[str]:
    """The argument paths a 422's errors name: the field after the source (and a body schema's own name)."""
    paths = set()
    for error in response.json()["detail"]:
        source, *rest = error["loc"]
        if source == "body" and rest and rest[0] == "payload":
            rest = rest[1:]
        name, *inner = rest
        name = (renamed or {}).get(name, name)
        paths.add("$." + name + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in inner))
    return paths


def agree(response: Any, result: Any, renamed: dict[str, str] | None = None) -> None:
    """The MCP result says what the HTTP response says (see the module's docstring)."""
    status = response.status_code
    if status < 300:
        data = response.json() if response.content else None
        assert_tool_result(result, data if isinstance(data, dict) else {"result": data})
        return
    detail = response.json()["detail"]
    if status == 422:
        error = assert_tool_error(result, "invalid_input")
        assert {problem["path"] for problem in error["details"]} == ninja_paths(response, renamed)
        return
    error = assert_tool_error(result, CODES[status])
    assert error["message"] == detail


@dataclass
class Case:
    id: str
    status: int  # what HTTP answers: each case shows the behaviour it names, not two equal failures
    user: str
    method: str
    path: Callable[[], str]
    tool: str
    arguments: Callable[[], dict[str, Any]]
    body: Callable[[], Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    renamed: dict[str, str] = field(default_factory=dict)  # a path parameter's name → its argument's


NEW_BOOK = {"title": "Pale Blue Dot", "isbn": "978-0-345-37659-5", "genre": "science", "copies": 2}

CASES = [
    Case(
        "path and flattened query parameters",
        200,
        "alice",
        "get",
        lambda: f"/ninja-parity/parity/authors/{author('Carl Sagan').pk}/books?genre=science&min_copies=1",
        "ninja_parity.parity.author_books",
        lambda: {"author_id": author("Carl Sagan").pk, "genre": "science", "min_copies": 1},
    ),
    Case(
        "a path parameter that matches nothing",
        404,
        "alice",
        "get",
        lambda: "/ninja-parity/parity/authors/999999/books",
        "ninja_parity.parity.author_books",
        lambda: {"author_id": 999999},
    ),
    Case(
        "a nested body",
        201,
        "alice",
        "post",
        lambda: f"/ninja-parity/parity/authors/{author('Carl Sagan').pk}/books",
        "ninja_parity.parity.add_book",
        lambda: {
            "author_id": author("Carl Sagan").pk,
            **NEW_BOOK,
            "note": {"text": "Signed", "tags": [{"name": "gift"}]},
        },
        body=lambda: {**NEW_BOOK, "note": {"text": "Signed", "tags": [{"name": "gift"}]}},
    ),
    Case(
        "a body refused by the schema's constraints, nested ones included",
        422,
        "alice",
        "post",
        lambda: f"/ninja-parity/parity/authors/{author('Carl Sagan').pk}/books",
        "ninja_parity.parity.add_book",
        lambda: {
            "author_id": author("Carl Sagan").pk,
            **NEW_BOOK,
            "copies": 500,
            "note": {"text": "x", "tags": [{"name": ""}]},
        },
        body=lambda: {**NEW_BOOK, "copies": 500, "note": {"text": "x", "tags": [{"name": ""}]}},
    ),
    Case(
        "a body refused by a validator only the operation knows",
        422,
        "alice",
        "post",
        lambda: f"/ninja-parity/parity/authors/{author('Carl Sagan').pk}/books",
        "ninja_parity.parity.add_book",
        lambda: {"author_id": author("Carl Sagan").pk, **NEW_BOOK, "title": "PALE BLUE DOT"},
        body=lambda: {**NEW_BOOK, "title": "PALE BLUE DOT"},
    ),
    Case(
        "an HttpError 409",
        409,
        "alice",
        "post",
        lambda: f"/ninja-parity/parity/authors/{author('Carl Sagan').pk}/books",
        "ninja_parity.parity.add_book",
        lambda: {"author_id": author("Carl Sagan").pk, **NEW_BOOK, "isbn": book("Cosmos").isbn},
        body=lambda: {**NEW_BOOK, "isbn": book("Cosmos").isbn},
    ),
    Case(
        "a path parameter sharing a body field's name",
        200,
        "alice",
        "put",
        lambda: f"/ninja-parity/parity/books/{book('Cosmos').isbn}",
        "ninja_parity.parity.replace_book",
        lambda: {"url_isbn": book("Cosmos").isbn, **NEW_BOOK},
        body=lambda: NEW_BOOK,
        renamed={"isbn": "url_isbn"},
    ),
    Case(
        "an HttpError 410",
        410,
        "alice",
        "get",
        lambda: "/ninja-parity/parity/withdrawn/7",
        "ninja_parity.parity.withdrawn",
        lambda: {"book_id": 7},
    ),
    Case(
        "an HttpError 403",
        403,
        "alice",
        "get",
        lambda: "/ninja-parity/parity/reserved",
        "ninja_parity.parity.reserved",
        lambda: {},
    ),
    Case(
        "PageNumberPagination",
        200,
        "alice",
        "get",
        lambda: "/ninja-parity/parity/pages/number?page=2",
        "ninja_parity.parity.by_page",
        lambda: {"page": 2},
    ),
    Case(
        "LimitOffsetPagination",
        200,
        "alice",
        "get",
        lambda: "/ninja-parity/parity/pages/offset?limit=2&offset=3",
        "ninja_parity.parity.by_offset",
        lambda: {"limit": 2, "offset": 3},
    ),
    Case(
        "a custom paginator",
        200,
        "alice",
        "get",
        lambda: "/ninja-parity/parity/pages/window?start=1&size=3",
        "ninja_parity.parity.by_window",
        lambda: {"start": 1, "size": 3},
    ),
    Case(
        "a page past the end",
        200,
        "alice",
        "get",
        lambda: "/ninja-parity/parity/pages/number?page=99",
        "ninja_parity.parity.by_page",
        lambda: {"page": 99},
    ),
    Case(
        "session auth, signed in",
        200,
        "alice",
        "get",
        lambda: "/ninja-parity/parity/me",
        "ninja_parity.parity.me",
        lambda: {},
    ),
    Case(
        "session auth for superusers, as a member",
        401,
        "alice",
        "delete",
        lambda: f"/ninja-parity/parity/books/{book('Cosmos').isbn}",
        "ninja_parity.parity.remove_book",
        lambda: {"isbn": book("Cosmos").isbn},
    ),
    Case(
        "session auth for superusers, as one",
        204,
        "boss",
        "delete",
        lambda: f"/ninja-parity/parity/books/{book('Cosmos').isbn}",
        "ninja_parity.parity.remove_book",
        lambda: {"isbn": book("Cosmos").isbn},
    ),
    Case(
        "an async operation",
        200,
        "alice",
        "get",
        lambda: f"/ninja-parity/parity/async/books/{book('Cosmos').pk}",
        "ninja_parity.parity.async_book",
        lambda: {"book_id": book("Cosmos").pk},
    ),
    Case(
        "an async operation's HttpError 404",
        404,
        "alice",
        "get",
        lambda: "/ninja-parity/parity/async/books/999999",
        "ninja_parity.parity.async_book",
        lambda: {"book_id": 999999},
    ),
    Case(
        "an operation of a router mounted inside another",
        200,
        "alice",
        "get",
        lambda: "/ninja-parity/parity/shelves/science/count",
        "ninja_parity.shelves.shelf_count",
        lambda: {"shelf": "science"},
    ),
    Case(
        "a header parameter",
        200,
        "alice",
        "get",
        lambda: "/ninja-parity/parity/shelf-mark",
        "ninja_parity.parity.shelf_mark",
        lambda: {"X-Branch": "north"},
        options={"headers": {"X-Branch": "north"}},
    ),
]


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_mcp_agrees_with_http(case: Case, era: str, people: dict[str, Any], registry: CapabilityRegistry) -> None:
    user = people[case.user]
    response = over_http(user, case.method, case.path(), case.body() if case.body else None, **case.options)
    assert response.status_code == case.status, response.content
    result = over_mcp(registry, user, era, case.tool, case.arguments())
    agree(response, result, case.renamed)


@pytest.mark.parametrize("era", ERAS)
def test_a_write_through_mcp_is_kept_as_over_http(
    era: str, people: dict[str, Any], registry: CapabilityRegistry
) -> None:
    sagan = author("Carl Sagan")
    result = over_mcp(
        registry, people["alice"], era, "ninja_parity.parity.add_book", {"author_id": sagan.pk, **NEW_BOOK}
    )
    assert not result.is_error
    assert Book.objects.filter(isbn=NEW_BOOK["isbn"], author=sagan, copies=2).exists()


@pytest.mark.parametrize("era", ERAS)
def test_an_anonymous_caller_is_refused_by_session_auth_as_over_http(
    era: str, anonymous_allowed: None, registry: CapabilityRegistry
) -> None:
    response = over_http(None, "get", "/ninja-parity/parity/me")
    assert response.status_code == 401
    agree(response, over_mcp(registry, None, era, "ninja_parity.parity.me", {}))


@pytest.mark.parametrize("era", ERAS)
def test_an_api_token_scheme_is_replaced_by_the_mcp_credential(
    era: str, people: dict[str, Any], anonymous_allowed: None, registry: CapabilityRegistry
) -> None:
    """Documented difference: the API's own token is for HTTP clients; an MCP caller holds an MCP credential,
    which stands in for it. Without any credential, both refuse."""
    with_token = over_http(
        None, "get", "/ninja-parity/parity/token-shelf", headers={"authorization": "Bearer library-token"}
    )
    agree(with_token, over_mcp(registry, people["alice"], era, "ninja_parity.parity.token_shelf", {}))
    without = over_http(None, "get", "/ninja-parity/parity/token-shelf")
    assert without.status_code == 401
    agree(without, over_mcp(registry, None, era, "ninja_parity.parity.token_shelf", {}))


def test_session_auth_gives_the_user_and_a_replaced_scheme_the_credential_tools_see(
    people: dict[str, Any], registry: CapabilityRegistry
) -> None:
    result = over_mcp(registry, people["alice"], ERAS[0], "ninja_parity.parity.me", {})
    assert_tool_result(result, {"username": "alice", "auth_is_the_user": True})


@pytest.mark.parametrize("era", ERAS)
def test_a_csv_answer_comes_back_as_text_with_its_media_type(
    era: str, people: dict[str, Any], registry: CapabilityRegistry
) -> None:
    response = over_http(people["alice"], "get", "/ninja-parity/parity/report.csv")
    result = over_mcp(registry, people["alice"], era, "ninja_parity.parity.report", {})
    assert not result.is_error
    [block] = result.content
    assert block.type == "resource" and block.resource.mime_type == "text/csv"
    assert block.resource.text == response.content.decode() and "Cosmos," in block.resource.text


@pytest.mark.parametrize("era", ERAS)
def test_an_upload_travels_as_base64_and_arrives_as_over_http(
    era: str, people: dict[str, Any], registry: CapabilityRegistry
) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    client = Client()
    client.force_login(people["alice"])
    upload = SimpleUploadedFile("cover.png", PNG_HEAD, content_type="image/png")
    response = client.post("/ninja-parity/parity/covers", {"cover": upload, "caption": "Front"})
    assert response.status_code == 200
    arguments = {
        "cover": {
            "filename": "cover.png",
            "content_base64": base64.b64encode(PNG_HEAD).decode(),
            "content_type": "image/png",
        },
        "caption": "Front",
    }
    agree(response, over_mcp(registry, people["alice"], era, "ninja_parity.parity.upload_cover", arguments))


def test_the_schemas_are_closed_reference_free_and_keep_ninjas_constraints(registry: CapabilityRegistry) -> None:
    by_key = {capability.key: capability for capability in registry}
    add = thaw(by_key["ninja_parity.parity.add_book"].signature.input_schema)
    assert "$ref" not in json.dumps(add) and "$defs" not in json.dumps(add)
    assert add["additionalProperties"] is False and add["required"] == ["author_id", "title", "isbn"]
    assert add["properties"]["copies"] == {"default": 1, "maximum": 100, "minimum": 0, "type": "integer"}
    assert add["properties"]["title"]["description"] == "The title as printed."
    note = add["properties"]["note"]["anyOf"][0]
    assert (
        note["additionalProperties"] is False and note["properties"]["tags"]["items"]["additionalProperties"] is False
    )
    replace = thaw(by_key["ninja_parity.parity.replace_book"].signature.input_schema)
    assert replace["properties"]["url_isbn"]["pattern"] == "^[^/]+$" and "isbn" in replace["properties"]
    cover = thaw(by_key["ninja_parity.parity.upload_cover"].signature.input_schema)
    assert cover["properties"]["cover"]["required"] == ["filename", "content_base64"]


def test_an_output_schema_is_served_only_where_ninja_enforces_one(registry: CapabilityRegistry) -> None:
    by_key = {capability.key: capability for capability in registry}
    listed = thaw(by_key["ninja_parity.parity.author_books"].signature.output_schema)
    assert listed["required"] == ["result"] and listed["properties"]["result"]["type"] == "array"
    paged = thaw(by_key["ninja_parity.parity.by_page"].signature.output_schema)
    assert set(paged["properties"]) == {"items", "count"}
    assert by_key["ninja_parity.parity.me"].signature.output_schema is None  # no response schema: not enforced
    assert by_key["ninja_parity.parity.report"].signature.output_schema is None


def test_operations_are_chosen_by_name_method_or_path(registry: CapabilityRegistry) -> None:
    chosen = CapabilityRegistry()
    expose_ninja(parity.api, operations=["author_books"], registry=chosen)
    expose_ninja(parity.api, methods=["delete"], registry=chosen)
    expose_ninja(parity.router, api=parity.api, paths=["/reserved"], registry=chosen)
    assert [capability.key for capability in chosen] == [
        "ninja_parity.parity.author_books",
        "ninja_parity.parity.remove_book",
        "ninja_parity.parity.reserved",
    ]
    # A router brings the routers mounted inside it; one of those alone brings only its own.
    whole = CapabilityRegistry()
    expose_ninja(parity.router, api=parity.api, methods=["get"], registry=whole)
    assert "ninja_parity.shelves.shelf_count" in [capability.key for capability in whole]
    inner = CapabilityRegistry()
    expose_ninja(parity.shelves, api=parity.api, name="ninja_parity.shelf_count", registry=inner)
    assert [(capability.key, capability.name) for capability in inner] == [
        ("ninja_parity.shelves.shelf_count", "ninja_parity.shelf_count")
    ]
    assert {capability.key for capability in registry} >= {capability.key for capability in chosen}
    delete = next(capability for capability in chosen if capability.key.endswith("remove_book"))
    assert delete.annotations.destructive and delete.requires_confirmation


def test_declaration_mistakes_are_refused_saying_what_to_do() -> None:
    with pytest.raises(DeclarationError, match="no operation is named \\['nope'\\]"):
        expose_ninja(parity.api, operations=["nope"], registry=CapabilityRegistry())
    with pytest.raises(DeclarationError, match="pass api="):
        expose_ninja(parity.router, registry=CapabilityRegistry())
    with pytest.raises(DeclarationError, match="methods= names \\['fetch'\\]"):
        expose_ninja(parity.api, methods=["fetch"], registry=CapabilityRegistry())
    with pytest.raises(DeclarationError, match="takes a NinjaAPI or a Router"):
        expose_ninja(object(), registry=CapabilityRegistry())


def test_scopes_and_tasks_apply_as_to_every_tool(people: dict[str, Any]) -> None:
    registry = CapabilityRegistry()
    with override_settings(ROOT_URLCONF="tests.apps.ninja_parity.urls"):
        expose_ninja(
            parity.api,
            operations=["author_books", "by_page"],
            scopes=["shelf:read"],
            task={"by_page": "optional"},
            registry=registry,
        )
    assert {capability.key: capability.task_support for capability in registry} == {
        "ninja_parity.parity.author_books": None,
        "ninja_parity.parity.by_page": "optional",
    }
    arguments = {"author_id": author("Carl Sagan").pk}
    without = McpTestClient(people["alice"], scopes=["library:read"], registry=registry)
    assert_cannot_call(without, "ninja_parity.parity.author_books", arguments)
    granted = McpTestClient(people["alice"], scopes=["shelf:read"], registry=registry)
    titles = [
        book["title"]
        for book in granted.call_tool("ninja_parity.parity.author_books", arguments).structured_content["result"]
    ]
    assert titles == ["Cosmos", "Pale Blue Dot"]


def test_an_async_operation_runs_inside_view_middleware_when_one_is_named(
    people: dict[str, Any], registry: CapabilityRegistry, settings: Any
) -> None:
    """Without VIEW_MIDDLEWARE it is awaited on the loop; with it, inside that (sync) chain, as sync ones are."""
    alone = over_mcp(registry, people["alice"], ERAS[0], "ninja_parity.parity.async_tenant", {})
    assert_tool_result(alone, {"tenant": None})
    settings.MCP_EXPOSE = {**settings.MCP_EXPOSE, "VIEW_MIDDLEWARE": ["tests.apps.toolbox.middleware.TenantMiddleware"]}
    inside = over_mcp(registry, people["alice"], ERAS[0], "ninja_parity.parity.async_tenant", {})
    assert_tool_result(inside, {"tenant": "public"})
