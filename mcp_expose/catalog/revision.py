"""Revision stamps: cache keys every process compares on each request, with a copy in the database.

Saving an exposure row (or a credential) writes a new stamp after the transaction commits; a process that
sees a stamp it has not compiled recompiles its catalog (or forgets the credentials it knew).

The cache is what requests read. The database keeps a copy of every stamp moved, which a process reads
instead while the cache is unavailable (`shared_cache`'s breaker is open), at most every
`REVISION_STALENESS_SECONDS`: admin changes and revocations still reach it within that long. When the cache
answers again, the stamps it holds may be older than the changes made meanwhile, so the first process to
see it back deletes them: every process then reads a fresh stamp, and none can keep serving what it
compiled before the change.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterable
from functools import partial
from typing import Any

from django.core.cache.backends.dummy import DummyCache
from django.core.cache.backends.filebased import FileBasedCache
from django.core.cache.backends.locmem import LocMemCache

from mcp_expose.catalog.stamp_files import holds_stamps, read_held
from mcp_expose.core.conf import get_settings
from mcp_expose.core.db import in_worker_thread
from mcp_expose.core.outage import DependencyUnavailable
from mcp_expose.core.process_cache import process_cache
from mcp_expose.core.shared_cache import breaker, guarded

logger = logging.getLogger("mcp_expose.cache")

REVISION_KEY = "mcp_expose:catalog-revision"
LOCAL_CACHES = (LocMemCache, FileBasedCache, DummyCache)
# Long enough to outlive any process; a missing stamp is recreated anyway.
REVISION_TIMEOUT = 60 * 60 * 24 * 30
# The stamp of a key the database has no copy of (it never moved since the copies began).
NEVER_MOVED = "never-moved"


def read_stamps(*keys: str, cache: Any = None) -> dict[str, str]:
    """The current stamps under `keys`, in one cache round trip, creating any the cache has lost (first
    start, eviction, flush); from the database's copies while the cache is unavailable.

    A fresh stamp after an eviction makes every process drop what it derived, so a change
    can never be missed because its stamp was lost. With the file cache on a local filesystem, a stamp
    whose file has not changed since this process read it costs a `stat` and an `fstat` (`stamp_files`).
    """
    cache = cache if cache is not None else process_cache()
    if holds_stamps(cache):
        return {key: read_held(cache, key, partial(_read_one, cache, key)) for key in keys}
    if isinstance(cache, LOCAL_CACHES):  # in this process's memory: nothing to be unavailable
        stamps = cache.get_many(keys)
        return {key: str(stamps[key]) if stamps.get(key) is not None else _created(cache, key) for key in keys}
    copies.watch(keys)
    try:
        was_open = breaker.is_open
        stamps = guarded("reading the revision stamps", cache.get_many, keys)
        if was_open and not breaker.is_open:  # this read found the cache back, which renewed the stamps
            stamps = guarded("reading the revision stamps", cache.get_many, keys)
        read = {key: str(stamps[key]) if stamps.get(key) is not None else _created_guarded(cache, key) for key in keys}
        copies.last.update(read)
        return read
    except DependencyUnavailable:
        return copies.read(keys)


def _read_one(cache: Any, key: str) -> str:
    stamp = cache.get(key)
    return str(stamp) if stamp is not None else _created(cache, key)


def _created(cache: Any, key: str) -> str:
    """A new stamp for a key the cache lost, or the one another process created first."""
    cache.add(key, uuid.uuid4().hex, REVISION_TIMEOUT)
    return str(cache.get(key) or "unstamped")


def _created_guarded(cache: Any, key: str) -> str:
    """`_created` on a shared cache, whose stamp the database's copy then holds too: so an outage after this
    does not show every process a revision that seems to have moved (a spurious recompile and list change)."""
    stamp = guarded("creating a revision stamp", _created, cache, key)
    copies.write(key, stamp)
    return stamp


def local_stamp_cache() -> Any:
    """The stamps' cache when it answers without a network round trip (memory, or files on this machine), so
    that reading it on the event loop blocks it no longer than a thread hop would cost; else None."""
    cache = process_cache()
    return cache if isinstance(cache, LOCAL_CACHES) else None


def read_stamp(key: str) -> str:
    return read_stamps(key)[key]


def move_stamp(key: str) -> str:
    """A new stamp under `key`: in the database's copy first, then in the cache. Sync, after a commit.

    A cache that cannot take it is logged: processes reading the copies (their breaker open) see the change,
    and the first one to find the cache back deletes the stale stamps; a process that never noticed the outage
    sees the change with the next stamp that moves."""
    stamp = uuid.uuid4().hex
    cache = process_cache()
    if isinstance(cache, LOCAL_CACHES):  # never unavailable, so never read from the copies
        cache.set(key, stamp, REVISION_TIMEOUT)
        return stamp
    copies.write(key, stamp)
    try:
        guarded("moving a revision stamp", cache.set, key, stamp, REVISION_TIMEOUT)
    except DependencyUnavailable:
        logger.warning(
            "Could not move the stamp %s in the cache, which is unavailable: processes see the "
            "change from the database's copy while it is out",
            key,
        )
    return stamp


def current_revision() -> str:
    """The catalog's stamp: a process recompiles when it sees one it has not compiled."""
    return read_stamp(REVISION_KEY)


def bump_revision() -> str:
    return move_stamp(REVISION_KEY)


def stamp_model() -> Any:
    """`RevisionStamp`, looked up in the app registry rather than imported: the models import the catalog,
    which reads the stamps."""
    from django.apps import apps

    return apps.get_model("mcp_expose", "RevisionStamp")


