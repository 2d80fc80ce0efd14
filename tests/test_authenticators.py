"""The authenticator chain (`access/authenticators`): ours, the DRF adapter, session cookies, misconfiguration.

Real database, real DRF, simplejwt and django-oauth-toolkit; `authenticate` is what the edge calls in its hop.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta
from types import MappingProxyType
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.db import OperationalError
from django.test import Client, override_settings
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework_simplejwt.tokens import AccessToken as JWT

from mcp_expose.access.authenticators import (
    ApiKeyAuthenticator,
    Authenticator,
    CredentialRequest,
    OAuthTokenAuthenticator,
    configuration_problems,
    get_authenticators,
)
from mcp_expose.access.credential_cache import cache as credential_cache
from mcp_expose.access.credentials import authenticate, authenticate_known
from mcp_expose.access.drf_authentication import DrfAuthenticator
from mcp_expose.access.failures import COOKIE_NOT_SAME_ORIGIN, INVALID_TOKEN, MISSING, UNCHECKABLE, WRONG_SCHEME
from mcp_expose.access.session_authentication import SessionAuthenticator
from mcp_expose.core.outage import DependencyUnavailable
from mcp_expose.core.principal import Principal
from mcp_expose.models import ApiKey

pytestmark = pytest.mark.django_db

RESOURCE = "http://testserver/mcp"
OURS = [
    "mcp_expose.access.authenticators.ApiKeyAuthenticator",
    "mcp_expose.access.authenticators.OAuthTokenAuthenticator",
]
ADAPTER = "mcp_expose.access.drf_authentication.DrfAuthenticator"
SIMPLEJWT = "rest_framework_simplejwt.authentication.JWTAuthentication"
PARTNER_KEYS = {"pk-ada-0123456789": "ada"}


# Project DRF authentication classes, as a project would write them --------------------------------------------


class PartnerAuthentication(BaseAuthentication):
    """`Authorization: Partner <key>`: a scheme of the project's own. Its refusal quotes the key, carelessly."""

    def authenticate(self, request: Any) -> tuple[User, str] | None:
        scheme, _, key = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
        if scheme != "Partner":
            return None
        if key not in PARTNER_KEYS:
            raise AuthenticationFailed(f"Unknown partner key {key}")
        return User.objects.get(username=PARTNER_KEYS[key]), key


class HeaderAuthentication(BaseAuthentication):
    """`X-Partner-Key: <key>`, a header of its own; any other request is not its business."""

    def authenticate(self, request: Any) -> tuple[User, dict[str, Any]] | None:
        key = request.META.get("HTTP_X_PARTNER_KEY")
        if key is None:
            return None
        if key not in PARTNER_KEYS:
            raise AuthenticationFailed("Unknown partner key")
        return User.objects.get(username=PARTNER_KEYS[key]), {"scp": ["library:read"], "key": key}


class AnyBearer(BaseAuthentication):
    """Accepts any bearer at all, as ada: shows which bearers reach the authenticators after ours."""

    def authenticate(self, request: Any) -> tuple[User, None] | None:
        scheme, _, _ = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
        return (User.objects.get(username="ada"), None) if scheme == "Bearer" else None


class Crashing(BaseAuthentication):
    def authenticate(self, request: Any) -> None:
        raise RuntimeError(f"cannot parse {request.META.get('HTTP_AUTHORIZATION')}")


class Locked(BaseAuthentication):
    def authenticate(self, request: Any) -> None:
        raise OperationalError("database is locked")


class Inactive(BaseAuthentication):
    def authenticate(self, request: Any) -> tuple[User, None]:
        return User(username="gone", is_active=False, pk=999), None


class ReadsCookies(BaseAuthentication):
    def authenticate(self, request: Any) -> tuple[User, None] | None:
        return (User.objects.get(username="ada"), None) if request.COOKIES else None


def partner_scopes(user: User, auth: Any) -> list[str]:
    return ["library:write"] if user.username == "ada" else []


def drf(authentication_class: str, **options: Any) -> dict[str, Any]:
    return {"CLASS": ADAPTER, "OPTIONS": {"authentication_class": authentication_class, **options}}


def here(name: str) -> str:
    return f"{__name__}.{name}"


