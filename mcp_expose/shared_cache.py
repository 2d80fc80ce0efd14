"""The cache our requests use (stamps, rate limits, question rounds, listing counters): one backend
instance per process, where the backend is safe to share.

Django keeps one cache backend instance per thread *and per asyncio context* (`caches` is an asgiref
`Local`), and an ASGI server runs every request in a fresh context. So `caches[alias]` in a request
builds a new backend every time: the file cache creates its directory again (a `makedirs` per request),
and Django's Redis cache builds a new client, a new connection pool and so a new TCP connection to
Redis per request. Django closes those at the end of its own requests; MCP requests never pass there.

The backends below keep no per-thread state of their own (files, a process-wide dict with locks,
Django's per-thread database connections, redis-py's thread-safe pools), so one instance serves every
thread and request. Any other backend (pylibmc's client, for one, is not thread-safe; a third-party
backend we cannot vouch for) is used as Django hands it out.
"""

from __future__ import annotations

import threading
from typing import Any

from django.core.cache import caches
from django.core.cache.backends.base import BaseCache
from django.core.cache.backends.db import DatabaseCache
from django.core.cache.backends.dummy import DummyCache
from django.core.cache.backends.filebased import FileBasedCache
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache

from .conf import get_settings

SHAREABLE_BACKENDS: tuple[type[BaseCache], ...] = (LocMemCache, FileBasedCache, DummyCache, DatabaseCache, RedisCache)

# alias -> (the `caches.settings` it was built from, the shared backend or None for "use Django's")
_shared: dict[str, tuple[Any, BaseCache | None]] = {}
_building = threading.Lock()


def shared_cache(alias: str | None = None) -> BaseCache:
    """The backend for `alias` (default: `MCP_EXPOSE["CACHE_ALIAS"]`), shared by the whole process when its
    class is one of `SHAREABLE_BACKENDS` (exactly: a subclass may keep state per instance)."""
    alias = alias if alias is not None else get_settings().CACHE_ALIAS
    configured = caches.settings  # replaced as a whole when CACHES changes (override_settings)
    if alias not in configured:
        return caches[alias]  # Django's own error for an alias that is not configured
    held = _shared.get(alias)
    if held is None or held[0] is not configured:
        with _building:
            held = _shared.get(alias)
            if held is None or held[0] is not configured:
                held = _shared[alias] = (configured, _shareable(caches.create_connection(alias)))
    return held[1] if held[1] is not None else caches[alias]


def _shareable(backend: BaseCache) -> BaseCache | None:
    return backend if type(backend) in SHAREABLE_BACKENDS else None
