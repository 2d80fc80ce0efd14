"""One cache backend per process for the requests' cache reads (stamps, rate limits, rounds, counters).

Django builds a backend per thread and per asyncio context; an ASGI server runs each request in a new
context, so without this each request built a new backend: a `makedirs` for the file cache, a new
connection pool (and TCP connection) for Redis.
"""

from __future__ import annotations

import asyncio
import os
import threading
import uuid

import pytest
import redis
from django.core.cache import InvalidCacheBackendError, caches
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache
from django.test import override_settings

from mcp_expose import ratelimit
from mcp_expose.revision import REVISION_KEY, read_stamps
from mcp_expose.shared_cache import shared_cache

REDIS_URL = os.environ.get("MCP_SCALE_REDIS", "redis://127.0.0.1:6379/0")


class CountingLocMem(LocMemCache):
    """A subclass: it may keep state per instance, so it is not shared."""


def _in_fresh_contexts(func, count: int = 5) -> list:
    """`func()` in `count` asyncio tasks, each in its own context, as an ASGI server runs requests."""

    async def main() -> list:
        return [await asyncio.create_task(asyncio.to_thread(func)) for _ in range(count)]

    return asyncio.run(main())


def test_one_backend_for_every_request_context_and_thread():
    seen = _in_fresh_contexts(shared_cache)
    other_thread: list = []
    thread = threading.Thread(target=lambda: other_thread.append(shared_cache()))
    thread.start()
    thread.join()
    assert len({id(backend) for backend in seen + other_thread}) == 1
    assert type(seen[0]) is LocMemCache
    # What it replaces: Django hands each request context its own backend.
    assert len({id(backend) for backend in _in_fresh_contexts(lambda: caches["default"])}) == 5


def test_a_settings_change_builds_a_new_backend():
    before = shared_cache()
    with override_settings(CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache",
                                               "LOCATION": "elsewhere"}}):
        during = shared_cache()
        assert during is not before and during is shared_cache()
        during.set("k", "elsewhere")
    after = shared_cache()
    assert after is not during
    assert after.get("k") is None  # the original location again, not the overridden one


def test_the_alias_setting_chooses_the_backend():
    configured = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "a"},
        "stamps": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"},
    }
    with override_settings(CACHES=configured, MCP_EXPOSE={"CACHE_ALIAS": "stamps"}):
        assert type(shared_cache()).__name__ == "DummyCache"
        assert type(shared_cache("default")) is LocMemCache


def test_a_backend_not_known_to_be_shareable_is_used_as_django_hands_it_out():
    with override_settings(CACHES={"default": {"BACKEND": f"{__name__}.CountingLocMem"}}):
        assert shared_cache() is caches["default"]
        assert len({id(backend) for backend in _in_fresh_contexts(shared_cache)}) == 5


def test_an_unknown_alias_is_djangos_error():
    with override_settings(MCP_EXPOSE={"CACHE_ALIAS": "nope"}), pytest.raises(InvalidCacheBackendError):
        shared_cache()


def test_redis_requests_share_one_connection_pool():
    """Thirty requests reading stamps and counting a rate: one connection to Redis, not one per request."""
    client_name = f"mcp-expose-test-{uuid.uuid4().hex[:8]}"
    location = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL,
                "KEY_PREFIX": client_name, "OPTIONS": {"client_name": client_name}}
    admin = redis.Redis.from_url(REDIS_URL)

    def request() -> None:
        read_stamps(REVISION_KEY)
        ratelimit.hit("tool", "caller", (1000, 60))

    with override_settings(CACHES={"default": location}):
        assert type(shared_cache()) is RedisCache
        _in_fresh_contexts(request, count=30)
        ours = [client for client in admin.client_list() if client.get("name") == client_name]
        assert len(ours) == 1
        shared_cache().clear()