@pytest.fixture
def configure() -> Iterator[Any]:
    """`configure(AUTHENTICATORS=[...], ...)`: the test settings' MCP_EXPOSE with these keys (each call starts
    again from the test settings), until the test ends."""
    overrides: list[Any] = []
    base = dict(settings.MCP_EXPOSE)

    def apply(**keys: Any) -> None:
        override = override_settings(MCP_EXPOSE={**base, **keys})
        override.enable()
        overrides.append(override)

    yield apply
    for override in reversed(overrides):
        override.disable()


@pytest.fixture
def ada() -> User:
    return User.objects.create_user("ada", password="x")


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def jwt_for(user: User, **claims: Any) -> str:
    token = JWT.for_user(user)
    for name, value in claims.items():
        token[name] = value
    return str(token)


def dot_token(user: User, token: str, *, resource: str = RESOURCE, expired: bool = False) -> AccessToken:
    app = Application.objects.create(
        name="app", client_id=f"app-{token}", client_type="public", authorization_grant_type="authorization-code"
    )
    expires = timezone.now() + timedelta(hours=-1 if expired else 1)
    return AccessToken.objects.create(
        user=user, application=app, token=token, scope="mcp library:read", expires=expires, resource=[resource]
    )


# The chain ---------------------------------------------------------------------------------------------------


def test_ours_are_the_defaults() -> None:
    assert [type(authenticator) for authenticator in get_authenticators()] == [
        ApiKeyAuthenticator,
        OAuthTokenAuthenticator,
    ]
    assert configuration_problems() == []


def test_the_chain_is_rebuilt_when_the_settings_change(configure: Any) -> None:
    before = get_authenticators()
    assert get_authenticators() is before
    configure(AUTHENTICATORS=[*OURS, drf(SIMPLEJWT)])
    assert [type(authenticator) for authenticator in get_authenticators()][-1] is DrfAuthenticator


def test_api_keys_and_dot_tokens_work_beside_the_adapter(ada: User, configure: Any) -> None:
    configure(AUTHENTICATORS=[*OURS, drf(SIMPLEJWT, scopes=["library:write"])])
    _, secret = ApiKey.create_key(user=ada, name="agent", scopes="library:read")
    dot_token(ada, "dot-token-1")
    by_key = authenticate(bearer(secret), resource=RESOURCE)
    by_token = authenticate(bearer("dot-token-1"), resource=RESOURCE)
    assert isinstance(by_key, Principal) and by_key.method == "api_key" and by_key.scopes == {"library:read", "mcp"}
    assert isinstance(by_token, Principal) and by_token.method == "oauth" and by_token.client_id == "app-dot-token-1"
    assert by_token.scopes == {"library:read", "mcp"}


def test_dot_refuses_its_own_spoiled_tokens_and_passes_on_the_rest(ada: User, configure: Any) -> None:
    configure(AUTHENTICATORS=[*OURS, drf(here("AnyBearer"), name="any")])
    dot_token(ada, "expired-token", expired=True)
    dot_token(ada, "elsewhere-token", resource="https://elsewhere.example/mcp")
    # Known to DOT, and refused by it: the authenticators after it never see these.
    assert authenticate(bearer("expired-token"), resource=RESOURCE) == INVALID_TOKEN
    assert authenticate(bearer("elsewhere-token"), resource=RESOURCE) == INVALID_TOKEN
    # Unknown to DOT: not ours, so the next authenticator decides.
    passed_on = authenticate(bearer("never-issued"), resource=RESOURCE)
    assert isinstance(passed_on, Principal) and (passed_on.method, passed_on.authenticator) == ("drf", "any")
    # An API key's shape is ours: a wrong one is refused, never passed on.
    assert authenticate(bearer("mcpx_00000000_unknown"), resource=RESOURCE) == INVALID_TOKEN


def test_nothing_claimed_is_refused_as_before(configure: Any) -> None:
    configure(AUTHENTICATORS=[*OURS, drf(here("PartnerAuthentication"))])
    assert authenticate({}, resource=RESOURCE) == MISSING
    assert authenticate(bearer("not-a-token"), resource=RESOURCE) == INVALID_TOKEN
    assert authenticate({"authorization": "Basic YWRhOng="}, resource=RESOURCE) == WRONG_SCHEME
    configure(AUTHENTICATORS=[], ALLOW_ANONYMOUS=True, ANONYMOUS_SCOPES=["public"])
    anonymous = authenticate({}, resource=RESOURCE)
    assert isinstance(anonymous, Principal) and anonymous.method == "anonymous"
    assert authenticate(bearer("mcpx_00000000_bad"), resource=RESOURCE) == INVALID_TOKEN