class StampCopies:
    """The database's copies of the stamps, as this process last read them, re-read when older than
    `REVISION_STALENESS_SECONDS`; and the keys requests read, to delete from the cache when it is back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._read: dict[str, str] = {}
        self._read_at = 0.0  # monotonic; 0 = never
        self.last: dict[str, str] = {}  # the stamps last read, from either: what is served when both are out
        self._failed = False  # the last read of the copies failed (retried after the staleness period)
        self._audited: dict[str, str] = {}  # the copies as the last audit found them
        self.keys: set[str] = set()

    def watch(self, keys: Iterable[str]) -> None:
        if not self.keys.issuperset(keys):
            with self._lock:
                self.keys.update(keys)

    def read(self, keys: Iterable[str]) -> dict[str, str]:
        """The copies under `keys`, at most `REVISION_STALENESS_SECONDS` old; the last ones read when the
        database cannot answer either (nothing can change meanwhile); DependencyUnavailable when there are none.

        One thread at a time asks the database, and a failed read is not repeated within the staleness period:
        while one thread waits on a database that does not answer, the others serve what was last read."""
        keys = tuple(keys)
        if not self._fresh(keys):
            known = all(key in self.last for key in keys)
            if self._lock.acquire(blocking=not known):  # busy, with stamps to serve: serve them
                try:
                    if not self._fresh(keys):
                        self._refresh(keys)
                finally:
                    self._lock.release()
            elif known:
                return {key: self.last[key] for key in keys}
        if self._failed:
            if not all(key in self.last for key in keys):
                raise DependencyUnavailable("cache", "and the database cannot be read either")
            return {key: self.last[key] for key in keys}
        return {key: self._read[key] for key in keys}

    def _fresh(self, keys: tuple[str, ...]) -> bool:
        recent = time.monotonic() - self._read_at < get_settings().REVISION_STALENESS_SECONDS
        return recent and (self._failed or all(key in self._read for key in keys))

    def _refresh(self, keys: tuple[str, ...]) -> None:
        try:
            self._read = self._from_database(self.keys | set(keys))
            self._failed = False
            self.last.update(self._read)
        except Exception:  # noqa: BLE001  (both are out: `read` serves what this process last read)
            self._failed = True
        finally:
            self._read_at = time.monotonic()

    def audit(self) -> None:
        """Delete from the cache a stamp whose database copy moved to another value since the last audit.

        A stamp moves in the database first, then in the cache. A cache that failed to take it (a short freeze
        that only the saving process saw, a command that exited) would leave every process on the old stamp;
        the next audit of any serving process deletes it, so every process reads a fresh one. Sync: one query
        and one cache read, every `REVISION_AUDIT_SECONDS` (`keep_auditing`)."""
        keys = sorted(self.keys)
        if not keys:
            return
        copied = self._from_database(set(keys))
        moved = [key for key in keys if copied[key] != self._audited.get(key) and copied[key] != NEVER_MOVED]
        self._audited = copied
        if not moved:
            return
        cache = process_cache()
        cached = guarded("auditing the revision stamps", cache.get_many, moved)
        stale = [key for key in moved if cached.get(key) is not None and str(cached[key]) != copied[key]]
        if stale:
            guarded("renewing stale revision stamps", cache.delete_many, stale)
            logger.warning("The cache missed a move of %s; renewed it, so every process rereads it", ", ".join(stale))

    @staticmethod
    def _from_database(keys: set[str]) -> dict[str, str]:
        from mcp_expose.core.db import close_stale_connections

        RevisionStamp = stamp_model()

        close_stale_connections()
        found = dict(RevisionStamp.objects.filter(key__in=keys).values_list("key", "value"))
        return {key: found.get(key, NEVER_MOVED) for key in keys}

    @staticmethod
    def write(key: str, stamp: str) -> None:
        """Keep the database's copy; a database that cannot take it (not migrated yet, or down) is logged."""
        from django.db import transaction

        RevisionStamp = stamp_model()

        try:
            with transaction.atomic():  # a savepoint inside a caller's transaction: a failure spoils nothing
                RevisionStamp.objects.update_or_create(key=key, defaults={"value": stamp})
        except Exception as exc:  # noqa: BLE001  (the change itself is committed: this must not fail it)
            logger.warning(
                "Could not keep the database's copy of the stamp %s (%s): if the cache becomes unavailable, "
                "processes reading the copy will not see this stamp",
                key,
                type(exc).__name__,
            )

    def forget_cached(self) -> None:
        """The cache is back: delete the stamps it held from before the outage (see the module's docstring)."""
        keys = sorted(self.keys)
        if keys:
            process_cache().delete_many(keys)
            logger.info(
                "The cache is back: its revision stamps were renewed, so every process rereads its "
                "catalog and credentials"
            )


copies = StampCopies()
breaker.on_recovery(copies.forget_cached)


async def keep_auditing() -> None:
    """In a serving process on a shared cache: audit the stamps every `REVISION_AUDIT_SECONDS` (see
    `StampCopies.audit`). A failure (the cache or the database out) is left to their outages' own logs."""
    import anyio

    from mcp_expose.core.db import tidies_connections

    if local_stamp_cache() is not None:
        return  # a cache on this machine takes every move, or is unavailable to no one
    audit = tidies_connections(copies.audit)
    while True:
        await anyio.sleep(max(0.5, float(get_settings().REVISION_AUDIT_SECONDS)))
        try:
            await in_worker_thread(audit, abandon_on_cancel=True)()
        except Exception:  # noqa: BLE001  (an outage: the next audit tries again)
            logger.debug("Auditing the revision stamps failed", exc_info=True)
