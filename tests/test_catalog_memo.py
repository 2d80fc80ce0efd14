"""What a catalog revision keeps of what is derived from it: by kind, each kind typed and bounded."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from mcp_expose.catalog.compiled import Catalog
from mcp_expose.catalog.memo import Kept, MemoKind
from mcp_expose.core.chain import CallChain
from mcp_expose.serving import fastpath
from mcp_expose.serving.fastpath_requests import PlainRequest

PAGES: MemoKind[int, str] = MemoKind("pages", limit=3)


def empty_catalog(revision: str = "r1") -> Catalog:
    return Catalog(revision=revision, tools=(), by_name={})


def test_a_kind_keeps_at_most_its_limit_first_come_first_kept() -> None:
    kept = Kept(PAGES)
    built: list[int] = []

    def build(number: int) -> str:
        built.append(number)
        return f"page {number}"

    assert [kept.remember(number, lambda n=number: build(n)) for number in range(5)] == [f"page {n}" for n in range(5)]
    assert len(kept) == 3 and kept.full and [n for n in range(5) if n in kept] == [0, 1, 2]
    # Past the limit a value is built each time it is asked for; a kept one never again.
    assert kept.remember(4, lambda: build(4)) == "page 4" and kept.remember(0, lambda: build(0)) == "page 0"
    assert built == [0, 1, 2, 3, 4, 4]
    # A value kept first wins over one built at the same time.
    assert kept.keep(1, "another page 1") == "page 1" and kept.get(1) == "page 1"


def test_the_limit_holds_when_threads_keep_at_once() -> None:
    kept: Kept[int, int] = Kept(MemoKind("numbers", limit=50))
    start = threading.Barrier(8)

    def keep_many(offset: int) -> None:
        start.wait()
        for number in range(offset, offset + 100):
            kept.keep(number, number)

    threads = [threading.Thread(target=keep_many, args=(offset * 100,)) for offset in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(kept) == 50


def test_a_kind_must_keep_something() -> None:
    with pytest.raises(ValueError, match="keeps at least one value, not 0"):
        MemoKind("nothing", limit=0)


def test_a_revision_has_one_store_per_kind_and_a_new_revision_starts_empty() -> None:
    first = empty_catalog("r1")
    assert first.kept(PAGES) is first.kept(PAGES)
    assert first.remember(PAGES, 1, lambda: "one") == "one"
    other: MemoKind[int, str] = MemoKind("pages", limit=3)  # same name, another kind: kept apart
    assert first.kept(other).get(1) is None
    assert empty_catalog("r2").kept(PAGES).get(1) is None


@pytest.mark.anyio
async def test_a_full_kind_of_listings_is_answered_by_the_sdk_and_not_kept() -> None:
    """Past `MAX_VARIANTS` listings a revision keeps, the SDK answers the rest, and its answers are not kept."""
    kept: Kept[Any, bytes] = Kept(MemoKind("listings", limit=1))
    plain = PlainRequest(method="tools/list", id_json=b"1", params={}, chain=CallChain())
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def sdk_answers(send_through: Any) -> None:
        await send_through(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
        )
        await send_through({"type": "http.response.body", "body": b'{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}'})

    exchange = fastpath.Exchange(scope={}, receive=None, send=send, fallback=sdk_answers, caller=None)  # type: ignore[arg-type]
    assert await fastpath.serve_remembered(plain, kept, "first", exchange, json_response=True) is False
    assert kept.get("first") == b'{"tools":[]}'  # the SDK's answer, kept
    assert await fastpath.serve_remembered(plain, kept, "first", exchange, json_response=True) is True
    assert await fastpath.serve_remembered(plain, kept, "second", exchange, json_response=True) is False
    assert "second" not in kept and len(kept) == 1
    assert fastpath.ENCODED_LISTINGS.limit == fastpath.MAX_VARIANTS
    assert len(sent) == 6  # each answer reached the client: the SDK's twice, the kept one once