# The DRF adapter: simplejwt ------------------------------------------------------------------------------------


def test_a_jwt_gets_exactly_the_scopes_its_mapping_grants(ada: User, configure: Any) -> None:
    configure(AUTHENTICATORS=[*OURS, drf(SIMPLEJWT, scopes=["mcp"], scope_claim="scope")])
    principal = authenticate(bearer(jwt_for(ada, scope="library:read")), resource=RESOURCE)
    assert isinstance(principal, Principal)
    assert (principal.user, principal.method, principal.authenticator) == (ada, "drf", "JWTAuthentication")
    assert principal.scopes == {"mcp", "library:read"}
    assert principal.label == "ada (drf JWTAuthentication)" and principal.client_id is None
    assert type(principal.credential).__name__ == "AccessToken"  # request.auth, as DRF views see it
    listed = authenticate(bearer(jwt_for(ada, scope=["library:write", 7])), resource=RESOURCE)
    assert isinstance(listed, Principal) and listed.scopes == {"mcp", "library:write", "library:read"}  # widened


def test_a_jwt_holds_no_scope_unless_configured(ada: User, configure: Any) -> None:
    configure(AUTHENTICATORS=[*OURS, drf(SIMPLEJWT)])
    principal = authenticate(bearer(jwt_for(ada, scope="library:write")), resource=RESOURCE)
    assert isinstance(principal, Principal) and principal.scopes == frozenset()


def test_scopes_for_maps_each_user(ada: User, configure: Any) -> None:
    configure(AUTHENTICATORS=[*OURS, drf(SIMPLEJWT, scopes_for=here("partner_scopes"))])
    principal = authenticate(bearer(jwt_for(ada)), resource=RESOURCE)
    assert isinstance(principal, Principal) and principal.scopes == {"library:write", "library:read", "mcp"}


# Signed with no key we know: shaped like a JWT, valid for nobody.
GARBAGE_JWT = "eyJhbGciOiJIUzI1NiJ9.eyJ1c2VyX2lkIjoxfQ.c2lnbmF0dXJl"


def expired_jwt(user: User) -> JWT:
    """A simplejwt access token of `user` that expired an hour ago."""
    token = JWT.for_user(user)
    token.set_exp(from_time=timezone.now() - timedelta(hours=2), lifetime=timedelta(hours=1))
    return token


def test_expired_and_garbage_jwts_are_invalid_tokens_and_never_logged(
    ada: User, configure: Any, caplog: pytest.LogCaptureFixture
) -> None:
    configure(AUTHENTICATORS=[*OURS, drf(SIMPLEJWT, scopes=["mcp"])])
    expired, garbage = expired_jwt(ada), GARBAGE_JWT
    with caplog.at_level(logging.DEBUG, logger="mcp_expose"):
        assert authenticate(bearer(str(expired)), resource=RESOURCE) == INVALID_TOKEN
        assert authenticate(bearer(garbage), resource=RESOURCE) == INVALID_TOKEN
    assert "JWTAuthentication raised InvalidToken" in caplog.text
    assert str(expired) not in caplog.text and garbage not in caplog.text


def test_order_decides_the_first_claimer_wins(ada: User, configure: Any) -> None:
    _, secret = ApiKey.create_key(user=ada, name="agent")
    # simplejwt claims every bearer: listed first, it refuses our API keys as tokens it cannot decode.
    configure(AUTHENTICATORS=[drf(SIMPLEJWT), *OURS])
    assert authenticate(bearer(secret), resource=RESOURCE) == INVALID_TOKEN
    configure(AUTHENTICATORS=[*OURS, drf(SIMPLEJWT)])
    assert isinstance(authenticate(bearer(secret), resource=RESOURCE), Principal)
    # Two that would both accept: the first one's principal, scopes and name.
    configure(
        AUTHENTICATORS=[drf(here("AnyBearer"), name="first", scopes=["a"]), drf(here("AnyBearer"), name="second")]
    )
    first = authenticate(bearer("whatever"), resource=RESOURCE)
    assert isinstance(first, Principal) and (first.authenticator, first.scopes) == ("first", {"a"})


