"""Secrets we send to upstreams (static header values, OAuth client secrets), sealed at rest.

Sealed with Fernet (AES-128-CBC with HMAC-SHA256) under a key derived from `SECRET_KEY`; one sealed under a key
in `SECRET_KEY_FALLBACKS` still opens, so rotating `SECRET_KEY` the way Django documents it keeps them.
(Secrets kept out of the database entirely are named by environment variable instead; see `headers`.)
"""

from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.utils.crypto import salted_hmac

from mcp_expose.core.errors import McpExposeError

SEALED_PREFIX = "fernet:"


class SecretUnavailable(McpExposeError):
    """A sealed secret that cannot be opened, or a secret's environment variable that is not set; the message
    says which, never the secret."""


def _fernet() -> MultiFernet:
    secrets = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    return MultiFernet([_key(secret) for secret in secrets])


def _key(secret: str) -> Fernet:
    return Fernet(
        base64.urlsafe_b64encode(
            salted_hmac("mcp_expose.upstream-secret", "key", secret=secret, algorithm="sha256").digest()
        )
    )


def seal(value: str) -> str:
    """What is stored for `value`."""
    return SEALED_PREFIX + _fernet().encrypt(value.encode()).decode("ascii")


def unseal(stored: str, what: str) -> str:
    """The secret `stored` stands for; `what` names it in the error ("the client secret of server 'tickets'")."""
    if not stored.startswith(SEALED_PREFIX):
        raise SecretUnavailable(f"{what} is not stored sealed; enter it again.")
    try:
        return _fernet().decrypt(stored[len(SEALED_PREFIX) :].encode("ascii")).decode()
    except (InvalidToken, UnicodeError, ValueError):
        raise SecretUnavailable(
            f"{what} was sealed under a SECRET_KEY this deployment no longer has (neither SECRET_KEY nor "
            "SECRET_KEY_FALLBACKS opens it); enter it again."
        ) from None


def reseal(stored: str, what: str = "the secret") -> str:
    """`stored` sealed under the current SECRET_KEY (after a rotation, before the old key leaves the fallbacks):
    the same secret, so nothing that depends on it changes. As it is when the current key opens it already, so
    running it again changes nothing. Raises `SecretUnavailable` as `unseal` does."""
    unseal(stored, what)
    token = stored[len(SEALED_PREFIX) :].encode("ascii")
    try:
        _key(settings.SECRET_KEY).decrypt(token)
    except InvalidToken:
        return SEALED_PREFIX + _fernet().rotate(token).decode("ascii")
    return stored
