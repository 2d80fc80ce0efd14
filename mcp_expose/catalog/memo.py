"""What is derived from one catalog revision and served many times, kept with the revision, by kind.

Each layer that derives something from a catalog (wire definitions, encoded listings, rendered app pages, the
policy's questions) declares a `MemoKind` beside its code: what its keys and values are, and how many one revision
keeps. `Catalog.kept(kind)` is that kind's store. A new revision is a new catalog, so everything derived from the
old one goes with it; within a revision, a kind keeps at most its limit, first come first kept, and past it values
are built and served without being kept.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class MemoKind(Generic[K, V]):
    """One kind of value derived from a catalog revision: its name (for reading), and how many a revision keeps."""

    __slots__ = ("limit", "name")

    def __init__(self, name: str, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"A memo kind keeps at least one value, not {limit}.")
        self.name = name
        self.limit = limit

    def __repr__(self) -> str:
        return f"MemoKind({self.name!r}, limit={self.limit})"


class Kept(Generic[K, V]):
    """The values of one kind kept for one catalog revision.

    Reads take no lock (a dict read is atomic under the GIL); a keep takes one, so that the limit holds when Django
    threads and the event loop keep values at once. Two callers may build one value at once: the first kept wins,
    and both get it."""

    __slots__ = ("_lock", "_values", "kind")

    def __init__(self, kind: MemoKind[K, V]) -> None:
        self.kind = kind
        self._values: dict[K, V] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, key: K) -> bool:
        return key in self._values

    def get(self, key: K) -> V | None:
        return self._values.get(key)

    def keep(self, key: K, value: V) -> V:
        """`value` kept under `key`, unless one already is (that one is returned) or the kind is full."""
        with self._lock:
            existing = self._values.get(key)
            if existing is not None:
                return existing
            if len(self._values) < self.kind.limit:
                self._values[key] = value
            return value

    def remember(self, key: K, build: Callable[[], V]) -> V:
        """The value under `key`, built now and kept if there is none."""
        found = self._values.get(key)
        return found if found is not None else self.keep(key, build())

    @property
    def full(self) -> bool:
        return len(self._values) >= self.kind.limit
