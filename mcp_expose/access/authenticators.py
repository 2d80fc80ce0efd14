"""The authenticators tried, in order, on every MCP request: ours (API keys, OAuth access tokens) and a project's.

`MCP_EXPOSE["AUTHENTICATORS"]` lists them. Each answers `authenticate(request)` with a `Principal` (accepted), an
`AuthFailure` (its kind of credential, refused) or None (not its kind: the next one is asked). Ours remember who
a credential belongs to in the credential cache, which signals keep honest; nobody else's answers are cached,
since their revocation sends no signal we know. Runs in the edge's sync thread hop, except `authenticate_known`,
which answers on the event loop from memory alone, or says it cannot (`NEEDS_HOP`).
"""

from __future__ import annotations

import enum
import hashlib
import logging
import traceback
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, ClassVar, Final

from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone
from django.utils.module_loading import import_string

from mcp_expose.access.credential_cache import cache as credential_cache
from mcp_expose.access.credential_cache import credentials_revision
from mcp_expose.access.failures import INVALID_TOKEN, UNCHECKABLE, AuthFailure
from mcp_expose.access.scopes import expand_scopes
from mcp_expose.core.conf import ExposeSettings, get_settings
from mcp_expose.core.outage import DependencyUnavailable, database_unavailable
from mcp_expose.core.principal import Principal, principal_for_user

logger = logging.getLogger("mcp_expose.auth")

SESSION_AUTHENTICATOR = "mcp_expose.access.session_authentication.SessionAuthenticator"
DRF_AUTHENTICATOR = "mcp_expose.access.drf_authentication.DrfAuthenticator"


class Hop(enum.Enum):
    NEEDED = "needed"


# `authenticate_known`'s "I cannot tell without the database (or without running code that may use it)".
NEEDS_HOP: Final = Hop.NEEDED

Answer = Principal | AuthFailure | None


class CredentialRequest:
    """What an authenticator sees of an MCP request: its headers (lower-cased names), the canonical URI of the
    endpoint called (`resource`; None outside a request), and the credentials stamp the edge read, if any."""

    __slots__ = ("headers", "resource", "_stamp")

    def __init__(self, headers: Mapping[str, str], resource: str | None = None, stamp: str | None = None) -> None:
        self.headers = headers
        self.resource = resource
        self._stamp = stamp

    @property
    def authorization(self) -> tuple[str, str] | None:
        """The Authorization header's scheme (lower-cased) and credential, or None without one."""
        value = self.headers.get("authorization")
        if not value:
            return None
        scheme, _, credential = value.strip().partition(" ")
        return scheme.lower(), credential.strip()

    @property
    def bearer(self) -> str | None:
        """The bearer credential presented ("" for a bare "Bearer"), or None for none or another scheme."""
        presented = self.authorization
        return presented[1] if presented is not None and presented[0] == "bearer" else None

    @property
    def stamp(self) -> str:
        """The credentials stamp the cache is keyed under, read from the shared cache once if the edge did not."""
        if self._stamp is None:
            self._stamp = credentials_revision()
        return self._stamp


class Authenticator:
    """Subclass and override `authenticate`; list the subclass in `MCP_EXPOSE["AUTHENTICATORS"]`.

    `options` names the OPTIONS the class accepts (passed to `__init__` as keyword arguments); `check_options`
    says what is wrong with them, for the system check and for the first request. `name` appears in logs and
    in `Principal.authenticator`. Never log a credential: name the authenticator and the kind of refusal.
    """

    name: ClassVar[str] = ""
    options: ClassVar[frozenset[str]] = frozenset()
    # Accepts Django's session cookie: allowed only with MCP_EXPOSE["SESSION_AUTH"] on.
    session_cookie: ClassVar[bool] = False

    def __init__(self, **options: Any) -> None:
        self.settings = options

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> list[str]:
        unknown = sorted(set(options) - cls.options)
        if not unknown:
            return []
        accepted = ", ".join(sorted(cls.options)) or "none"
        return [f"unknown OPTIONS {', '.join(map(repr, unknown))} (accepted: {accepted})"]

    @property
    def label(self) -> str:
        return self.name or type(self).__name__

    def authenticate(self, request: CredentialRequest) -> Answer:
        """A principal, a refusal of a credential of this authenticator's kind, or None: not its kind."""
        raise NotImplementedError

    def authenticate_known(self, request: CredentialRequest) -> Answer | Hop:
        """`authenticate`'s answer when it needs no database and no project code, else `NEEDS_HOP`. Called on the
        event loop: it must not block."""
        return NEEDS_HOP