def test_third_party_credentials_are_never_cached(
    ada: User, configure: Any, django_assert_num_queries: Any, django_assert_max_num_queries: Any
) -> None:
    configure(AUTHENTICATORS=[*OURS, drf(SIMPLEJWT)])
    token = jwt_for(ada)
    stamp = CredentialRequest({}).stamp
    assert isinstance(authenticate(bearer(token), resource=RESOURCE, credentials_stamp=stamp), Principal)
    assert credential_cache.get(token, RESOURCE, stamp) is None
    # Asked again every time (DOT's "never issued", the user, the permissions), and never on the event loop.
    with django_assert_max_num_queries(5):
        assert isinstance(authenticate(bearer(token), resource=RESOURCE, credentials_stamp=stamp), Principal)
    with django_assert_num_queries(0):
        assert authenticate_known(bearer(token), (), RESOURCE, stamp) is None
        assert authenticate_known({}, (), RESOURCE, stamp) is None  # the project's class may read any header
    User.objects.filter(pk=ada.pk).update(is_active=False)  # no signal: a cached principal would live on
    assert authenticate(bearer(token), resource=RESOURCE, credentials_stamp=stamp) == INVALID_TOKEN


# The DRF adapter: a project's own classes ----------------------------------------------------------------------


def test_a_project_scheme_is_claimed_by_its_class(ada: User, configure: Any, caplog: pytest.LogCaptureFixture) -> None:
    partner = {"authorization": "Partner pk-ada-0123456789"}
    assert authenticate(partner, resource=RESOURCE) == WRONG_SCHEME  # nobody's scheme by default
    configure(AUTHENTICATORS=[*OURS, drf(here("PartnerAuthentication"), scopes=["library:read"])])
    principal = authenticate(partner, resource=RESOURCE)
    assert (
        isinstance(principal, Principal)
        and principal.user == ada
        and principal.authenticator == "PartnerAuthentication"
    )
    assert principal.scopes == {"library:read", "mcp"}
    with caplog.at_level(logging.INFO, logger="mcp_expose"):
        assert authenticate({"authorization": "Partner pk-guessed-secret"}, resource=RESOURCE) == INVALID_TOKEN
    assert (
        "pk-guessed-secret" not in caplog.text
        and INVALID_TOKEN.description == "The credentials are invalid, expired or revoked."
    )


def test_a_header_of_its_own_and_a_claim_of_a_plain_dict(ada: User, configure: Any) -> None:
    configure(AUTHENTICATORS=[*OURS, drf(here("HeaderAuthentication"), scope_claim="scp")])
    principal = authenticate({"x-partner-key": "pk-ada-0123456789"}, resource=RESOURCE)
    assert isinstance(principal, Principal) and principal.scopes == {"library:read", "mcp"}
    assert authenticate({"x-partner-key": "nope"}, resource=RESOURCE) == INVALID_TOKEN
    assert authenticate({}, resource=RESOURCE) == MISSING


def test_a_crashing_class_is_refused_with_401_and_logged_without_the_credential(
    configure: Any, caplog: pytest.LogCaptureFixture
) -> None:
    configure(AUTHENTICATORS=[drf(here("Crashing"))])
    with caplog.at_level(logging.INFO, logger="mcp_expose"):
        assert authenticate(bearer("s3cret-value"), resource=RESOURCE) == UNCHECKABLE
    assert UNCHECKABLE.status == 401 and UNCHECKABLE.error == "invalid_token"
    assert "Crashing failed authenticating with RuntimeError" in caplog.text and "test_authenticators.py" in caplog.text
    assert "s3cret-value" not in caplog.text


def test_a_class_that_cannot_reach_the_database_is_an_outage(configure: Any) -> None:
    configure(AUTHENTICATORS=[drf(here("Locked"))])
    with pytest.raises(DependencyUnavailable) as caught:
        authenticate(bearer("anything"), resource=RESOURCE)
    assert caught.value.dependency == "database"


def test_an_inactive_user_is_refused_whatever_the_class_says(configure: Any) -> None:
    configure(AUTHENTICATORS=[drf(here("Inactive"))])
    assert authenticate(bearer("anything"), resource=RESOURCE) == INVALID_TOKEN


