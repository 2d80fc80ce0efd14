"""A headless OAuth 2.1 client: what Claude or the Inspector do, step by step, over real HTTP."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2

REQUEST_GUARD_SECONDS = 60.0

REDIRECT_URI = "http://127.0.0.1:53682/callback"


def pkce_pair() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def hidden_fields(html: str) -> dict[str, str]:
    return dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', html))


@dataclass
class Browser:
    """A user's browser: a cookie jar, logged in through the site's login form."""

    http: httpx2.Client

    @classmethod
    def logged_in(cls, base_url: str, username: str, password: str) -> Browser:
        # A page may wait on the server fetching a client's metadata document: on a loaded machine that takes
        # longer than httpx's 5 s default, which is a guard here, not a measure.
        http = httpx2.Client(base_url=base_url, follow_redirects=False, timeout=REQUEST_GUARD_SECONDS)
        page = http.get("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        response = http.post(
            "/accounts/login/",
            data={"username": username, "password": password, "csrfmiddlewaretoken": token, "next": "/"},
            headers={"Referer": base_url + "/accounts/login/"},
        )
        assert response.status_code == 302, response.text
        return cls(http)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.http.close()

    def consent_page(self, params: dict[str, str]) -> httpx2.Response:
        return self.http.get("/o/authorize/", params=params)

    def approve(self, params: dict[str, str], allow: bool = True) -> dict[str, list[str]]:
        """Open the consent page, press Allow (or Deny); return the redirect's query parameters."""
        page = self.consent_page(params)
        assert page.status_code == 200, page.text
        form = hidden_fields(page.text)
        if allow:
            form["allow"] = "Allow"
        response = self.http.post(
            "/o/authorize/?" + str(page.url).split("?", 1)[1],
            data=form,
            headers={"Referer": str(page.url)},
        )
        assert response.status_code == 302, response.text
        location = response.headers["location"]
        assert location.startswith(REDIRECT_URI), location
        return parse_qs(urlsplit(location).query)


def register_client(base_url: str, name: str = "Test Agent", **extra: Any) -> dict[str, Any]:
    """RFC 7591 dynamic registration, as VS Code sends it."""
    body = {
        "client_name": name,
        "redirect_uris": [REDIRECT_URI],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "native",
        **extra,
    }
    response = httpx2.post(base_url + "/o/register/", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def authorize_params(client_id: str, scope: str, challenge: str, resource: str | None) -> dict[str, str]:
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT_URI,
        "scope": scope,
        "state": secrets.token_urlsafe(8),
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    if resource is not None:
        params["resource"] = resource
    return params


def exchange_code(base_url: str, client_id: str, code: str, verifier: str, resource: str | None) -> httpx2.Response:
    data = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT_URI,
        "client_id": client_id,
        "code_verifier": verifier,
    }
    if resource is not None:
        data["resource"] = resource
    return httpx2.post(base_url + "/o/token/", data=data)


def obtain_token(browser: Browser, base_url: str, client_id: str, scope: str, resource: str | None) -> dict[str, Any]:
    """The whole authorization-code + PKCE dance; returns the token response."""
    verifier, challenge = pkce_pair()
    params = authorize_params(client_id, scope, challenge, resource)
    redirect = browser.approve(params)
    assert redirect["state"] == [params["state"]]
    response = exchange_code(base_url, client_id, redirect["code"][0], verifier, resource)
    assert response.status_code == 200, response.text
    return response.json()


def refresh(base_url: str, client_id: str, refresh_token: str) -> httpx2.Response:
    return httpx2.post(
        base_url + "/o/token/",
        data={"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id},
    )
