"""The authenticator chain over HTTP: a real uvicorn (`mcp_live`) and the official SDK client, in both eras.

simplejwt tokens and a project's own DRF scheme call tools with the scopes their mapping grants; what fails gets
our 401 challenge; API keys and DOT tokens work beside them; session cookies only from this site's own pages.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import httpx2
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from mcp import MCPError
from oauth2_provider.models import AccessToken, Application
from rest_framework_simplejwt.tokens import AccessToken as JWT

from mcp_expose.models import ToolCall
from mcp_expose.testing.client import ERA_MODES
from mcp_expose.testing.live import connect_http
from project.library.models import Author, Book

from .live import jsonrpc_body, modern_headers
from .test_authenticators import ADAPTER, GARBAGE_JWT, OURS, SIMPLEJWT, drf, expired_jwt

ERAS = list(ERA_MODES)
era = pytest.mark.parametrize("era", ERAS)
PARTNER = "tests.test_authenticators.PartnerAuthentication"


@pytest.fixture
def configure(settings: Any) -> Any:
    base = dict(django_settings.MCP_EXPOSE)

    def apply(**keys: Any) -> None:
        settings.MCP_EXPOSE = {**base, **keys}

    return apply


@pytest.fixture
def ada(transactional_db: None) -> User:
    return User.objects.create_user("ada", password="x")


@pytest.fixture
def book(transactional_db: None) -> Book:
    author = Author.objects.create(name="Terry Pratchett")
    return Book.objects.create(title="Small Gods", author=author, isbn="4", genre="fiction", copies=2)


def post(url: str, headers: dict[str, str]) -> httpx2.Response:
    return httpx2.post(url, content=jsonrpc_body("tools/list"), headers={**modern_headers("tools/list"), **headers})


def assert_challenged(response: httpx2.Response, url: str, error: str | None = "invalid_token") -> None:
    """Our 401, pointing at the resource metadata (and naming the error only when a credential came)."""
    assert response.status_code == 401, response.text
    challenge = response.headers["www-authenticate"]
    metadata = url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    assert challenge.startswith("Bearer ") and f'resource_metadata="{metadata}"' in challenge
    assert (f'error="{error}"' in challenge) if error else ("error=" not in challenge)
    assert response.json()["error"] == (error or "unauthorized")


@pytest.mark.anyio
@era
async def test_a_jwt_calls_with_exactly_the_scopes_its_mapping_grants(
    mcp_live: Any, configure: Any, ada: User, book: Book, era: str
) -> None:
    configure(AUTHENTICATORS=[*OURS, drf(SIMPLEJWT, scopes=["mcp"], scope_claim="scope")])
    token = JWT.for_user(ada)
    token["scope"] = "library:read"
    async with connect_http(mcp_live.url, str(token), mode=ERA_MODES[era]) as client:
        assert client.protocol_version == era
        names = [tool.name for tool in (await client.list_tools()).tools]
        got = await client.call_tool("library.get_book", {"book_id": book.pk})
        who = await client.call_tool("library.whoami", {})
        with pytest.raises(MCPError) as refused:
            await client.call_tool("library.borrow_book", {"book_id": book.pk})
    assert "library.get_book" in names and "library.borrow_book" not in names
    assert got.structured_content["title"] == "Small Gods"
    assert who.structured_content == {
        "user": "ada",
        "credential": "drf",
        "request_auth": "CallerCredential",
        "client_id": None,
        "scopes": ["library:read", "mcp"],
    }
    assert refused.value.code == -32602  # not OAuth: no step-up, the tool is unknown to this caller
    row = await ToolCall.objects.aget(tool_name="library.get_book")
    assert (row.auth_method, row.username, row.client_id, row.scopes) == ("drf", "ada", "", "library:read mcp")


@pytest.mark.anyio
@era
async def test_a_jwt_without_a_mapping_holds_no_scope(
    mcp_live: Any, configure: Any, ada: User, book: Book, era: str
) -> None:
    configure(AUTHENTICATORS=[*OURS, drf(SIMPLEJWT)])
    token = JWT.for_user(ada)
    token["scope"] = "library:write"
    async with connect_http(mcp_live.url, str(token), mode=ERA_MODES[era]) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        who = await client.call_tool("library.whoami", {})
    assert "library.get_book" not in names and "library.whoami" in names
    assert who.structured_content["scopes"] == []


def test_expired_and_garbage_jwts_get_our_challenge_and_stay_out_of_the_log(
    mcp_live: Any, configure: Any, ada: User, caplog: pytest.LogCaptureFixture
) -> None:
    configure(AUTHENTICATORS=[*OURS, drf(SIMPLEJWT, scopes=["mcp"])])
    expired, garbage = expired_jwt(ada), GARBAGE_JWT
    with caplog.at_level(logging.DEBUG, logger="mcp_expose"):
        for token in (str(expired), garbage):
            assert_challenged(post(mcp_live.url, {"Authorization": f"Bearer {token}"}), mcp_live.url)
        assert_challenged(post(mcp_live.url, {}), mcp_live.url, error=None)
    assert "JWTAuthentication raised InvalidToken" in caplog.text
    assert str(expired) not in caplog.text and garbage not in caplog.text


@pytest.mark.anyio
@era
async def test_a_project_scheme_through_its_own_drf_class(
    mcp_live: Any, configure: Any, ada: User, book: Book, era: str, caplog: pytest.LogCaptureFixture
) -> None:
    partner = {"Authorization": "Partner pk-ada-0123456789"}
    assert_challenged(await sync_to_async(post)(mcp_live.url, partner), mcp_live.url, error=None)  # not by default
    configure(AUTHENTICATORS=[*OURS, drf(PARTNER, scopes=["library:read"], name="partner")])
    async with connect_http(mcp_live.url, None, mode=ERA_MODES[era], headers=partner) as client:
        got = await client.call_tool("library.get_book", {"book_id": book.pk})
        who = await client.call_tool("library.whoami", {})
    assert got.structured_content["title"] == "Small Gods" and who.structured_content["scopes"] == [
        "library:read",
        "mcp",
    ]
    with caplog.at_level(logging.INFO, logger="mcp_expose"):
        refused = await sync_to_async(post)(mcp_live.url, {"Authorization": "Partner pk-guessed-secret"})
    assert_challenged(refused, mcp_live.url)
    assert "partner raised AuthenticationFailed" in caplog.text and "pk-guessed-secret" not in caplog.text


@pytest.mark.anyio
@era
@pytest.mark.parametrize("with_adapter", [False, True])
async def test_api_keys_and_dot_tokens_still_work(
    mcp_live: Any, configure: Any, ada: User, book: Book, era: str, with_adapter: bool
) -> None:
    if with_adapter:
        configure(AUTHENTICATORS=[*OURS, drf(SIMPLEJWT, scopes=["library:write"]), drf(PARTNER)])
    app = await Application.objects.acreate(
        name="app", client_id="app-1", client_type="public", authorization_grant_type="authorization-code"
    )
    await AccessToken.objects.acreate(
        user=ada,
        application=app,
        token="dot-access-token-1",
        scope="mcp library:read",
        expires=timezone.now() + timedelta(hours=1),
        resource=[mcp_live.url],
    )
    async with mcp_live.connect(ada, ["library:read"], era=era) as client:
        by_key = await client.call_tool("library.whoami", {})
    async with connect_http(mcp_live.url, "dot-access-token-1", mode=ERA_MODES[era]) as client:
        by_token = await client.call_tool("library.whoami", {})
        got = await client.call_tool("library.get_book", {"book_id": book.pk})
    assert (by_key.structured_content["credential"], by_key.structured_content["scopes"]) == (
        "api_key",
        ["library:read", "mcp"],
    )
    assert by_token.structured_content["credential"] == "oauth" and by_token.structured_content["client_id"] == "app-1"
    assert got.structured_content["title"] == "Small Gods"


def login_cookie(user: User) -> str:
    client = Client()
    client.force_login(user)
    return f"{django_settings.SESSION_COOKIE_NAME}={client.cookies[django_settings.SESSION_COOKIE_NAME].value}"


def test_a_session_cookie_is_refused_by_default(mcp_live: Any, ada: User) -> None:
    own = {"Cookie": login_cookie(ada), "Origin": mcp_live.base_url, "Sec-Fetch-Site": "same-origin"}
    assert_challenged(post(mcp_live.url, own), mcp_live.url, error=None)


@pytest.mark.anyio
@era
async def test_a_session_cookie_from_this_sites_own_page(
    mcp_live: Any, configure: Any, ada: User, book: Book, era: str
) -> None:
    configure(SESSION_AUTH=True, SESSION_SCOPES=["library:read"])
    cookie = await sync_to_async(login_cookie)(ada)
    page = {"Cookie": cookie, "Origin": mcp_live.base_url, "Sec-Fetch-Site": "same-origin"}
    async with connect_http(mcp_live.url, None, mode=ERA_MODES[era], headers=page) as client:
        got = await client.call_tool("library.get_book", {"book_id": book.pk})
        who = await client.call_tool("library.whoami", {})
    assert got.structured_content["title"] == "Small Gods"
    assert (who.structured_content["credential"], who.structured_content["scopes"]) == (
        "session",
        ["library:read", "mcp"],
    )
    row = await ToolCall.objects.aget(tool_name="library.get_book")
    assert (row.auth_method, row.username) == ("session", "ada")


def test_a_session_cookie_is_refused_on_requests_another_site_could_make(
    mcp_live: Any, configure: Any, ada: User
) -> None:
    configure(SESSION_AUTH=True, SESSION_SCOPES=["library:read"])
    cookie = login_cookie(ada)
    for headers in (
        {"Cookie": cookie, "Origin": mcp_live.base_url, "Sec-Fetch-Site": "cross-site"},
        {"Cookie": cookie},  # no Origin: a form post, a non-browser replaying a cookie
        {"Cookie": cookie, "Sec-Fetch-Site": "cross-site"},
    ):
        refused = post(mcp_live.url, headers)
        assert_challenged(refused, mcp_live.url, error=None)
        assert "same-origin request from this site's own pages" in refused.json()["error_description"]
    # A foreign Origin never gets as far as the cookie: the edge refuses it first.
    foreign = post(mcp_live.url, {"Cookie": cookie, "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"})
    assert foreign.status_code == 403 and foreign.json()["error"] == "forbidden_origin"
    assert post(mcp_live.url, {"Cookie": cookie, "Origin": mcp_live.base_url}).status_code == 200


def test_a_misconfigured_chain_says_so_and_answers_no_one(
    mcp_live: Any, configure: Any, caplog: pytest.LogCaptureFixture
) -> None:
    configure(AUTHENTICATORS=[{"CLASS": ADAPTER, "OPTIONS": {"authentication_class": "no.such.Class"}}])
    with caplog.at_level(logging.ERROR, logger="mcp_expose"):
        response = post(mcp_live.url, {"Authorization": "Bearer x"})
    assert response.status_code == 500
    assert (
        "MCP_EXPOSE['AUTHENTICATORS'] is misconfigured" in caplog.text
        and "'no.such.Class' cannot be imported" in caplog.text
    )
