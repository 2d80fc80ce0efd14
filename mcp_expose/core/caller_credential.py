"""What a tool sees of its caller's credential: who vouched for the caller, for which scopes and claims, and until
when. Never the secret itself.

The object an authenticator accepted can be the secret. A simplejwt token re-signs itself into a working JWT when
turned into text. DRF's `Token` row holds its key. A django-oauth-toolkit `AccessToken` row holds the bearer token
and leads to its refresh token. A tool that logged `request.auth`, or put it in an answer, would hand the caller's
credential to whoever reads that. So tools and views get a `CallerCredential` as `request.auth`, and as
`principal.credential`, unless `MCP_EXPOSE["RAW_CREDENTIAL_TO_TOOLS"]` opts in to the object itself.

It answers what code asks of a credential: DOT's `AccessToken` interface (`scope`, `is_valid`, `allow_scopes`,
`is_expired`, `expires`), which DOT's DRF permission classes read, and a JWT's claims (`payload`, `token["sub"]`).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from mcp_expose.core.conf import get_settings
from mcp_expose.core.principal import Principal


@dataclass(frozen=True, slots=True)
class CallerCredential:
    """The caller's credential with its secret left out (see the module's docstring)."""

    kind: str  # "api_key", "oauth", or "drf" (a project's DRF authentication class: `authenticator` names it)
    scopes: frozenset[str] = frozenset()
    client_id: str | None = None
    api_key_prefix: str | None = None
    authenticator: str = ""
    expires: datetime.datetime | None = None
    # A JWT's claims, as a project's DRF class decoded them (no signature, no encoded token).
    claims: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    user: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, principal: Principal) -> CallerCredential:
        credential = principal.credential
        payload = getattr(credential, "payload", None)
        claims = dict(payload) if isinstance(payload, Mapping) else {}
        return cls(
            kind=principal.method,
            scopes=principal.scopes,
            client_id=principal.client_id,
            api_key_prefix=principal.api_key_prefix,
            authenticator=principal.authenticator,
            expires=_expires(credential, claims),
            claims=MappingProxyType(claims),
            user=principal.user,
        )

    # django-oauth-toolkit's AccessToken interface

    @property
    def scope(self) -> str:
        return " ".join(sorted(self.scopes))

    def is_expired(self) -> bool:
        return self.expires is not None and self.expires <= datetime.datetime.now(datetime.UTC)

    def allow_scopes(self, scopes: Iterable[str] | None) -> bool:
        return set(scopes or ()) <= self.scopes

    def is_valid(self, scopes: Iterable[str] | None = None) -> bool:
        return not self.is_expired() and self.allow_scopes(scopes)

    # a decoded JWT's interface

    @property
    def payload(self) -> Mapping[str, Any]:
        return self.claims

    def __getitem__(self, claim: str) -> Any:
        return self.claims[claim]

    def get(self, claim: str, default: Any = None) -> Any:
        return self.claims.get(claim, default)

    def __str__(self) -> str:
        who = self.authenticator or self.client_id or self.api_key_prefix or ""
        return f"{self.kind} credential{f' ({who})' if who else ''}, scopes: {self.scope or 'none'}"


def tool_facing(principal: Principal) -> Principal:
    """`principal` as tools and views get it: its credential a `CallerCredential`, unless the setting opts in to
    the object the authenticator accepted."""
    if principal.credential is None or get_settings().RAW_CREDENTIAL_TO_TOOLS:
        return principal
    return dataclasses.replace(principal, credential=CallerCredential.of(principal))


def _expires(credential: Any, claims: Mapping[str, Any]) -> datetime.datetime | None:
    for name in ("expires", "expires_at"):  # DOT's AccessToken, our ApiKey
        value = getattr(credential, name, None)
        if isinstance(value, datetime.datetime):
            return value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)
    expiry = claims.get("exp")
    if isinstance(expiry, int | float) and not isinstance(expiry, bool):
        return datetime.datetime.fromtimestamp(expiry, datetime.UTC)
    return None