def test_a_drf_class_never_sees_cookies(ada: User, configure: Any) -> None:
    configure(AUTHENTICATORS=[drf(here("ReadsCookies"))])
    assert authenticate({"cookie": "sessionid=abc; other=1"}, resource=RESOURCE) == MISSING


# Session cookies -------------------------------------------------------------------------------------------------


@pytest.fixture
def session_cookie(ada: User) -> str:
    client = Client()
    client.force_login(ada)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def browser(cookie: str, origin: str | None = "http://testserver", site: str | None = "same-origin") -> dict[str, str]:
    headers = {"cookie": cookie, "host": "testserver"}
    if origin is not None:
        headers["origin"] = origin
    if site is not None:
        headers["sec-fetch-site"] = site
    return headers


def test_a_session_cookie_is_ignored_by_default(session_cookie: str) -> None:
    assert authenticate(browser(session_cookie), resource=RESOURCE) == MISSING


def test_a_session_cookie_with_the_setting_from_this_site_only(ada: User, session_cookie: str, configure: Any) -> None:
    configure(SESSION_AUTH=True, SESSION_SCOPES=["library:read"])
    assert type(get_authenticators()[-1]) is SessionAuthenticator
    principal = authenticate(browser(session_cookie), resource=RESOURCE)
    assert isinstance(principal, Principal) and principal.user == ada
    assert (principal.method, principal.scopes, principal.label) == (
        "session",
        {"library:read", "mcp"},
        "ada (session session)",
    )
    same_site_tool = authenticate(browser(session_cookie, site=None), resource=RESOURCE)  # an older browser
    assert isinstance(same_site_tool, Principal)
    for refused in (
        browser(session_cookie, site="cross-site"),
        browser(session_cookie, origin="https://evil.example"),
        browser(session_cookie, origin=None),
        browser(session_cookie, origin=None, site=None),
        browser(session_cookie, origin="http://testserver:8080"),
    ):
        assert authenticate(refused, resource=RESOURCE) == COOKIE_NOT_SAME_ORIGIN
    assert COOKIE_NOT_SAME_ORIGIN.status == 401
    configure(SESSION_AUTH=True, ALLOWED_ORIGINS=["http://localhost:*"])
    listed = authenticate(browser(session_cookie, origin="http://localhost:5173", site="same-site"), resource=RESOURCE)
    assert isinstance(listed, Principal) and listed.scopes == frozenset()  # SESSION_SCOPES defaults to none


def test_an_explicit_credential_wins_over_the_cookie(ada: User, session_cookie: str, configure: Any) -> None:
    configure(SESSION_AUTH=True)
    assert authenticate({**browser(session_cookie), **bearer("not-a-token")}, resource=RESOURCE) == INVALID_TOKEN
    _, secret = ApiKey.create_key(user=ada, name="agent")
    by_key = authenticate({**browser(session_cookie, site="cross-site"), **bearer(secret)}, resource=RESOURCE)
    assert isinstance(by_key, Principal) and by_key.method == "api_key"


def test_a_logged_out_session_is_no_credential(ada: User, configure: Any) -> None:
    configure(SESSION_AUTH=True)
    client = Client()
    client.force_login(ada)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    client.logout()
    assert authenticate(browser(cookie), resource=RESOURCE) == MISSING
    assert authenticate(browser(f"{settings.SESSION_COOKIE_NAME}=forged"), resource=RESOURCE) == MISSING


def test_without_a_cookie_the_session_authenticator_needs_no_hop(
    configure: Any, django_assert_num_queries: Any
) -> None:
    configure(SESSION_AUTH=True)
    stamp = CredentialRequest({}).stamp
    with django_assert_num_queries(0):
        assert authenticate_known({}, (), RESOURCE, stamp) == MISSING
        assert authenticate_known({"cookie": "sessionid=x", "origin": "http://testserver"}, (), RESOURCE, stamp) is None


