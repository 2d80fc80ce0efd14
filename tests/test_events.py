"""The change relay keeps listening through a failed read of the channel layer, on the same channel, so a change
sent meanwhile still arrives; a layer it cannot reach is logged once when lost and once when back. Its watcher
announces a move of the catalog revision once, through a cache outage too, and reads nothing while no one listens."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest
from channels.layers import InMemoryChannelLayer
from mcp.server.subscriptions import ToolsListChanged

from mcp_expose.serving import events

pytestmark = pytest.mark.anyio


class FlakyLayer(InMemoryChannelLayer):
    """Channels' in-memory layer, whose reads and joins fail as a Redis layer's do in the given order."""

    def __init__(self, read_failures: int = 0, join_failures: int = 0) -> None:
        super().__init__()
        self.read_failures, self.join_failures = read_failures, join_failures
        self.channels_made: list[str] = []
        self.reading = anyio.Event()

    async def new_channel(self, prefix: str = "specific.") -> str:
        channel = await super().new_channel(prefix)
        self.channels_made.append(channel)
        return channel

    async def group_add(self, group: str, channel: str) -> None:
        if self.join_failures:
            self.join_failures -= 1
            raise ConnectionError("refused")
        await super().group_add(group, channel)

    async def receive(self, channel: str) -> dict[str, Any]:
        if self.read_failures:
            self.read_failures -= 1
            raise TimeoutError("Timeout reading")
        self.reading.set()
        return await super().receive(channel)


class Bus:
    def __init__(self) -> None:
        self.events: list[str] = []
        self.heard = anyio.Event()

    async def publish(self, event: Any) -> None:
        self.events.append(type(event).__name__)
        self.heard.set()


async def relay_heard(layer: FlakyLayer, monkeypatch: pytest.MonkeyPatch) -> Bus:
    """Run a relay on `layer` until a catalog change sent once it reads has reached its bus."""
    monkeypatch.setattr(events, "shared_layer", lambda: layer)
    monkeypatch.setattr(events, "RETRY_SECONDS", 0.01)
    bus = Bus()
    relay = events.ChangeRelay(bus)
    with anyio.fail_after(30):  # a guard against a hang only: the events end each wait
        async with anyio.create_task_group() as group:
            group.start_soon(relay.run)
            await layer.reading.wait()
            await layer.group_send(events.GROUP, {"type": events.MESSAGE_TYPE})
            await bus.heard.wait()
            group.cancel_scope.cancel()
    return bus


async def test_a_failed_read_is_retried_on_the_same_channel(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    layer = FlakyLayer(read_failures=3)
    with caplog.at_level(logging.WARNING, logger="mcp_expose.events"):
        bus = await relay_heard(layer, monkeypatch)
    assert bus.events[0] == "ToolsListChanged"
    assert len(layer.channels_made) == 1  # messages waiting on the channel are not left behind
    assert caplog.records == []  # a read that timed out is no outage


async def test_an_unreachable_layer_is_logged_once_lost_and_once_back(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    layer = FlakyLayer(join_failures=4)
    with caplog.at_level(logging.WARNING, logger="mcp_expose.events"):
        bus = await relay_heard(layer, monkeypatch)
    assert bus.events[0] == "ToolsListChanged"
    assert [record.getMessage() for record in caplog.records] == [
        "Lost the channel layer (ConnectionError); listening again with backoff",
        "The channel layer is back; listening again",
    ]
    assert all(record.exc_info is None for record in caplog.records)


class Revisions:
    """The catalog revision as the watcher reads it: a value, or an outage (`read_stamps` raising)."""

    def __init__(self, value: str) -> None:
        self.value: str | None = value
        self.reads = 0
        self.read_again = anyio.Event()

    def __call__(self) -> str:
        self.reads += 1
        self.read_again.set()
        if self.value is None:
            raise ConnectionError("cache down")
        return self.value

    async def reads_done(self, count: int) -> None:
        """Until the watcher has read `count` more times."""
        for _ in range(count):
            self.read_again = anyio.Event()
            await self.read_again.wait()


@pytest.fixture
def watched(monkeypatch: pytest.MonkeyPatch) -> Revisions:
    from mcp_expose.catalog import revision

    revisions = Revisions("r1")
    monkeypatch.setattr(revision, "current_revision", revisions)
    monkeypatch.setattr(events, "shared_layer", lambda: None)
    return revisions


async def watching(relay: events.ChangeRelay, body: Any) -> None:
    with anyio.fail_after(30):  # a guard against a hang only
        async with anyio.create_task_group() as group:
            group.start_soon(relay._watch_revision, 0.001)
            await body()
            group.cancel_scope.cancel()


async def test_the_watcher_announces_a_move_once_even_when_the_layer_told_it_first(
    watched: Revisions, caplog: pytest.LogCaptureFixture
) -> None:
    bus = Bus()
    relay = events.ChangeRelay(bus)
    relay._events = (ToolsListChanged(),)
    relay.audience.joined("r1")  # a listener served at r1

    async def changes() -> None:
        await watched.reads_done(2)
        assert bus.events == []  # nothing moved
        watched.value = "r2"
        await relay.deliver("r2")  # the channel layer (or this process) announced r2 first
        await watched.reads_done(2)
        watched.value = None  # the cache is down
        await watched.reads_done(2)
        watched.value = "r3"  # a change made elsewhere, while the revision could not be read
        await watched.reads_done(2)

    with caplog.at_level(logging.WARNING, logger="mcp_expose.events"):
        await watching(relay, changes)
    assert bus.events == ["ToolsListChanged", "ToolsListChanged"]  # r2 once, r3 once
    assert [record.getMessage() for record in caplog.records] == [
        "Cannot read the catalog revision (ConnectionError); listeners hear of changes once it can be read again",
        "The catalog revision can be read again",
    ]


async def test_nothing_is_read_while_no_one_listens(watched: Revisions, monkeypatch: pytest.MonkeyPatch) -> None:
    relay = events.ChangeRelay(Bus())
    looked = anyio.Event()
    looks = 0

    def has_listeners() -> bool:
        nonlocal looks
        looks += 1
        if looks == 20:
            looked.set()
        return events.ChangeRelay.has_listeners(relay)

    monkeypatch.setattr(relay, "has_listeners", has_listeners)
    await watching(relay, looked.wait)
    assert watched.reads == 0
