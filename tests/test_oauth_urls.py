"""The authorization server's URLs: DOT's, with the OpenID Connect views only where OpenID Connect is on."""

from __future__ import annotations

import logging
from types import ModuleType

import pytest
from django.test import Client, override_settings
from django.urls import include, path
from jwcrypto import jwk

from mcp_expose.oauth.urls import oauth_urlpatterns
from project.settings import OAUTH2_PROVIDER

pytestmark = pytest.mark.django_db

OIDC_URLS = ["/o/.well-known/openid-configuration", "/o/.well-known/jwks.json", "/o/userinfo/", "/o/logout/"]


def urlconf() -> ModuleType:
    """A root URLconf mounting the patterns as the settings are now."""
    module = ModuleType("oauth_test_urls")
    module.urlpatterns = [path("o/", include((oauth_urlpatterns(), "oauth2_provider"), namespace="oauth2_provider"))]  # type: ignore[attr-defined]
    return module


@pytest.mark.parametrize("url", OIDC_URLS)
def test_with_oidc_off_its_urls_are_a_plain_404(url: str, caplog: pytest.LogCaptureFixture) -> None:
    # Under DEBUG, DOT's switched-off OIDC views raise ImproperlyConfigured: a 500 with a traceback.
    with override_settings(DEBUG=True), caplog.at_level(logging.WARNING):
        response = Client(raise_request_exception=False).get(url)
    assert response.status_code == 404
    assert "ImproperlyConfigured" not in response.content.decode()
    assert not [record for record in caplog.records if record.name.startswith("oauth2_provider")]


def test_with_oidc_on_its_urls_are_served() -> None:
    key = jwk.JWK.generate(kty="RSA", size=2048).export_to_pem(private_key=True, password=None).decode()
    oidc = {**OAUTH2_PROVIDER, "OIDC_ENABLED": True, "OIDC_RSA_PRIVATE_KEY": key}
    with override_settings(OAUTH2_PROVIDER=oidc):
        with override_settings(ROOT_URLCONF=urlconf()):
            client = Client()
            discovery = client.get("/o/.well-known/openid-configuration")
            jwks = client.get("/o/.well-known/jwks.json")
            userinfo = client.get("/o/userinfo/")
            logout = client.get("/o/logout/")
    with override_settings(OAUTH2_PROVIDER={**oidc, "OIDC_RP_INITIATED_LOGOUT_ENABLED": True}):
        with override_settings(ROOT_URLCONF=urlconf()):
            logout_on = Client().get("/o/logout/")
    assert discovery.status_code == 200 and discovery.json()["jwks_uri"] == "http://testserver/o/.well-known/jwks.json"
    assert jwks.status_code == 200 and jwks.json()["keys"][0]["kty"] == "RSA"
    assert userinfo.status_code == 401  # served: it wants a token
    assert logout.status_code == 404  # RP-initiated logout has its own switch, still off
    assert logout_on.status_code == 302  # served: logs out, then redirects