# Misconfiguration ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("authenticators", "message"),
    [
        ("mcp_expose.access.authenticators.ApiKeyAuthenticator", "AUTHENTICATORS must be a list"),
        (["no.such.module.Authenticator"], "AUTHENTICATORS[0] ('no.such.module.Authenticator') cannot be imported"),
        ([{"PATH": ADAPTER}], "AUTHENTICATORS[0] must be a dotted path or {'CLASS': path, 'OPTIONS': {...}}"),
        ([{"CLASS": ADAPTER, "OPTIONS": ["x"]}], "has OPTIONS that are not a dict"),
        ([SIMPLEJWT], "is a DRF authentication class: list it through the adapter"),
        (["django.contrib.auth.models.User"], "is not a subclass of mcp_expose.access.authenticators.Authenticator"),
        ([{"CLASS": OURS[0], "OPTIONS": {"lifetime": 3}}], "unknown OPTIONS 'lifetime' (accepted: none)"),
        ([drf(SIMPLEJWT, scope=["a"])], "unknown OPTIONS 'scope' (accepted: authentication_class, name, scope_claim"),
        ([{"CLASS": ADAPTER}], "OPTIONS['authentication_class'] must be the dotted path of a DRF authentication class"),
        (
            [drf("rest_framework_simplejwt.authentication.Nope")],
            "'rest_framework_simplejwt.authentication.Nope' cannot",
        ),
        ([drf("django.contrib.auth.models.User")], "is not a DRF authentication class"),
        ([drf(SIMPLEJWT, scopes="mcp")], "OPTIONS['scopes'] must be a list of scope names"),
        ([drf(SIMPLEJWT, scope_claim="")], "OPTIONS['scope_claim'] must be a non-empty string"),
        ([drf(SIMPLEJWT, scopes_for="tests.test_authenticators.PARTNER_KEYS")], "is not callable"),
        (
            [drf("rest_framework.authentication.SessionAuthentication")],
            "is DRF's SessionAuthentication, whose CSRF check does not fit MCP requests: turn on "
            "MCP_EXPOSE['SESSION_AUTH']",
        ),
        (
            ["mcp_expose.access.session_authentication.SessionAuthenticator"],
            "is listed, but SESSION_AUTH is off",
        ),
    ],
)
def test_misconfiguration_is_said_clearly(configure: Any, authenticators: Any, message: str) -> None:
    configure(AUTHENTICATORS=authenticators)
    problems = configuration_problems()
    assert any(message in problem for problem in problems), problems
    with pytest.raises(ImproperlyConfigured, match="MCP_EXPOSE\\['AUTHENTICATORS'\\] is misconfigured") as caught:
        get_authenticators()
    assert message in str(caught.value)
    with pytest.raises(ImproperlyConfigured):
        authenticate(bearer("anything"), resource=RESOURCE)


def test_session_settings_are_checked(configure: Any) -> None:
    configure(SESSION_AUTH="yes", SESSION_SCOPES="mcp")
    assert configuration_problems() == [
        "SESSION_AUTH must be True or False, not 'yes'",
        "SESSION_SCOPES must be a list of scope names, not 'mcp'",
    ]


def test_a_project_authenticator_subclass(ada: User, configure: Any) -> None:
    configure(AUTHENTICATORS=[{"CLASS": here("TeamAuthenticator"), "OPTIONS": {"team": "ada"}}, *OURS])
    principal = authenticate({"x-team": "ada"}, resource=RESOURCE)
    assert isinstance(principal, Principal) and principal.scopes == {"team"} and principal.authenticator == "team"
    assert authenticate({"x-team": "bob"}, resource=RESOURCE) == INVALID_TOKEN


class TeamAuthenticator(Authenticator):
    """The interface itself, without DRF: `X-Team: <name>` for one configured team member."""

    name = "team"
    options = frozenset({"team"})

    def authenticate(self, request: CredentialRequest) -> Principal | Any:
        from mcp_expose.core.principal import principal_for_user

        member = request.headers.get("x-team")
        if member is None:
            return None
        if member != self.settings["team"]:
            return INVALID_TOKEN
        return principal_for_user(User.objects.get(username=member), frozenset({"team"}), "drf", authenticator="team")


class BrokenAuthenticator(Authenticator):
    """A project's authenticator with a bug: it raises with the credential in its message."""

    def authenticate(self, request: CredentialRequest) -> Principal | Any:
        raise LookupError(f"no such gateway user for {request.headers.get('x-team')}")


