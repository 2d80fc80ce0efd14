"""OAuth 2.1 against a live server: django-oauth-toolkit as the authorization server, /mcp as the resource.

Every step is real HTTP against uvicorn: discovery, registration (dynamic and by
metadata document), login, consent, PKCE code exchange, the official SDK client
using the token, step-up, refresh rotation, and the refusals.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from .cimd import serve_documents
from .live import (
    LIVE_SETTINGS,
    LiveServer,
    create_api_key,
    jsonrpc_body,
    modern_headers,
    run_server,
    run_snippet,
)
from .mcp_client import MODES, connect
from .oauth_client import (
    REDIRECT_URI,
    Browser,
    authorize_params,
    exchange_code,
    obtain_token,
    pkce_pair,
    refresh,
    register_client,
)

pytestmark = [pytest.mark.live]


@pytest.fixture(scope="module")
def resource(server: LiveServer) -> str:
    return server.mcp_url


@pytest.fixture(scope="module")
def client_id(server: LiveServer) -> str:
    return register_client(server.base_url)["client_id"]


@pytest.fixture(scope="module")
def reader(server: LiveServer) -> Iterator[Browser]:
    with Browser.logged_in(server.base_url, "reader", "reader") as browser:
        yield browser


@pytest.fixture(scope="module")
def read_token(server: LiveServer, reader: Browser, client_id: str, resource: str) -> dict[str, Any]:
    return obtain_token(reader, server.base_url, client_id, "mcp library:read", resource)


def call(
    server: LiveServer, token: str | None, method: str, params: dict[str, Any] | None = None, **kw: Any
) -> httpx2.Response:
    name = (params or {}).get("name")
    headers = modern_headers(method, name=name)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx2.post(
        server.mcp_url + kw.pop("suffix", ""), content=jsonrpc_body(method, params), headers={**headers, **kw}
    )


def library_tools(names: list[str]) -> list[str]:
    """The demo's own tools (the live settings add a test toolbox beside them)."""
    return [name for name in names if name.startswith("library.")]


def tool_names(response: httpx2.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return [tool["name"] for tool in response.json()["result"]["tools"]]


# Discovery -----------------------------------------------------------------------------------------------


def test_401_points_to_the_metadata_and_the_base_scope(server: LiveServer) -> None:
    response = call(server, None, "tools/list")
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{server.base_url}/.well-known/oauth-protected-resource/mcp", scope="mcp"'
    )
    bad = call(server, "not-a-token", "tools/list")
    assert bad.status_code == 401
    assert bad.headers["www-authenticate"].startswith('Bearer error="invalid_token", error_description=')
    assert 'scope="mcp"' in bad.headers["www-authenticate"]


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"])
def test_protected_resource_metadata_in_both_forms(server: LiveServer, path: str) -> None:
    response = httpx2.get(server.base_url + path)
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "*"
    assert response.json() == {
        "resource": server.mcp_url,
        "authorization_servers": [server.base_url + "/o"],
        "scopes_supported": ["mcp"],
        "bearer_methods_supported": ["header"],
        "resource_name": "Library demo",
    }


def test_authorization_server_metadata_is_what_mcp_clients_need(server: LiveServer) -> None:
    metadata = httpx2.get(server.base_url + "/.well-known/oauth-authorization-server/o").json()
    assert metadata["issuer"] == server.base_url + "/o"
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert metadata["client_id_metadata_document_supported"] is True
    assert "none" in metadata["token_endpoint_auth_methods_supported"]
    assert metadata["registration_endpoint"] == server.base_url + "/o/register/"
    assert metadata["authorization_response_iss_parameter_supported"] is True
    assert set(metadata["grant_types_supported"]) == {"authorization_code", "refresh_token", "client_credentials"}


# The full user flow ----------------------------------------------------------------------------------------


def test_consent_page_says_who_asks_where_the_code_goes_and_what_it_unlocks(
    server: LiveServer, reader: Browser, client_id: str, resource: str
) -> None:
    _, challenge = pkce_pair()
    page = reader.consent_page(authorize_params(client_id, "mcp library:read", challenge, resource))
    assert page.status_code == 200
    text = page.text
    assert "Allow Test Agent to act for you?" in text
    assert "registered itself" in text and "has not been verified" in text
    assert "<strong>127.0.0.1</strong>" in text and "localhost" in text
    assert "Search the library and see your loans" in text and "library.search_books" in text
    assert 'name="allow"' in text


