"""The catalog revision stamp: one cache key every process compares on each request.

Saving an exposure row writes a new stamp after the transaction commits; a
process that sees a stamp it has not compiled recompiles its catalog.
"""

from __future__ import annotations

import uuid
from functools import partial
from typing import Any

from django.core.cache.backends.dummy import DummyCache
from django.core.cache.backends.filebased import FileBasedCache
from django.core.cache.backends.locmem import LocMemCache

from .process_cache import process_cache
from .stamp_files import holds_stamps, read_held

REVISION_KEY = "mcp_expose:catalog-revision"
LOCAL_CACHES = (LocMemCache, FileBasedCache, DummyCache)
# Long enough to outlive any process; a missing stamp is recreated anyway.
REVISION_TIMEOUT = 60 * 60 * 24 * 30


def read_stamps(*keys: str, cache: Any = None) -> dict[str, str]:
    """The current stamps under `keys`, in one cache round trip, creating any the cache has lost (first
    start, eviction, flush).

    A fresh stamp after an eviction makes every process drop what it derived, so a change
    can never be missed because its stamp was lost. With the file cache on a local filesystem, a stamp
    whose file has not changed since this process read it costs a `stat` and an `fstat` (`stamp_files`).
    """
    cache = cache if cache is not None else process_cache()
    if holds_stamps(cache):
        return {key: read_held(cache, key, partial(_read_one, cache, key)) for key in keys}
    stamps = cache.get_many(keys)
    return {key: str(stamps[key]) if stamps.get(key) is not None else _created(cache, key) for key in keys}


def _read_one(cache: Any, key: str) -> str:
    stamp = cache.get(key)
    return str(stamp) if stamp is not None else _created(cache, key)


def _created(cache: Any, key: str) -> str:
    """A new stamp for a key the cache lost, or the one another process created first."""
    cache.add(key, uuid.uuid4().hex, REVISION_TIMEOUT)
    return str(cache.get(key) or "unstamped")


def local_stamp_cache() -> Any:
    """The stamps' cache when it answers without a network round trip (memory, or files on this machine), so
    that reading it on the event loop blocks it no longer than a thread hop would cost; else None."""
    cache = process_cache()
    return cache if isinstance(cache, LOCAL_CACHES) else None


def read_stamp(key: str) -> str:
    return read_stamps(key)[key]


def move_stamp(key: str) -> str:
    stamp = uuid.uuid4().hex
    process_cache().set(key, stamp, REVISION_TIMEOUT)
    return stamp


def current_revision() -> str:
    """The catalog's stamp: a process recompiles when it sees one it has not compiled."""
    return read_stamp(REVISION_KEY)


def bump_revision() -> str:
    return move_stamp(REVISION_KEY)
