"""The OAuth pieces that need no server: scopes, canonical URIs, challenges, step-up, checks, consent facts."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core import checks
from django.test import override_settings

import mcp_expose
from mcp_expose.access.protected_resource import (
    bearer_challenge,
    canonical_uri,
    metadata_url,
    protected_resource_metadata,
)
from mcp_expose.access.scopes import expand_scopes
from mcp_expose.access.stepup import may_be_tool_call, missing_scopes, tool_call_name
from mcp_expose.catalog.compiled import compile_catalog
from mcp_expose.core.principal import Principal
from mcp_expose.declare.registry import CapabilityRegistry
from mcp_expose.oauth.checks import check_oauth_settings, check_tool_scopes_are_grantable
from mcp_expose.oauth.settings import oauth2_provider_settings
from mcp_expose.operator.consent import consent_details


def test_scopes_expand_transitively_and_survive_cycles() -> None:
    hierarchy = {"admin": ["write"], "write": ["read"], "read": ["mcp"], "loop": ["loop2"], "loop2": ["loop"]}
    assert expand_scopes(["admin"], hierarchy) == {"admin", "write", "read", "mcp"}
    assert expand_scopes(["read"], hierarchy) == {"read", "mcp"}
    assert expand_scopes(["loop"], hierarchy) == {"loop", "loop2"}
    assert expand_scopes([], hierarchy) == frozenset()


@pytest.mark.parametrize(
    ("uri", "canonical"),
    [
        ("HTTPS://MCP.Example.COM/mcp", "https://mcp.example.com/mcp"),
        ("https://mcp.example.com:443/mcp/", "https://mcp.example.com/mcp"),
        ("http://127.0.0.1:8000/mcp#frag", "http://127.0.0.1:8000/mcp"),
        ("http://[::1]:80/mcp", "http://[::1]/mcp"),
    ],
)
def test_canonical_uri(uri: str, canonical: str) -> None:
    assert canonical_uri(uri) == canonical


def test_metadata_url_inserts_the_well_known_path() -> None:
    assert metadata_url("https://h.example/mcp") == "https://h.example/.well-known/oauth-protected-resource/mcp"


def test_bearer_challenges() -> None:
    resource = "https://h.example/mcp"
    assert bearer_challenge(resource=resource, scopes=["mcp"]) == (
        'Bearer resource_metadata="https://h.example/.well-known/oauth-protected-resource/mcp", scope="mcp"'
    )
    assert bearer_challenge(
        resource=resource, scopes={"b", "a"}, error="insufficient_scope", description='say "x"'
    ) == (
        'Bearer error="insufficient_scope", error_description="say \\"x\\"", '
        'resource_metadata="https://h.example/.well-known/oauth-protected-resource/mcp", scope="a b"'
    )


@pytest.mark.django_db
def test_protected_resource_metadata_defaults_to_the_dot_issuer() -> None:
    with override_settings(MCP_EXPOSE={"BASE_SCOPE": "mcp"}):
        document = protected_resource_metadata("https://h.example/mcp", "https://h.example")
    assert document == {
        "resource": "https://h.example/mcp",
        "authorization_servers": ["https://h.example/o"],
        "scopes_supported": ["mcp"],
        "bearer_methods_supported": ["header"],
    }
    with override_settings(
        MCP_EXPOSE={"AUTHORIZATION_SERVERS": ["https://id.example"], "SCOPES_SUPPORTED": ["a", "b"]}
    ):
        document = protected_resource_metadata("https://h.example/mcp", "https://h.example")
    assert document["authorization_servers"] == ["https://id.example"] and document["scopes_supported"] == ["a", "b"]


def test_tool_name_comes_from_the_body_and_must_match_the_header() -> None:
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t.x"}}'
    assert tool_call_name({}, body) == "t.x"
    assert tool_call_name({"mcp-name": "t.x"}, body) == "t.x"
    assert tool_call_name({"mcp-name": "t.y"}, body) is None
    assert tool_call_name({}, b'{"method":"tools/list"}') is None
    assert tool_call_name({}, b"not json") is None
    assert tool_call_name({}, b'{"method":"tools/call","params":{"name":5}}') is None
    assert may_be_tool_call({}) and may_be_tool_call({"mcp-method": "tools/call"})
    assert not may_be_tool_call({"mcp-method": "tools/list"})


@pytest.fixture
def catalog(registry: CapabilityRegistry) -> Any:
    def write() -> None: ...
    def librarian() -> None: ...

    mcp_expose.tool(registry=registry, key="t.write", scopes=["write"])(write)
    mcp_expose.tool(registry=registry, key="t.librarian", scopes=["write"], permissions=["library.view_loan"])(
        librarian
    )
    return compile_catalog(registry, {})


def oauth(scopes: set[str], **extra: Any) -> Principal:
    return Principal(user=AnonymousUser(), scopes=frozenset(scopes), method="oauth", **extra)


def test_missing_scopes_for_step_up(catalog: Any) -> None:
    with override_settings(MCP_EXPOSE={"BASE_SCOPE": "mcp"}):
        assert missing_scopes(oauth(set()), catalog, None) == {"mcp"}
        assert missing_scopes(oauth({"mcp"}), catalog, "t.write") == {"mcp", "write"}
        assert missing_scopes(oauth({"mcp", "write"}), catalog, "t.write") == frozenset()
        # Stepping up could not help: the user lacks the permission too. Answered as unknown instead.
        assert missing_scopes(oauth({"mcp"}), catalog, "t.librarian") == frozenset()
        assert missing_scopes(oauth({"mcp"}), catalog, "t.unknown") == frozenset()
        api_key = Principal(user=AnonymousUser(), scopes=frozenset(), method="api_key")
        assert missing_scopes(api_key, catalog, "t.write") == frozenset()
    with override_settings(MCP_EXPOSE={"BASE_SCOPE": "mcp", "HIDE_FORBIDDEN_TOOLS": True}):
        assert missing_scopes(oauth({"mcp"}), catalog, "t.write") == frozenset()


def ids(messages: list[checks.CheckMessage]) -> list[str]:
    return [message.id for message in messages]


def test_the_recommended_dot_settings_pass_the_checks() -> None:
    with override_settings(OAUTH2_PROVIDER=oauth2_provider_settings(scopes={"mcp": "MCP"}, default_scopes=["mcp"])):
        assert check_oauth_settings() == []


def test_dangerous_dot_settings_are_reported() -> None:
    with override_settings(OAUTH2_PROVIDER={}):
        found = ids(check_oauth_settings())
    # DOT's defaults: plain PKCE allowed, tokens in clear, no reuse protection, no iss, tokens in URLs.
    assert found.count("mcp_expose.W010") == 5
    assert {"mcp_expose.W011", "mcp_expose.W012", "mcp_expose.W013"} <= set(found)


def test_app_order_matters_for_the_consent_template() -> None:
    recommended = oauth2_provider_settings(scopes={"mcp": "MCP"}, default_scopes=["mcp"])
    installed = ["django.contrib.auth", "django.contrib.contenttypes", "oauth2_provider", "mcp_expose"]
    with override_settings(OAUTH2_PROVIDER=recommended, INSTALLED_APPS=installed):
        assert ids(check_oauth_settings()) == ["mcp_expose.W014"]


def test_a_tool_scope_that_dot_cannot_grant_is_a_warning_naming_it(
    restore_global_registry: CapabilityRegistry,
) -> None:
    assert check_tool_scopes_are_grantable() == []  # the demo's tools need only scopes its DOT settings list
    for name in ("refund", "cancel", "void", "reissue"):
        mcp_expose.tool(registry=restore_global_registry, key=f"shop.{name}", scopes=["shop:write"])(lambda: None)
    [warning] = check_tool_scopes_are_grantable()
    assert warning.id == "mcp_expose.W016"
    assert warning.msg.startswith(
        "The scope 'shop:write', which 'shop.refund', 'shop.cancel', 'shop.void' and 1 more need, is not in "
        "OAUTH2_PROVIDER['SCOPES']"
    )
    assert "invalid_scope" in warning.msg and "Add 'shop:write' to OAUTH2_PROVIDER['SCOPES']" in warning.hint
    # A scope DOT grants may imply it: then a client can hold it.
    with override_settings(MCP_EXPOSE={"SCOPE_HIERARCHY": {"library:write": ["shop:write"]}}):
        assert check_tool_scopes_are_grantable() == []


def application(**fields: Any) -> Any:
    from oauth2_provider.models import Application

    return Application(**{"name": "Agent", "client_id": "abc", "redirect_uris": "http://127.0.0.1/cb", **fields})


def test_consent_facts(catalog: Any) -> None:
    with override_settings(OAUTH2_PROVIDER={"SCOPES": {"write": "Write things"}}):
        dynamic = consent_details(
            application(registration_source="dcr"), "http://127.0.0.1:5000/cb", ["write"], catalog
        )
        assert (dynamic.verified, dynamic.registration, dynamic.loopback_only) == (False, "dynamic", True)
        assert dynamic.scopes[0].description == "Write things" and dynamic.scopes[0].tools == ["t.write", "t.librarian"]
        cimd = consent_details(
            application(
                registration_source="cimd",
                client_id="https://agent.example/c.json",
                redirect_uris="https://agent.example/cb",
            ),
            "https://agent.example/cb",
            ["write"],
            catalog,
        )
        assert (cimd.cimd_domain, cimd.loopback_only, cimd.redirect_host) == ("agent.example", False, "agent.example")
        manual = consent_details(application(registration_source="manual"), "http://127.0.0.1/cb", [], catalog)
        assert manual.verified and manual.cimd_domain is None