@pytest.mark.anyio
@pytest.mark.parametrize("mode", list(MODES))
async def test_the_sdk_client_lists_and_calls_with_the_token(
    server: LiveServer, read_token: dict[str, Any], mode: str
) -> None:
    assert read_token["scope"] == "mcp library:read"
    async with connect(server.mcp_url, read_token["access_token"], mode) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        result = await client.call_tool("library.search_books", {"query": "earthsea"})
        echo = await client.call_tool("library.echo", {"message": "hi"})
    assert "library.search_books" in names and "library.borrow_book" not in names
    assert result.structured_content["result"][0]["title"] == "A Wizard of Earthsea"
    assert echo.structured_content["caller"] == "reader"


def test_step_up_from_read_to_write_through_a_403_challenge(
    server: LiveServer, reader: Browser, client_id: str, resource: str, read_token: dict[str, Any]
) -> None:
    params = {"name": "library.borrow_book", "arguments": {"book_id": 3}}
    refused = call(server, read_token["access_token"], "tools/call", params)
    assert refused.status_code == 403
    challenge = refused.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="insufficient_scope"')
    assert 'scope="library:write mcp"' in challenge
    assert f'resource_metadata="{server.base_url}/.well-known/oauth-protected-resource/mcp"' in challenge
    # The legacy era names the tool only in the body; the challenge is the same.
    legacy = httpx2.post(
        server.mcp_url,
        content=jsonrpc_body("tools/call", params, modern=False),
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {read_token['access_token']}",
        },
    )
    assert legacy.status_code == 403 and legacy.headers["www-authenticate"] == challenge

    stepped = obtain_token(reader, server.base_url, client_id, "mcp library:read library:write", resource)
    done = call(server, stepped["access_token"], "tools/call", params)
    assert done.status_code == 200
    assert done.json()["result"]["structuredContent"]["book"] == "Cosmos"


