"""Secrets we send to upstreams (static header values, OAuth client secrets), sealed at rest.

Sealed with Fernet (AES-128-CBC with HMAC-SHA256) under a key derived from `SECRET_KEY`; one sealed under a key
in `SECRET_KEY_FALLBACKS` still opens, so rotating `SECRET_KEY` the way Django documents it keeps them. A value
written as `env:NAME` is not a secret at all but the name of an environment variable, read when it is used:
for deployments that keep their secrets out of the database entirely.
"""

from __future__ import annotations

import base64
import os
import re

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.utils.crypto import salted_hmac

SEALED_PREFIX = "fernet:"
ENV_PREFIX = "env:"
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


class SecretUnavailable(Exception):
    """A sealed secret that cannot be opened, or an environment variable that is not set; the message says
    which, never the secret."""


def _fernet() -> MultiFernet:
    secrets = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    keys = [
        Fernet(
            base64.urlsafe_b64encode(
                salted_hmac("mcp_expose.upstream-secret", "key", secret=secret, algorithm="sha256").digest()
            )
        )
        for secret in secrets
    ]
    return MultiFernet(keys)


def seal(value: str) -> str:
    """What is stored for `value`: an `env:NAME` reference as it is, anything else sealed."""
    if is_reference(value):
        return value
    return SEALED_PREFIX + _fernet().encrypt(value.encode()).decode("ascii")


def is_reference(value: str) -> bool:
    return value.startswith(ENV_PREFIX) and bool(ENV_NAME.fullmatch(value[len(ENV_PREFIX) :]))


def unseal(stored: str, what: str) -> str:
    """The secret `stored` stands for; `what` names it in the error ("the client secret of server 'tickets'")."""
    if is_reference(stored):
        name = stored[len(ENV_PREFIX) :]
        value = os.environ.get(name)
        if value is None:
            raise SecretUnavailable(f"{what} is read from the environment variable {name}, which is not set.")
        return value
    if not stored.startswith(SEALED_PREFIX):
        raise SecretUnavailable(f"{what} is not stored sealed; enter it again.")
    try:
        return _fernet().decrypt(stored[len(SEALED_PREFIX) :].encode("ascii")).decode()
    except (InvalidToken, UnicodeError, ValueError):
        raise SecretUnavailable(
            f"{what} was sealed under a SECRET_KEY this deployment no longer has (neither SECRET_KEY nor "
            "SECRET_KEY_FALLBACKS opens it); enter it again."
        ) from None


def reseal(stored: str) -> str:
    """`stored` sealed under the current SECRET_KEY (after a rotation, before the old key leaves the fallbacks)."""
    if is_reference(stored) or not stored.startswith(SEALED_PREFIX):
        return stored
    return SEALED_PREFIX + _fernet().rotate(stored[len(SEALED_PREFIX) :].encode("ascii")).decode("ascii")
