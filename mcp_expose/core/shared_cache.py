"""The shared cache as an accelerator, not a single point of failure: short timeouts and a breaker.

Requests use the shared cache (Redis, say) for the revision stamps, rate limits and question rounds. Stopped,
it would fail every request; frozen, it would hold every request for redis-py's socket timeout (5 s). So the
backend requests use (`process_cache`) gets short timeouts of its own (`CACHE_CONNECT_TIMEOUT`,
`CACHE_READ_TIMEOUT`), and the first failure opens this process's breaker: for `CACHE_RETRY_SECONDS` no
request waits on the cache at all. Each gets `DependencyUnavailable("cache")` at once and falls back (the
revision stamps are read from the database) or fails closed (rate limits, later question rounds). When the
pause is over, one request at a time tries the cache again; its success closes the breaker, and the hooks
registered with `on_recovery` run (the stamps forget what they held before the outage).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.exceptions import ImproperlyConfigured

from mcp_expose.core.conf import get_settings
from mcp_expose.core.outage import DependencyUnavailable, Outage

logger = logging.getLogger("mcp_expose.cache")
T = TypeVar("T")

# Raised by a cache call that is wrong, not by a cache that is unavailable: they propagate as they are.
MISTAKES: tuple[type[BaseException], ...] = (ValueError, TypeError, KeyError, AttributeError, ImproperlyConfigured)


class CacheBreaker:
    """Closed: calls go to the cache. Open (after a failure): calls fail at once until the pause is over, then
    one probes. Thread-safe; one per process."""

    def __init__(self) -> None:
        self.outage = Outage(
            "shared cache",
            "this process skips it for a few seconds at a time, reads the "
            "revisions from the database, and answers rate-limited tools and later question "
            "rounds `unavailable`",
        )
        self._lock = threading.Lock()
        self._opened_at = 0.0  # monotonic time of the last failure; 0 = closed
        self._probing = False
        self._recovery_hooks: list[Callable[[], None]] = []

    @property
    def is_open(self) -> bool:
        return self._opened_at != 0.0

    def on_recovery(self, hook: Callable[[], None]) -> None:
        """Run `hook` (sync, may use the cache) whenever the cache answers again after an outage."""
        self._recovery_hooks.append(hook)

    def call(self, what: str, operation: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`operation(*args, **kwargs)` on the cache, or `DependencyUnavailable("cache")` without waiting
        while the breaker is open. `what` names the use in the outage's first log line."""
        if self._opened_at:
            with self._lock:
                pause = max(0.0, float(get_settings().CACHE_RETRY_SECONDS))
                waiting = time.monotonic() - self._opened_at < pause or self._probing
                if not waiting:
                    self._probing = True  # this call is the one that tries the cache again
            if waiting:
                self.outage.refused(what)
                raise DependencyUnavailable("cache")
        try:
            result = operation(*args, **kwargs)
        except MISTAKES:
            self._probed()
            raise
        except Exception as exc:  # noqa: BLE001  (whatever the client raises, the cache did not answer)
            with self._lock:
                self._opened_at, self._probing = time.monotonic(), False
            self.outage.refused(what, exc)
            raise DependencyUnavailable("cache", type(exc).__name__) from exc
        except BaseException:  # cancelled or interrupted: whether the cache answers is still unknown
            self._probed()
            raise
        if self._opened_at:
            self._closed()
        return result

    def _probed(self) -> None:
        with self._lock:
            self._probing = False

    def _closed(self) -> None:
        with self._lock:
            was_open, self._opened_at, self._probing = self._opened_at != 0.0, 0.0, False
        if was_open:
            self.outage.ended()
            for hook in self._recovery_hooks:
                try:
                    hook()
                except Exception:  # noqa: BLE001  (a hook must not fail the request that found the cache back)
                    logger.warning("A recovery step after the cache outage failed", exc_info=True)

    def reset(self) -> None:
        """Closed, with no outage going on, as at start (tests)."""
        with self._lock:
            self._opened_at, self._probing = 0.0, False
        self.outage.reset()


breaker = CacheBreaker()


def guarded(what: str, operation: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """One call to the shared cache behind this process's breaker."""
    return breaker.call(what, operation, *args, **kwargs)