def test_header_and_body_must_agree_on_the_tool(server: LiveServer, read_token: dict[str, Any]) -> None:
    body = jsonrpc_body("tools/call", {"name": "library.borrow_book", "arguments": {"book_id": 3}})
    headers = {**modern_headers("tools/call", read_token["access_token"], name="library.echo")}
    response = httpx2.post(server.mcp_url, content=body, headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32020


def test_refresh_tokens_rotate_and_a_replay_revokes_the_family(
    server: LiveServer, reader: Browser, client_id: str, resource: str
) -> None:
    first = obtain_token(reader, server.base_url, client_id, "mcp", resource)
    rotated = refresh(server.base_url, client_id, first["refresh_token"])
    assert rotated.status_code == 200, rotated.text
    second = rotated.json()
    assert second["refresh_token"] != first["refresh_token"]
    assert call(server, second["access_token"], "tools/list").status_code == 200
    replay = refresh(server.base_url, client_id, first["refresh_token"])
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert refresh(server.base_url, client_id, second["refresh_token"]).status_code == 400


def test_dynamic_registration_accepts_what_vs_code_sends(server: LiveServer) -> None:
    registered = register_client(
        server.base_url,
        "Visual Studio Code",
        redirect_uris=["https://vscode.dev/redirect", "http://127.0.0.1/", "http://127.0.0.1:33418/"],
        grant_types=["authorization_code", "refresh_token"],
    )
    assert registered["client_name"] == "Visual Studio Code" and registered["token_endpoint_auth_method"] == "none"


def test_a_client_id_metadata_document_client(server: LiveServer, resource: str, reader: Browser) -> None:
    documents: dict[str, dict[str, Any]] = {}
    with serve_documents(documents) as port:
        client_id = f"https://127.0.0.1:{port}/client.json"
        documents["/client.json"] = {
            "client_id": client_id,
            "client_name": "Metadata Agent",
            "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
        _, challenge = pkce_pair()
        page = reader.consent_page(authorize_params(client_id, "mcp", challenge, resource))
        assert page.status_code == 200, page.text
        assert "Allow Metadata Agent to act for you?" in page.text
        assert "hosted at <strong>127.0.0.1</strong>" in page.text
        token = obtain_token(reader, server.base_url, client_id, "mcp", resource)
    assert library_tools(tool_names(call(server, token["access_token"], "tools/list"))) == [
        "library.echo",
        "library.whoami",
    ]


def test_plain_pkce_is_refused(server: LiveServer, reader: Browser, client_id: str, resource: str) -> None:
    params = authorize_params(client_id, "mcp", "x" * 43, resource)
    params["code_challenge_method"] = "plain"
    redirect = reader.approve(params)
    assert redirect["error"] == ["invalid_request"] and "code" not in redirect


# Refusals ------------------------------------------------------------------------------------------------


def test_a_token_for_another_resource_or_none_is_refused(server: LiveServer, reader: Browser, client_id: str) -> None:
    other = obtain_token(reader, server.base_url, client_id, "mcp", server.base_url + "/other")
    assert call(server, other["access_token"], "tools/list").status_code == 401
    prefix = obtain_token(reader, server.base_url, client_id, "mcp", server.base_url)
    assert call(server, prefix["access_token"], "tools/list").status_code == 401
    without = obtain_token(reader, server.base_url, client_id, "mcp", None)
    assert call(server, without["access_token"], "tools/list").status_code == 401


def test_the_canonical_resource_matches_in_any_case(server: LiveServer, reader: Browser, client_id: str) -> None:
    shouting = server.mcp_url.replace("http://", "HTTP://")
    token = obtain_token(reader, server.base_url, client_id, "mcp", shouting)
    assert call(server, token["access_token"], "tools/list").status_code == 200


def test_a_registration_token_is_not_a_bearer_for_mcp(server: LiveServer) -> None:
    registered = register_client(server.base_url, "Sneaky")
    response = call(server, registered["registration_access_token"], "tools/list")
    assert response.status_code == 401


def test_revoked_and_expired_tokens_are_refused(
    server: LiveServer, data: Path, reader: Browser, client_id: str, resource: str
) -> None:
    revoked = obtain_token(reader, server.base_url, client_id, "mcp", resource)
    assert call(server, revoked["access_token"], "tools/list").status_code == 200
    response = httpx2.post(
        server.base_url + "/o/revoke_token/", data={"token": revoked["access_token"], "client_id": client_id}
    )
    assert response.status_code == 200
    assert call(server, revoked["access_token"], "tools/list").status_code == 401

    expired = obtain_token(reader, server.base_url, client_id, "mcp", resource)
    run_snippet(
        data,
        "import hashlib; from datetime import timedelta; from django.utils import timezone;"
        "from oauth2_provider.models import AccessToken;"
        f"AccessToken.objects.filter(token_checksum=hashlib.sha256({expired['access_token']!r}.encode()).hexdigest())"
        ".update(expires=timezone.now() - timedelta(seconds=1))",
    )
    assert call(server, expired["access_token"], "tools/list").status_code == 401


def test_tokens_of_inactive_users_are_refused(server: LiveServer, data: Path, client_id: str, resource: str) -> None:
    run_snippet(
        data,
        "from django.contrib.auth.models import User; User.objects.create_user('leaver', password='leaver')",
    )
    with Browser.logged_in(server.base_url, "leaver", "leaver") as leaver:
        token = obtain_token(leaver, server.base_url, client_id, "mcp", resource)
    assert call(server, token["access_token"], "tools/list").status_code == 200
    # Saved as the admin and user.save() do: the signal ends every process's memory of the token at once.
    deactivate = "leaver = User.objects.get(username='leaver'); leaver.is_active = False; leaver.save()"
    run_snippet(data, f"from django.contrib.auth.models import User; {deactivate}")
    assert call(server, token["access_token"], "tools/list").status_code == 401
    reactivate = "leaver = User.objects.get(username='leaver'); leaver.is_active = True; leaver.save()"
    run_snippet(data, f"from django.contrib.auth.models import User; {reactivate}")
    assert call(server, token["access_token"], "tools/list").status_code == 200  # known again
    # QuerySet.update() sends no signal: credentials_changed() says it instead.
    run_snippet(
        data,
        "from django.contrib.auth.models import User; import mcp_expose; "
        "User.objects.filter(username='leaver').update(is_active=False); mcp_expose.credentials_changed()",
    )
    assert call(server, token["access_token"], "tools/list").status_code == 401


def test_a_token_in_the_query_string_is_refused(
    server: LiveServer, reader: Browser, client_id: str, resource: str, read_token: dict[str, Any]
) -> None:
    # A token of its own: one sent in a URL is revoked (tests/test_credential_leaks.py).
    leaked = obtain_token(reader, server.base_url, client_id, "mcp", resource)["access_token"]
    response = call(server, None, "tools/list", suffix=f"?access_token={leaked}")
    assert response.status_code == 400 and response.json()["error"] == "invalid_request"  # RFC 6750 §3.1
    both = call(server, read_token["access_token"], "tools/list", suffix="?access_token=x")
    assert both.status_code == 400
    assert call(server, read_token["access_token"], "tools/list").status_code == 200  # the header's token still works


def test_basic_credentials_are_refused(server: LiveServer) -> None:
    response = call(server, None, "tools/list", Authorization="Basic cmVhZGVyOnJlYWRlcg==")
    assert response.status_code == 401
    # Not a Bearer credential at all: the plain challenge, without error= (RFC 6750 §3.1).
    assert (
        "error=" not in response.headers["www-authenticate"] and 'scope="mcp"' in response.headers["www-authenticate"]
    )


def test_a_token_acting_for_no_user_is_refused(server: LiveServer) -> None:
    """Open dynamic registration hands out client-credentials clients that nobody owns: their tokens act for no one."""
    registered = httpx2.post(
        server.base_url + "/o/register/",
        json={
            "client_name": "Nobody's",
            "grant_types": ["client_credentials"],
            "token_endpoint_auth_method": "client_secret_basic",
        },
    )
    assert registered.status_code == 201, registered.text
    client = registered.json()
    token = httpx2.post(
        server.base_url + "/o/token/",
        data={
            "grant_type": "client_credentials",
            "scope": "mcp library:read library:write",
            "resource": server.mcp_url,
        },
        auth=(client["client_id"], client["client_secret"]),
    )
    assert token.status_code == 200, token.text
    assert call(server, token.json()["access_token"], "tools/list").status_code == 401


def test_a_token_without_the_base_scope_is_asked_to_step_up(server: LiveServer, data: Path, client_id: str) -> None:
    token = (
        run_snippet(
            data,
            "from datetime import timedelta; from django.utils import timezone; from django.contrib.auth.models import User;"
            "from oauth2_provider.models import AccessToken, Application;"
            f"app = Application.objects.get(client_id={client_id!r});"
            "at = AccessToken(user=User.objects.get(username='reader'), application=app, scope='other',"
            f" expires=timezone.now() + timedelta(hours=1), resource=[{server.mcp_url!r}]);"
            "from oauth2_provider.models import set_token_value; set_token_value(at, 'no-base-scope-token'); at.save();"
            "print('no-base-scope-token')",
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    response = call(server, token, "tools/list")
    assert response.status_code == 403
    assert 'error="insufficient_scope"' in response.headers["www-authenticate"]
    assert 'scope="mcp"' in response.headers["www-authenticate"]


def test_a_tool_needing_a_permission_the_user_lacks_is_unknown_not_a_challenge(
    server: LiveServer, read_token: dict[str, Any]
) -> None:
    token = read_token["access_token"]
    assert "library.overdue_loans" not in tool_names(call(server, token, "tools/list"))
    response = call(server, token, "tools/call", {"name": "library.overdue_loans", "arguments": {}})
    assert response.status_code == 400 and response.json()["error"]["code"] == -32602


def test_a_per_client_allow_list(
    server: LiveServer, data: Path, reader: Browser, client_id: str, resource: str, read_token: dict[str, Any]
) -> None:
    favoured = register_client(server.base_url, "Favoured")["client_id"]
    favoured_token = obtain_token(reader, server.base_url, favoured, "mcp library:read", resource)["access_token"]
    run_snippet(
        data,
        "from mcp_expose.models import ExposedTool; from oauth2_provider.models import Application;"
        "row = ExposedTool.objects.get(key='library.popular_authors');"
        f"row.allowed_clients.set([Application.objects.get(client_id={favoured!r})])",
    )
    try:
        assert "library.popular_authors" in tool_names(call(server, favoured_token, "tools/list"))
        assert "library.popular_authors" not in tool_names(call(server, read_token["access_token"], "tools/list"))
        refused = call(
            server, read_token["access_token"], "tools/call", {"name": "library.popular_authors", "arguments": {}}
        )
        assert refused.status_code == 400 and refused.json()["error"]["code"] == -32602
    finally:
        run_snippet(
            data,
            "from mcp_expose.models import ExposedTool; ExposedTool.objects.get(key='library.popular_authors').allowed_clients.clear()",
        )


def test_api_keys_keep_working_beside_oauth(server: LiveServer, key: str) -> None:
    assert "library.borrow_book" in tool_names(call(server, key, "tools/list"))


def unknown_twin(name: str) -> str:
    """A name no tool has, as long as `name`: the answers for both must then be the same bytes."""
    return name[:-1] + ("x" if name[-1] != "x" else "y")


def raw_answer(
    server: LiveServer, token: str, name: str, *, modern: bool, region: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    """A tools/call's status, headers (but the date) and body bytes, in either era; `region` also sends the
    argument and its Mcp-Param-Region header (2026-07-28), which the SDK checks against a tool that declares it."""
    params = {"name": name, "arguments": {} if region is None else {"region": region}}
    if modern:
        headers = modern_headers("tools/call", token, name=name)
        if region is not None:
            headers["Mcp-Param-Region"] = region + "-mismatched"
    else:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {token}",
        }
    response = httpx2.post(server.mcp_url, content=jsonrpc_body("tools/call", params, modern=modern), headers=headers)
    return response.status_code, {k: v for k, v in response.headers.items() if k != "date"}, response.content


def assert_answers_like_unknown(server: LiveServer, token: str, name: str, region: str | None = None) -> None:
    """In both eras (2026-07-28 first through the fast path's door when it is on), the same answer as for a name
    no tool has: status, headers and body byte for byte, once the name is swapped."""
    twin = unknown_twin(name)
    for modern in (True, False):
        status, headers, body = raw_answer(server, token, name, modern=modern, region=region)
        unknown_status, unknown_headers, unknown_body = raw_answer(server, token, twin, modern=modern, region=region)
        assert (status, headers) == (unknown_status, unknown_headers), (modern, body, unknown_body)
        assert body.replace(name.encode(), twin.encode()) == unknown_body, (modern, body, unknown_body)
        assert f"Unknown tool: {twin}".encode() in unknown_body and "www-authenticate" not in headers


def disable(data: Path, *keys: str, enabled: bool = False) -> None:
    """Untick (or tick) tools' enabled box, as an administrator does: the row is saved, the revision moves."""
    run_snippet(
        data,
        "from mcp_expose.models import ExposedTool;"
        f"[row.save() for row in ExposedTool.objects.filter(key__in={list(keys)!r}) if setattr(row, 'enabled', {enabled!r}) is None]",
    )


DISABLED = ("library.return_book", "library.my_loans")  # one the reader's token lacks the scope for, one it holds


def assert_disabled_tools_answer_like_unknown(server: LiveServer, data: Path, token: str) -> None:
    disable(data, *DISABLED)
    try:
        for name in DISABLED:
            assert_answers_like_unknown(server, token, name)
    finally:
        disable(data, *DISABLED, enabled=True)


def test_by_default_only_a_tool_scopes_alone_hide_steps_up(
    server: LiveServer, data: Path, read_token: dict[str, Any], key: str
) -> None:
    """Step-up tells an authenticated caller the tool exists; unknown, disabled and otherwise forbidden tools
    still answer alike."""
    token = read_token["access_token"]
    status, headers, _ = raw_answer(server, token, "library.borrow_book", modern=True)
    assert status == 403 and 'scope="library:write mcp"' in headers["www-authenticate"]
    assert_answers_like_unknown(server, token, "library.overdue_loans")  # a permission the user lacks
    # An API key cannot step up: a tool its scopes hide is unknown, its declared header unchecked.
    assert_answers_like_unknown(server, create_api_key(data, "reader", "mcp library:read"), "toolbox.routed", "eu")
    status, _, body = raw_answer(server, key, "toolbox.routed", modern=True, region="eu")  # a caller who may: checked
    assert status == 400 and json.loads(body)["error"]["code"] == -32020
    assert_disabled_tools_answer_like_unknown(server, data, token)
    assert raw_answer(server, token, "library.return_book", modern=True)[0] == 403  # enabled again: step-up


@pytest.mark.parametrize("fast_path", ["1", "0"])
def test_hidden_tools_answer_exactly_like_unknown_ones(data: Path, client_id: str, fast_path: str) -> None:
    with run_server(data, MCP_TEST_HIDE_FORBIDDEN_TOOLS="1", MCP_TEST_FAST_PATH=fast_path, **LIVE_SETTINGS) as hidden:
        with Browser.logged_in(hidden.base_url, "reader", "reader") as browser:
            token = obtain_token(browser, hidden.base_url, client_id, "mcp library:read", hidden.mcp_url)[
                "access_token"
            ]
        assert_answers_like_unknown(hidden, token, "library.borrow_book")  # scopes alone hide it
        assert_answers_like_unknown(hidden, token, "toolbox.routed", region="eu")  # its header is not checked
        assert_answers_like_unknown(hidden, token, "library.overdue_loans")
        assert_disabled_tools_answer_like_unknown(hidden, data, token)


def test_denying_consent_issues_no_code(server: LiveServer, reader: Browser, client_id: str, resource: str) -> None:
    _, challenge = pkce_pair()
    redirect = reader.approve(authorize_params(client_id, "mcp", challenge, resource), allow=False)
    assert redirect["error"] == ["access_denied"] and "code" not in redirect


def test_tools_see_the_token_as_request_auth(
    server: LiveServer, read_token: dict[str, Any], client_id: str, key: str
) -> None:
    response = call(server, read_token["access_token"], "tools/call", {"name": "library.whoami", "arguments": {}})
    assert json.loads(response.json()["result"]["content"][0]["text"]) == {
        "user": "reader",
        "credential": "oauth",
        "request_auth": "CallerCredential",
        "client_id": client_id,
        "scopes": ["library:read", "mcp"],
    }
    with_key = call(server, key, "tools/call", {"name": "library.whoami", "arguments": {}})
    assert with_key.json()["result"]["structuredContent"]["credential"] == "api_key"
    assert with_key.json()["result"]["structuredContent"]["request_auth"] == "CallerCredential"


def test_code_exchange_without_the_verifier_fails(
    server: LiveServer, reader: Browser, client_id: str, resource: str
) -> None:
    verifier, challenge = pkce_pair()
    redirect = reader.approve(authorize_params(client_id, "mcp", challenge, resource))
    wrong = exchange_code(server.base_url, client_id, redirect["code"][0], "wrong-" + verifier, resource)
    assert wrong.status_code == 400


# The official SDK client, doing the whole OAuth dance itself ------------------------------------------------


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens: Any = None
        self.client_info: Any = None

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client_info

    async def set_client_info(self, client_info: Any) -> None:
        self.client_info = client_info


@pytest.mark.anyio
@pytest.mark.parametrize("mode", list(MODES))
async def test_the_sdk_client_registers_signs_in_and_steps_up_by_itself(server: LiveServer, mode: str) -> None:
    """No manual client setup: discovery, registration, consent, token, then a 403 step-up to write."""
    import anyio
    from mcp import Client
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

    from mcp_expose.testing.live import mcp_http_client

    consents: list[str] = []
    redirects: list[dict[str, list[str]]] = []

    with Browser.logged_in(server.base_url, "reader", "reader") as browser:

        async def approve_in_browser(authorization_url: str) -> None:
            query = dict(httpx2.URL(authorization_url).params)
            consents.append(query["scope"])
            redirects.append(await anyio.to_thread.run_sync(browser.approve, query))

        async def read_callback() -> AuthorizationCodeResult:
            redirect = redirects[-1]
            return AuthorizationCodeResult(
                code=redirect["code"][0], state=redirect["state"][0], iss=redirect.get("iss", [None])[0]
            )

        provider = OAuthClientProvider(
            server_url=server.mcp_url,
            client_metadata=OAuthClientMetadata(
                client_name="SDK Agent",
                redirect_uris=[REDIRECT_URI],
                grant_types=["authorization_code", "refresh_token"],
            ),
            storage=MemoryStorage(),
            redirect_handler=approve_in_browser,
            callback_handler=read_callback,
        )
        http = mcp_http_client(auth=provider)
        async with http, Client(streamable_http_client(server.mcp_url, http_client=http), mode=mode) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            assert library_tools(names) == ["library.echo", "library.whoami"]
            borrowed = await client.call_tool("library.borrow_book", {"book_id": 7, "days": 3})
            returned = await client.call_tool(
                "library.return_book", {"loan_id": borrowed.structured_content["loan_id"]}
            )
    assert consents[0] == "mcp"
    assert set(consents[1].split()) == {"mcp", "library:write"}
    assert borrowed.structured_content["book"] == "Small Gods" and not returned.is_error


def test_the_demo_script_client_uses_client_credentials(server: LiveServer, data: Path) -> None:
    client_id, client_secret = (data / "demo-oauth-client.txt").read_text().split()
    response = httpx2.post(
        server.base_url + "/o/token/",
        data={"grant_type": "client_credentials", "scope": "library:write", "resource": server.mcp_url},
        auth=(client_id, client_secret),
    )
    assert response.status_code == 200, response.text
    whoami = call(server, response.json()["access_token"], "tools/call", {"name": "library.whoami", "arguments": {}})
    assert whoami.json()["result"]["structuredContent"] == {
        "user": "admin",
        "credential": "oauth",
        "request_auth": "CallerCredential",
        "client_id": client_id,
        "scopes": ["library:read", "library:write", "mcp"],
    }


def test_mcp_doctor_passes_a_good_deployment_and_fails_a_bad_url(server: LiveServer, data: Path) -> None:
    import subprocess
    import sys

    from .live import ROOT, demo_env

    def doctor(url: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), "mcp_doctor", url],
            env=demo_env(data),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )

    good = doctor(server.mcp_url)
    assert good.returncode == 0, good.stdout + good.stderr
    assert good.stdout.count("PASS") == 10 and "All checks passed." in good.stdout
    bad = doctor(server.base_url + "/")
    assert bad.returncode == 1
    assert "FAIL  401 challenge" in bad.stdout and "FAIL  foreign Origin refused" in bad.stdout


def test_batches_and_sessionless_methods_are_refused(server: LiveServer, read_token: dict[str, Any]) -> None:
    token = read_token["access_token"]
    batch = "[" + jsonrpc_body("tools/list") + "," + jsonrpc_body("tools/list", request_id=2) + "]"
    response = httpx2.post(server.mcp_url, content=batch, headers=modern_headers("tools/list", token))
    assert response.status_code == 400 and response.json()["error"]["code"] == -32600
    for method in ("GET", "DELETE"):
        response = httpx2.request(method, server.mcp_url, headers=modern_headers("tools/list", token))
        assert response.status_code == 405 and response.headers["allow"] == "POST"


def test_tokens_are_stored_hashed_and_responses_carry_iss(
    server: LiveServer, data: Path, reader: Browser, client_id: str, resource: str
) -> None:
    verifier, challenge = pkce_pair()
    redirect = reader.approve(authorize_params(client_id, "mcp", challenge, resource))
    assert redirect["iss"] == [server.base_url + "/o"]  # RFC 9207
    token = exchange_code(server.base_url, client_id, redirect["code"][0], verifier, resource).json()
    stored = (
        run_snippet(
            data,
            "import hashlib; from oauth2_provider.models import AccessToken, RefreshToken;"
            f"t = AccessToken.objects.get(token_checksum=hashlib.sha256({token['access_token']!r}.encode()).hexdigest());"
            "print(repr(t.token), repr(RefreshToken.objects.get(access_token=t).token))",
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    assert stored == "'' ''"  # only checksums at rest: a database leak yields no usable token