def test_an_authenticator_that_raises_is_a_401_logged_without_its_message(
    configure: Any, caplog: pytest.LogCaptureFixture
) -> None:
    configure(AUTHENTICATORS=[here("BrokenAuthenticator"), *OURS])
    with caplog.at_level(logging.DEBUG, logger="mcp_expose"):
        refused = authenticate({"x-team": "s3cret-team-token"}, resource=RESOURCE)
    assert refused == UNCHECKABLE and refused.status == 401
    assert "BrokenAuthenticator failed authenticating with LookupError" in caplog.text
    assert "s3cret-team-token" not in caplog.text


# What tools see of the credential ---------------------------------------------------------------------------


def reachable_text(value: Any, depth: int = 3) -> list[str]:
    """Every text a tool can read off `value` without calling a method: its str and repr, its attributes' and its
    items' (for a CallerCredential: its fields, its claims, its user's name), `depth` levels down."""
    from dataclasses import fields, is_dataclass

    texts = [str(value), repr(value)]
    if depth == 0 or value is None or isinstance(value, str | int | float | bool):
        return texts
    children: list[Any] = []
    if is_dataclass(value) and not isinstance(value, type):
        children += [getattr(value, spec.name) for spec in fields(value) if spec.name != "user"]
    if isinstance(value, dict | MappingProxyType):
        children += [*value.keys(), *value.values()]
    if isinstance(value, list | tuple | set | frozenset):
        children += list(value)
    for name in ("scope", "payload", "token", "key", "refresh_token", "access_token", "application"):
        if hasattr(type(value), name) or (not is_dataclass(value) and hasattr(value, name)):
            children.append(getattr(value, name, None))
    return texts + [text for child in children for text in reachable_text(child, depth - 1)]


@pytest.mark.parametrize("way", ["api_key", "oauth", "simplejwt"])
def test_no_tool_can_reach_a_usable_secret_of_its_caller(ada: User, configure: Any, way: str) -> None:
    from rest_framework.request import Request

    from mcp_expose.core.caller_credential import CallerCredential, tool_facing
    from mcp_expose.core.requests import build_http_request
    from mcp_expose.declare.adapters.http import force_authentication

    configure(AUTHENTICATORS=[*OURS, drf(SIMPLEJWT, scopes=["mcp"], scope_claim="scope")])
    if way == "api_key":
        _, secret = ApiKey.create_key(user=ada, name="agent", scopes="library:read")
    elif way == "oauth":
        secret = "dot-bearer-secret-0001"
        app = Application.objects.create(
            name="app", client_id="client-1", client_type="public", authorization_grant_type="authorization-code"
        )
        AccessToken.objects.create(
            user=ada,
            application=app,
            token=secret,
            scope="mcp library:read",
            resource=[RESOURCE],
            expires=timezone.now() + timedelta(hours=1),
        )
    else:
        secret = jwt_for(ada, scope="library:read")
    principal = authenticate(bearer(secret), resource=RESOURCE)
    assert isinstance(principal, Principal) and principal.credential is not None
    seen = tool_facing(principal)  # what InvocationContext.principal holds
    plain = build_http_request(seen, {}, "GET")  # a Django view's request
    drf_request = build_http_request(seen, {}, "GET")
    force_authentication(drf_request, seen)
    for auth in (seen.credential, plain.auth, Request(drf_request).auth):  # type: ignore[attr-defined]
        assert isinstance(auth, CallerCredential)
        assert not any(secret in text for text in reachable_text(auth)), way
        if way == "simplejwt":
            signature = secret.rsplit(".", 1)[1]
            assert not any(signature in text for text in reachable_text(auth))
    credential = seen.credential
    # What code asks of a credential still answers: DOT's token interface, and a JWT's claims.
    assert credential.is_valid(["library:read"]) and not credential.is_valid(["library:write"])
    assert credential.scope == " ".join(sorted(principal.scopes)) and credential.user == ada
    if way == "simplejwt":
        assert credential["scope"] == "library:read" and credential.payload["user_id"] == str(ada.pk)
    # Opting in hands over the authenticator's own object.
    configure(AUTHENTICATORS=[*OURS, drf(SIMPLEJWT, scopes=["mcp"], scope_claim="scope")], RAW_CREDENTIAL_TO_TOOLS=True)
    assert tool_facing(principal).credential is principal.credential
