"""Why a request is refused before any tool is looked at: the 401/400 answers every authenticator shares.

The descriptions are generic on purpose: they never repeat a credential, or what an authenticator said about it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AuthFailure:
    """Why a request is refused with 401. `error` is None when no credentials were presented (RFC 6750 §3.1)."""

    error: str | None
    description: str
    status: int = 401


MISSING = AuthFailure(None, "Authentication required. Send 'Authorization: Bearer <API key or access token>'.")


INVALID_TOKEN = AuthFailure("invalid_token", "The credentials are invalid, expired or revoked.")


# Another scheme (Basic, ...) is no Bearer credential at all: a plain challenge, as with none (RFC 6750 §3.1).
WRONG_SCHEME = AuthFailure(
    None, "Use the Bearer authorization scheme: 'Authorization: Bearer <API key or access token>'."
)


# Refused whatever else the request carries (RFC 6750 §2.3 allows the query parameter; the MCP spec does not).
TOKEN_IN_URL = AuthFailure(
    "invalid_request", "Send credentials in the Authorization header, never in the URL.", status=400
)


LEAKED_IN_URL = AuthFailure(
    "invalid_request",
    "The credential sent in the URL has been revoked: URLs are written to logs, so it must be treated as leaked. "
    "Get a new one and send it in the Authorization header only.",
    status=400,
)


# A project's authenticator failed in a way it did not mean to (a bug, a dependency it needs): refused, as any
# credential we cannot check, without saying more than that to the client. The log names the authenticator.
UNCHECKABLE = AuthFailure(
    "invalid_token", "The credentials could not be checked. Try again, or use another credential."
)


# A session cookie is accepted only from this site's own pages: never on a request another site could have made.
COOKIE_NOT_SAME_ORIGIN = AuthFailure(
    None,
    "A session cookie is accepted only on a same-origin request from this site's own pages (with an Origin header). "
    "Send 'Authorization: Bearer <API key or access token>' instead.",
)