class ApiKeyAuthenticator(Authenticator):
    """`Authorization: Bearer mcpx_...`: the API keys of `mcp_expose.models.ApiKey`. A bearer shaped like one of
    our keys is ours, and refused when it is not a usable key."""

    name = "api_key"

    def authenticate(self, request: CredentialRequest) -> Answer:
        token = _api_key_shaped(request)
        if token is None:
            return None
        return cached_lookup(token, request, lambda: authenticate_api_key(token))

    def authenticate_known(self, request: CredentialRequest) -> Answer | Hop:
        token = _api_key_shaped(request)
        if token is None:
            return None
        return credential_cache.get(token, request.resource, request.stamp) or NEEDS_HOP


class OAuthTokenAuthenticator(Authenticator):
    """`Authorization: Bearer <access token>` issued by django-oauth-toolkit for exactly this resource. A token DOT
    does not know is not ours (None: a JWT goes on to the next authenticator); one it knows but that is expired,
    revoked, for another resource, or of an inactive user is refused."""

    name = "oauth"

    def authenticate(self, request: CredentialRequest) -> Answer:
        token = self._candidate(request)
        if token is None:
            return None
        resource = request.resource
        assert resource is not None
        return cached_lookup(token, request, lambda: _access_token_or_none(token, resource))

    def authenticate_known(self, request: CredentialRequest) -> Answer | Hop:
        token = self._candidate(request)
        if token is None:
            return None
        return credential_cache.get(token, request.resource, request.stamp) or NEEDS_HOP

    @staticmethod
    def _candidate(request: CredentialRequest) -> str | None:
        from django.apps import apps

        token = request.bearer
        if not token or request.resource is None or not apps.is_installed("oauth2_provider"):
            return None
        return token


def refused_after_failure(label: str, exc: Exception, doing: str = "authenticating") -> AuthFailure:
    """What an authenticator's unexpected exception answers: 503 when the database is away, else 401 "could not
    be checked", logged with the exception's type and where it was raised, never its message or locals (either
    may hold the credential)."""
    if database_unavailable(exc):
        raise DependencyUnavailable("database", f"{label} {doing}") from exc
    frames = traceback.extract_tb(exc.__traceback__, limit=-5)
    where = "; ".join(f"{frame.filename}:{frame.lineno} in {frame.name}" for frame in frames)
    logger.error(
        "%s failed %s with %s (at %s); the request is refused with 401", label, doing, type(exc).__name__, where
    )
    return UNCHECKABLE


def _api_key_shaped(request: CredentialRequest) -> str | None:
    from mcp_expose.models import ApiKey

    token = request.bearer
    return token if token and ApiKey.prefix_of(token) is not None else None


def cached_lookup(token: str, request: CredentialRequest, look_up: Callable[[], Answer]) -> Answer:
    """The credential's owner, from this process's memory while nothing about credentials changed; while the
    database is unavailable, a credential this process knew stays known for a grace period. For our own
    credentials only: the stamp moves on their changes, not on anyone else's."""
    stamp, resource = request.stamp, request.resource
    known = credential_cache.get(token, resource, stamp)
    if known is not None:
        return known
    try:
        result = look_up()
    except Exception as exc:
        if not database_unavailable(exc):
            raise
        held = credential_cache.get(token, resource, stamp, grace=get_settings().CREDENTIAL_OUTAGE_GRACE_SECONDS)
        if held is None:
            raise DependencyUnavailable("database", "checking a credential this process does not know") from exc
        return held
    if isinstance(result, Principal):
        credential_cache.put(token, resource, stamp, result)
    return result


def _access_token_or_none(token: str, resource: str) -> Answer:
    from oauth2_provider.models import get_access_token_model

    from mcp_expose.access.oauth_tokens import authenticate_access_token

    result = authenticate_access_token(token, resource)
    if result is INVALID_TOKEN:
        checksum = hashlib.sha256(token.encode()).hexdigest()
        if not get_access_token_model().objects.filter(token_checksum=checksum).exists():
            return None  # DOT never issued it: another authenticator's, perhaps
    return result


def authenticate_api_key(secret: str, *, record_use: bool = True) -> Principal | AuthFailure:
    from mcp_expose.models import ApiKey

    prefix = ApiKey.prefix_of(secret)
    if prefix is None:
        return INVALID_TOKEN
    key = ApiKey.objects.select_related("user").filter(prefix=prefix).first()
    if key is None or not key.matches(secret):
        logger.info("Refused an API key with prefix %s: unknown or wrong secret", prefix)
        return INVALID_TOKEN
    if not key.is_usable:
        logger.info("Refused API key %s: revoked, expired or its user is inactive", prefix)
        return INVALID_TOKEN
    if record_use:
        try:
            _touch(key)
        except Exception as exc:
            if not database_unavailable(exc):
                raise
            logger.debug("Could not record the use of API key %s: the database is unavailable", prefix)
    return principal_for_user(
        key.user, expand_scopes(key.scope_set), "api_key", api_key_id=key.pk, api_key_prefix=key.prefix, credential=key
    )


