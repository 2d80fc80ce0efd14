"""The cache backend our requests use (stamps, rate limits, question rounds): one instance
per process, where the backend is safe to share between threads.

Django keeps one cache backend instance per thread *and per asyncio context* (`caches` is an asgiref
`Local`), and an ASGI server runs every request in a fresh context. So `caches[alias]` in a request
builds a new backend every time: the file cache creates its directory again (a `makedirs` per request),
and Django's Redis cache builds a new client, a new connection pool and so a new TCP connection to
Redis per request, closed only when the garbage collector gets to it (Django calls `close()` at the
end of its own requests, which does nothing for Redis; MCP requests never pass there anyway).

The backends below keep no per-thread state of their own (files, a process-wide dict with locks,
Django's per-thread database connections, redis-py's thread-safe pools), so one instance serves every
thread and request. A Redis backend built here gets short socket timeouts (`CACHE_CONNECT_TIMEOUT`,
`CACHE_READ_TIMEOUT`) unless the cache's OPTIONS set their own: a frozen Redis must cost a request a fraction
of a second, not redis-py's 5 s (see `shared_cache`). Any other backend (pymemcache's and pylibmc's clients are not thread-safe as
Django configures them; a third-party backend we cannot vouch for) is used as Django hands it out.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from django.core.cache import caches
from django.core.cache.backends.base import BaseCache
from django.core.cache.backends.db import DatabaseCache
from django.core.cache.backends.dummy import DummyCache
from django.core.cache.backends.filebased import FileBasedCache
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache

from mcp_expose.core.conf import get_settings

SHAREABLE_BACKENDS: tuple[type[BaseCache], ...] = (LocMemCache, FileBasedCache, DummyCache, DatabaseCache, RedisCache)

# alias -> (the `caches.settings` it was built from, the process's backend, or None for "use Django's")
_backends: dict[str, tuple[Any, BaseCache | None]] = {}
_building = threading.Lock()


def process_cache(alias: str | None = None) -> BaseCache:
    """The backend for `alias` (default: `MCP_EXPOSE["CACHE_ALIAS"]`), one for the whole process when its
    class is exactly one of `SHAREABLE_BACKENDS` (a subclass may keep state per instance)."""
    alias = alias if alias is not None else get_settings().CACHE_ALIAS
    configured = caches.settings  # replaced as a whole when CACHES changes (override_settings)
    if alias not in configured:
        return caches[alias]  # Django's own error for an alias that is not configured
    held = _backends.get(alias)
    if held is None or held[0] is not configured:
        with _building:
            held = _backends.get(alias)
            if held is None or held[0] is not configured:
                held = _backends[alias] = (configured, _shareable(_built(alias)))
    return held[1] if held[1] is not None else caches[alias]


def _built(alias: str) -> BaseCache:
    """What `caches.create_connection` builds, with our short timeouts for a Redis backend."""
    params = dict(caches.settings[alias])
    if params.get("BACKEND") != "django.core.cache.backends.redis.RedisCache":
        return caches.create_connection(alias)
    params.pop("BACKEND")
    location = params.pop("LOCATION", "")
    conf = get_settings()
    params["OPTIONS"] = {
        "socket_connect_timeout": conf.CACHE_CONNECT_TIMEOUT,
        "socket_timeout": conf.CACHE_READ_TIMEOUT,
        **params.get("OPTIONS", {}),
    }
    return RedisCache(location, params)


def _shareable(backend: BaseCache) -> BaseCache | None:
    return backend if type(backend) in SHAREABLE_BACKENDS else None


def _after_fork() -> None:
    """A child starts with its own backends (redis-py pools reset themselves too) and a lock nobody holds."""
    global _building
    _building = threading.Lock()
    _backends.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
