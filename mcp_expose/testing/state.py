"""What one test must not inherit from another: what we keep in Django's cache between requests."""

from __future__ import annotations

from django.core.cache import caches

from mcp_expose.core.conf import get_settings


def reset_shared_state() -> None:
    """Empty the cache `MCP_EXPOSE["CACHE_ALIAS"]` names, as a fresh deployment finds it: rate-limit counters
    (a tool limited to "10/min" would otherwise count the calls of earlier tests by a user with the same id),
    cached credentials and the catalog's revision stamp. Django does not clear caches between tests; DRF's
    throttles need the same. Use a test cache: this clears all of it."""
    caches[get_settings().CACHE_ALIAS].clear()