def _touch(key: Any) -> None:
    """Record use, at most once per interval, with one UPDATE and no signals."""
    from mcp_expose.models import ApiKey

    now = timezone.now()
    interval = timedelta(seconds=get_settings().API_KEY_LAST_USED_INTERVAL)
    last = getattr(key, "last_used_at", None)
    if last is None or now - last >= interval:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)


# The chain, built from the settings ----------------------------------------------------------------------------

_built: tuple[ExposeSettings, tuple[Authenticator, ...]] | None = None


def get_authenticators() -> tuple[Authenticator, ...]:
    """The chain for the current settings, built once per settings object (so `override_settings` applies).
    Raises `ImproperlyConfigured`, saying every problem, when the settings are wrong."""
    global _built
    conf = get_settings()
    built = _built
    if built is not None and built[0] is conf:
        return built[1]
    chain = build_authenticators(conf)
    _built = (conf, chain)
    return chain


def build_authenticators(conf: ExposeSettings) -> tuple[Authenticator, ...]:
    entries, problems = _resolve(conf)
    if problems:
        raise ImproperlyConfigured("MCP_EXPOSE['AUTHENTICATORS'] is misconfigured: " + "; ".join(problems) + ".")
    return tuple(cls(**options) for cls, options in entries)


def configuration_problems() -> list[str]:
    """What is wrong with AUTHENTICATORS, SESSION_AUTH and SESSION_SCOPES, one sentence each (for a system check)."""
    return _resolve(get_settings())[1]


def _resolve(conf: ExposeSettings) -> tuple[list[tuple[type[Authenticator], dict[str, Any]]], list[str]]:
    listed = conf.AUTHENTICATORS
    if not isinstance(listed, list | tuple):
        return [], [f"AUTHENTICATORS must be a list of authenticators, not {type(listed).__name__}"]
    entries: list[tuple[type[Authenticator], dict[str, Any]]] = []
    problems: list[str] = []
    paths: list[str] = []
    for index, entry in enumerate(listed):
        where = f"AUTHENTICATORS[{index}]"
        parsed = _parse_entry(entry)
        if isinstance(parsed, str):
            problems.append(f"{where} {parsed}")
            continue
        path, options = parsed
        cls = _authenticator_class(path)
        if isinstance(cls, str):
            problems.append(f"{where} ({path!r}) {cls}")
            continue
        problems.extend(f"{where} ({path!r}): {problem}" for problem in cls.check_options(options))
        entries.append((cls, options))
        paths.append(path)
    session = conf.SESSION_AUTH
    if not isinstance(session, bool):
        problems.append(f"SESSION_AUTH must be True or False, not {session!r}")
    listed_session = any(cls.session_cookie for cls, _ in entries)
    if listed_session and session is not True:
        problems.append(
            f"{SESSION_AUTHENTICATOR} is listed, but SESSION_AUTH is off: turn it on to accept session cookies "
            "(and read docs/authentication.md for the rules they follow), or remove it"
        )
    scopes = conf.SESSION_SCOPES
    if not isinstance(scopes, list | tuple) or not all(isinstance(scope, str) for scope in scopes):
        problems.append(f"SESSION_SCOPES must be a list of scope names, not {scopes!r}")
    if session is True and not listed_session and not problems:
        cls = _authenticator_class(SESSION_AUTHENTICATOR)
        assert not isinstance(cls, str)
        entries.append((cls, {}))
    return entries, problems


def _parse_entry(entry: object) -> tuple[str, dict[str, Any]] | str:
    if isinstance(entry, str):
        return entry, {}
    if not isinstance(entry, Mapping) or "CLASS" not in entry or set(entry) - {"CLASS", "OPTIONS"}:
        return f"must be a dotted path or {{'CLASS': path, 'OPTIONS': {{...}}}}, not {entry!r}"
    path, options = entry["CLASS"], entry.get("OPTIONS", {})
    if not isinstance(path, str):
        return f"has a CLASS that is not a dotted path: {path!r}"
    if not isinstance(options, Mapping):
        return f"({path!r}) has OPTIONS that are not a dict: {options!r}"
    return path, dict(options)


def _authenticator_class(path: str) -> type[Authenticator] | str:
    try:
        cls = import_string(path)
    except ImportError as exc:
        return f"cannot be imported ({type(exc).__name__}: {exc})"
    if isinstance(cls, type) and issubclass(cls, Authenticator):
        return cls
    if isinstance(cls, type) and _is_drf_authentication(cls):
        return (
            "is a DRF authentication class: list it through the adapter, "
            f"{{'CLASS': {DRF_AUTHENTICATOR!r}, 'OPTIONS': {{'authentication_class': {path!r}}}}}"
        )
    return f"is not a subclass of {Authenticator.__module__}.Authenticator"


def _is_drf_authentication(cls: type) -> bool:
    return any(
        f"{base.__module__}.{base.__qualname__}" == "rest_framework.authentication.BaseAuthentication"
        for base in cls.__mro__
    )
