"""One cache backend per process for the requests' cache reads (stamps, rate limits, rounds, counters).

Django builds a backend per thread and per asyncio context; an ASGI server runs each request in a new
context, so without this each request built a new backend: a `makedirs` for the file cache, a new
connection pool (and TCP connection) for Redis.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import uuid
import warnings

import pytest
from django.core.cache import InvalidCacheBackendError, caches
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache
from django.test import override_settings

from mcp_expose.calls import ratelimit
from mcp_expose.catalog.revision import REVISION_KEY, read_stamps
from mcp_expose.core.process_cache import process_cache

REDIS_URL = os.environ.get("MCP_SCALE_REDIS", "redis://127.0.0.1:6379/0")


class CountingLocMem(LocMemCache):
    """A subclass: it may keep state per instance, so it is not shared."""


def _in_fresh_contexts(func, count: int = 5) -> list:
    """`func()` in `count` asyncio tasks, each in its own context, as an ASGI server runs requests."""

    async def main() -> list:
        return [await asyncio.create_task(asyncio.to_thread(func)) for _ in range(count)]

    return asyncio.run(main())


def test_one_backend_for_every_request_context_and_thread():
    seen = _in_fresh_contexts(process_cache)
    other_thread: list = []
    thread = threading.Thread(target=lambda: other_thread.append(process_cache()))
    thread.start()
    thread.join()
    assert len({id(backend) for backend in seen + other_thread}) == 1
    assert type(seen[0]) is LocMemCache
    # What it replaces: Django hands each request context its own backend.
    assert len({id(backend) for backend in _in_fresh_contexts(lambda: caches["default"])}) == 5


def test_a_settings_change_builds_a_new_backend():
    before = process_cache()
    with override_settings(
        CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "elsewhere"}}
    ):
        during = process_cache()
        assert during is not before and during is process_cache()
        during.set("k", "elsewhere")
    after = process_cache()
    assert after is not during
    assert after.get("k") is None  # the original location again, not the overridden one


def test_the_alias_setting_chooses_the_backend():
    configured = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "a"},
        "stamps": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"},
    }
    with override_settings(CACHES=configured, MCP_EXPOSE={"CACHE_ALIAS": "stamps"}):
        assert type(process_cache()).__name__ == "DummyCache"
        assert type(process_cache("default")) is LocMemCache


def test_a_backend_not_known_to_be_shareable_is_used_as_django_hands_it_out():
    with override_settings(CACHES={"default": {"BACKEND": f"{__name__}.CountingLocMem"}}):
        assert process_cache() is caches["default"]
        assert len({id(backend) for backend in _in_fresh_contexts(process_cache)}) == 5


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_builds_its_own_backend_even_while_the_parent_was_building_one():
    from mcp_expose.core import process_cache as module

    parent = process_cache()
    with module._building, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads about: the child only reads a cache
        pid = os.fork()
        if pid == 0:  # the child: an inherited, held lock would hang here; the alarm turns a hang into a failure
            signal.alarm(10)
            os._exit(0 if process_cache() is not parent else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_an_unknown_alias_is_djangos_error():
    with override_settings(MCP_EXPOSE={"CACHE_ALIAS": "nope"}), pytest.raises(InvalidCacheBackendError):
        process_cache()


@pytest.mark.scale
def test_redis_requests_share_one_connection_pool():
    """Thirty requests reading stamps and counting a rate open one connection to Redis, not one each."""
    import redis

    prefix = f"mcp-expose-test-{uuid.uuid4().hex[:8]}"
    location = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL, "KEY_PREFIX": prefix}
    admin = redis.Redis.from_url(REDIS_URL)

    def request() -> None:
        read_stamps(REVISION_KEY)
        ratelimit.hit("tool", "caller", (1000, 60))

    def connections_opened() -> int:
        return int(admin.info("stats")["total_connections_received"])

    try:
        with override_settings(CACHES={"default": location}):
            assert type(process_cache()) is RedisCache
            before = connections_opened()
            _in_fresh_contexts(request, count=30)
            opened = connections_opened() - before  # the admin client's own connection was opened before
            assert 1 <= opened <= 3, f"{opened} connections for 30 requests"
    finally:
        keys = list(admin.scan_iter(f"{prefix}:*"))
        if keys:
            admin.delete(*keys)
