"""A project's DRF authentication class as an MCP authenticator: the credentials its API already accepts.

```python
{"CLASS": "mcp_expose.access.drf_authentication.DrfAuthenticator",
 "OPTIONS": {"authentication_class": "rest_framework_simplejwt.authentication.JWTAuthentication",
             "scopes": ["mcp", "library:read"], "scope_claim": "scope"}}
```

The class sees a DRF `Request` carrying the MCP request's headers, without its cookies (a session cookie is the
session authenticator's, under its own rules). Its `(user, auth)` becomes a principal with method "drf", holding
the scopes the OPTIONS map and no others:

- `scopes`: granted to every user it authenticates;
- `scope_claim`: read from `auth` when it is mapping-like (`auth.get(claim)`, as simplejwt's tokens allow), a
  space-separated string or a list of strings;
- `scopes_for`: the dotted path of a callable `(user, auth) -> iterable of scope names`.

They are united and widened by SCOPE_HIERARCHY. `AuthenticationFailed` (and `NotAuthenticated`) is a refusal
(401 invalid_token); anything else the class raises is logged by type and place, never by message, and refused
(401), or answered 503 when the database is unavailable. Nothing here is cached: the class is asked every time.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

from django.utils.module_loading import import_string

from mcp_expose.access.authenticators import Answer, Authenticator, CredentialRequest, refused_after_failure
from mcp_expose.access.failures import INVALID_TOKEN
from mcp_expose.access.scopes import expand_scopes
from mcp_expose.core.principal import anonymous_principal, principal_for_user
from mcp_expose.core.requests import build_http_request

logger = logging.getLogger("mcp_expose.auth")


class DrfAuthenticator(Authenticator):
    options: ClassVar[frozenset[str]] = frozenset(
        {"authentication_class", "scopes", "scope_claim", "scopes_for", "name"}
    )

    def __init__(
        self,
        *,
        authentication_class: str,
        scopes: Iterable[str] = (),
        scope_claim: str | None = None,
        scopes_for: str | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__()
        self.authentication_class: type[Any] = import_string(authentication_class)
        self.scopes = frozenset(scopes)
        self.scope_claim = scope_claim
        self.scopes_for: Callable[[Any, Any], Iterable[str]] | None = import_string(scopes_for) if scopes_for else None
        self.display_name = name or self.authentication_class.__name__

    @property
    def label(self) -> str:
        return self.display_name

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> list[str]:
        problems = super().check_options(options)
        path = options.get("authentication_class")
        if not isinstance(path, str):
            problems.append("OPTIONS['authentication_class'] must be the dotted path of a DRF authentication class")
        else:
            problems.extend(_authentication_class_problems(path))
        scopes = options.get("scopes", [])
        if not isinstance(scopes, list | tuple) or not all(isinstance(scope, str) for scope in scopes):
            problems.append(f"OPTIONS['scopes'] must be a list of scope names, not {scopes!r}")
        for option in ("scope_claim", "name"):
            value = options.get(option)
            if value is not None and (not isinstance(value, str) or not value):
                problems.append(f"OPTIONS[{option!r}] must be a non-empty string, not {value!r}")
        scopes_for = options.get("scopes_for")
        if scopes_for is not None:
            problems.extend(_callable_problems(scopes_for))
        return problems

    def authenticate(self, request: CredentialRequest) -> Answer:
        try:
            found = self.authentication_class().authenticate(_drf_request(request))
        except Exception as exc:
            return self._refusal(exc)
        if found is None:
            return None
        user, auth = found
        if not getattr(user, "is_authenticated", False) or not getattr(user, "is_active", False):
            logger.info("Refused a credential %s accepted: its user is anonymous or inactive", self.display_name)
            return INVALID_TOKEN
        try:
            scopes = self.scopes_of(user, auth)
        except Exception as exc:
            return self._refusal(exc, "mapping its scopes")
        return principal_for_user(user, expand_scopes(scopes), "drf", credential=auth, authenticator=self.display_name)

    def scopes_of(self, user: Any, auth: Any) -> frozenset[str]:
        """The scopes the OPTIONS map for this `(user, auth)`: fixed ones, the claim's, `scopes_for`'s."""
        granted = set(self.scopes)
        if self.scope_claim is not None:
            granted |= _claimed(auth, self.scope_claim)
        if self.scopes_for is not None:
            granted |= {scope for scope in self.scopes_for(user, auth) if isinstance(scope, str)}
        return frozenset(granted)

    def _refusal(self, exc: Exception, doing: str = "authenticating") -> Answer:
        from rest_framework.exceptions import AuthenticationFailed, NotAuthenticated

        if isinstance(exc, AuthenticationFailed | NotAuthenticated):
            # The message may quote the credential; the class name and the exception's type say enough.
            logger.info("Refused a credential: %s raised %s", self.display_name, type(exc).__name__)
            return INVALID_TOKEN
        return refused_after_failure(self.display_name, exc, doing)


# Rows of a credential model looked at for one user when its reference is a digest (DRF's Token: one per user).
MAX_CREDENTIAL_CANDIDATES = 50


def credential_reference(auth: Any) -> dict[str, Any] | None:
    """How to find again the row a DRF class authenticated with (its `auth`, when that is a model instance, as
    DRF's `Token` is), without keeping a secret: the model and its primary key when that is a number, else a
    digest of the key, when the model has a `user` field to find its candidates by. None: nothing to find again
    (a JWT, a session), and only the user's being active can be checked."""
    from django.db.models import Model

    if not isinstance(auth, Model) or auth.pk is None:
        return None
    label = auth._meta.label_lower
    if isinstance(auth.pk, int):
        return {"model": label, "pk": auth.pk}
    if not _has_user_field(type(auth)):
        return None
    return {"model": label, "digest": _digest(auth.pk)}


def credential_reference_holds(reference: Mapping[str, Any], user: Any) -> bool:
    """Whether the row `credential_reference` named still exists (and, found by digest, is `user`'s). Sync."""
    from django.apps import apps

    try:
        model = apps.get_model(str(reference.get("model")))
    except (LookupError, ValueError):
        return False
    rows = model._default_manager.all()
    if "pk" in reference:
        return bool(rows.filter(pk=reference["pk"]).exists())
    digest = str(reference.get("digest") or "")
    if not digest or not _has_user_field(model):
        return False
    candidates = rows.filter(user=user).values_list("pk", flat=True)[:MAX_CREDENTIAL_CANDIDATES]
    return any(hmac.compare_digest(_digest(pk), digest) for pk in candidates)


def _has_user_field(model: Any) -> bool:
    from django.contrib.auth import get_user_model
    from django.core.exceptions import FieldDoesNotExist

    try:
        field = model._meta.get_field("user")
    except FieldDoesNotExist:
        return False
    return getattr(field, "related_model", None) is get_user_model()


def _digest(pk: Any) -> str:
    return hashlib.sha256(str(pk).encode()).hexdigest()


def _claimed(auth: Any, claim: str) -> set[str]:
    getter = getattr(auth, "get", None)
    if not callable(getter):
        return set()
    value = getter(claim)
    if isinstance(value, str):
        return set(value.split())
    if isinstance(value, list | tuple | set | frozenset):
        return {scope for scope in value if isinstance(scope, str)}
    return set()


def _drf_request(request: CredentialRequest) -> Any:
    """A DRF `Request` around a Django request made of the MCP request's headers, Authorization included and
    cookies left out, as an API view's authentication would see it."""
    from rest_framework.request import Request

    http_request = build_http_request(anonymous_principal(), request.headers, "POST")
    del http_request.mcp_principal  # type: ignore[attr-defined]
    authorization = request.headers.get("authorization")
    if authorization is not None:
        http_request.META["HTTP_AUTHORIZATION"] = authorization
    return Request(http_request)


def _authentication_class_problems(path: str) -> list[str]:
    try:
        cls = import_string(path)
    except ImportError as exc:
        return [f"OPTIONS['authentication_class'] {path!r} cannot be imported ({type(exc).__name__}: {exc})"]
    try:
        from rest_framework.authentication import BaseAuthentication, SessionAuthentication
    except ImportError:
        return ["the DRF adapter needs Django REST framework installed"]
    if not isinstance(cls, type) or not issubclass(cls, BaseAuthentication):
        return [f"OPTIONS['authentication_class'] {path!r} is not a DRF authentication class (BaseAuthentication)"]
    if issubclass(cls, SessionAuthentication):
        return [
            f"OPTIONS['authentication_class'] {path!r} is DRF's SessionAuthentication, whose CSRF check does not fit "
            "MCP requests: turn on MCP_EXPOSE['SESSION_AUTH'] for session cookies instead (same-origin requests "
            "only; see docs/authentication.md)"
        ]
    return []


def _callable_problems(path: object) -> list[str]:
    if not isinstance(path, str):
        return [f"OPTIONS['scopes_for'] must be the dotted path of a callable (user, auth), not {path!r}"]
    try:
        target = import_string(path)
    except ImportError as exc:
        return [f"OPTIONS['scopes_for'] {path!r} cannot be imported ({type(exc).__name__}: {exc})"]
    return [] if callable(target) else [f"OPTIONS['scopes_for'] {path!r} is not callable"]
