"""Remember who a bearer credential belongs to, exactly as long as nothing about it changed.

Authenticating an API key or an access token costs two or three queries (the credential, its
user, the user's permissions): more than most tool calls. This process keeps the answer, keyed
by a digest of the credential (never the credential itself), and trusts it only while

- the credentials stamp in the shared cache is the one it was stored under: saving or deleting an
  API key, a user, a group or permission assignment, or an OAuth token or application moves the
  stamp after commit, so a revocation in any process takes effect on every process's next request;
- the credential has not expired; and
- it is younger than `CREDENTIAL_CACHE_SECONDS` (which bounds changes made without signals, such as
  `QuerySet.update()`) and than `API_KEY_LAST_USED_INTERVAL`, so a key's *last used* time stays current.

Each hit hands out its own copy of the user object, so no request sees another's changes to it.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import replace
from datetime import datetime
from typing import Any

from django.utils import timezone

from mcp_expose.catalog.revision import move_stamp, read_stamp
from mcp_expose.core.conf import get_settings
from mcp_expose.core.principal import Principal

CREDENTIALS_KEY = "mcp_expose:credentials-revision"
MAX_ENTRIES = 10_000

logger = logging.getLogger("mcp_expose.auth")


def credentials_revision() -> str:
    """The current credentials stamp (created when the cache has none, so an eviction forgets everything)."""
    return read_stamp(CREDENTIALS_KEY)


def bump_credentials_revision() -> None:
    """This process forgets at once; the others when they read the moved stamp. A cache outage must not
    fail the save that caused this (it already committed): it is logged, and this process has forgotten."""
    cache.clear()
    try:
        move_stamp(CREDENTIALS_KEY)
    except Exception:  # noqa: BLE001
        logger.exception(
            "Could not move the credentials stamp: other processes may trust a changed credential "
            "for up to CREDENTIAL_CACHE_SECONDS"
        )


class CredentialCache:
    def __init__(self, limit: int = MAX_ENTRIES) -> None:
        self.limit = limit
        self._entries: OrderedDict[tuple[str, str | None], tuple[Principal, str, float, datetime | None]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    @staticmethod
    def _key(token: str, resource: str | None) -> tuple[str, str | None]:
        return hashlib.sha256(token.encode()).hexdigest(), resource

    def get(self, token: str, resource: str | None, stamp: str, *, grace: float = 0.0) -> Principal | None:
        """The principal stored for the credential under `stamp`, if younger than the cache's lifetime plus
        `grace` (the database is unavailable: it cannot be asked, and nothing can be revoked meanwhile)."""
        max_age = _max_age()
        if max_age <= 0:
            return None
        key = self._key(token, resource)
        with self._lock:
            entry = self._entries.get(key)
        if entry is None:
            return None
        principal, stored_stamp, stored_at, expires = entry
        if stored_stamp != stamp or (expires is not None and expires <= timezone.now()):
            with self._lock:
                self._entries.pop(key, None)
            return None
        if time.monotonic() - stored_at > max_age + grace:  # kept, for a grace during a database outage
            return None
        return replace(principal, user=own_copy(principal.user))

    def put(self, token: str, resource: str | None, stamp: str, principal: Principal) -> None:
        if _max_age() <= 0:
            return
        credential = principal.credential
        expires = getattr(credential, "expires_at", None) or getattr(credential, "expires", None)
        key = self._key(token, resource)
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = (replace(principal, user=own_copy(principal.user)), stamp, time.monotonic(), expires)
            while len(self._entries) > self.limit:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def own_copy(user: Any) -> Any:
    """A shallow copy of the user with its own model state (what `copy.copy` gives a model instance, without
    the pickling round trip through the app registry that makes that slow)."""
    from django.db.models import Model

    if isinstance(user, Model):
        state = user.__getstate__()
        if "_memoryview_attrs" not in state:
            clone = type(user).__new__(type(user))
            clone.__dict__.update(state)
            return clone
    return copy.copy(user)


def _max_age() -> float:
    """At most CREDENTIAL_CACHE_SECONDS, and never past the next *last used* write of an API key."""
    conf = get_settings()
    return min(conf.CREDENTIAL_CACHE_SECONDS, max(1, conf.API_KEY_LAST_USED_INTERVAL))


cache = CredentialCache()


def credentials_changed(*args: Any, using: str = "default", **kwargs: Any) -> None:
    """After the commit, every process forgets what it knew about credentials.

    Connected to the models' save, delete and many-to-many signals; call it yourself after changing
    users, keys, tokens or permissions with `QuerySet.update()`, which sends no signal.
    """
    from django.db import transaction

    transaction.on_commit(bump_credentials_revision, using=using)
