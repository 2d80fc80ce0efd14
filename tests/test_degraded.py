"""The shared cache is an accelerator: with Redis stopped or frozen, a process skips it after one failure,
reads the revisions from the database, fails rate limits and later rounds closed, and picks up again when it
is back. With the database unavailable, credentials it holds keep working for a grace period.

A real Redis (`tests/services.py`) that the tests stop, freeze and start; a real SQLite database that another
connection locks.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

import mcp_expose
from mcp_expose.access.credential_cache import CREDENTIALS_KEY
from mcp_expose.access.credential_cache import cache as credential_cache
from mcp_expose.access.credentials import authenticate
from mcp_expose.calls import ratelimit
from mcp_expose.calls.dispatch import call_tool
from mcp_expose.catalog.compiled import Catalog, compile_catalog
from mcp_expose.catalog.revision import REVISION_KEY, bump_revision, copies, read_stamps
from mcp_expose.core.conf import changed_settings
from mcp_expose.core.outage import DependencyUnavailable
from mcp_expose.core.principal import Principal
from mcp_expose.core.shared_cache import breaker
from mcp_expose.declare.registry import CapabilityRegistry
from mcp_expose.models import ApiKey, RevisionStamp
from mcp_expose.serving.edge_failures import answering_failures

from .services import RedisServer, redis_server

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture
def on_redis(redis: RedisServer, settings: Any) -> Iterator[RedisServer]:
    """The process's cache is the private Redis, answering, with a short breaker pause; the breaker closed."""
    redis.restore()
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": redis.url,
            "KEY_PREFIX": "degraded",
        }
    }
    settings.MCP_EXPOSE = changed_settings(
        CACHE_RETRY_SECONDS=0.2, REVISION_STALENESS_SECONDS=0, CACHE_READ_TIMEOUT=0.3
    )
    breaker.reset()
    yield redis
    redis.restore()
    breaker.reset()


def until_the_cache_answers() -> dict[str, str]:
    """Read the stamps until a read went to the cache again (the breaker closed): what that read returned."""
    for _ in range(10_000):
        stamps = read_stamps(REVISION_KEY)
        if not breaker.is_open:
            return stamps
    raise AssertionError("the breaker never closed")


def test_a_stopped_cache_is_skipped_after_one_failure_and_stamps_come_from_the_database(
    on_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    before = bump_revision()
    assert read_stamps(REVISION_KEY) == {REVISION_KEY: before}
    on_redis.stop()
    with caplog.at_level(logging.INFO, logger="mcp_expose"):
        changed = bump_revision()  # an admin change during the outage: only the database's copy takes it
        for _ in range(50):
            assert read_stamps(REVISION_KEY) == {REVISION_KEY: changed}
    assert breaker.is_open
    assert RevisionStamp.objects.get(key=REVISION_KEY).value == changed
    starts = [record for record in caplog.records if "shared cache is unavailable" in record.getMessage()]
    assert len(starts) == 1 and not any(record.exc_info for record in caplog.records)

    on_redis.start()  # empty, as after a crash
    with caplog.at_level(logging.INFO, logger="mcp_expose"):
        back = until_the_cache_answers()
    assert back[REVISION_KEY] not in (before, changed)  # a fresh stamp: every process recompiles
    assert any("shared cache is available again" in record.getMessage() for record in caplog.records)


def test_a_frozen_cache_costs_one_timeout_then_nothing_and_its_old_stamps_are_not_trusted_after(
    on_redis: RedisServer, settings: Any
) -> None:
    """Redis counts the MGETs (stamp reads) it runs. Commands sent to it while frozen wait in their sockets and
    run as soon as it is thawed, before a connection made after the thaw is even accepted, so a count read then
    includes every read that reached it."""
    settings.MCP_EXPOSE = changed_settings(settings.MCP_EXPOSE, CACHE_RETRY_SECONDS=600)
    before = bump_revision()
    reads = mget_calls(on_redis)
    on_redis.freeze()
    with pytest.raises(DependencyUnavailable):
        ratelimit.hit("t.limited", "caller", (5, 60))  # waits CACHE_READ_TIMEOUT once, then opens the breaker
    changed = bump_revision()
    for _ in range(20):  # the breaker is open: none of these waits on the frozen cache, or reaches it
        assert read_stamps(REVISION_KEY, CREDENTIALS_KEY)[REVISION_KEY] == changed
        with pytest.raises(DependencyUnavailable):
            ratelimit.hit("t.limited", "caller", (5, 60))
    on_redis.thaw()
    assert mget_calls(on_redis) == reads

    settings.MCP_EXPOSE = changed_settings(settings.MCP_EXPOSE, CACHE_RETRY_SECONDS=0)  # the pause is over
    back = until_the_cache_answers()
    # The cache still held the stamp from before the outage; a process that slept through it must not keep
    # trusting what it compiled then: the stamps were renewed.
    assert back[REVISION_KEY] != before
    assert read_stamps(REVISION_KEY) == back


def mget_calls(redis: RedisServer) -> int:
    import redis as redis_py

    with redis_py.Redis(port=redis.port) as client:
        return int(client.info("commandstats").get("cmdstat_mget", {}).get("calls", 0))


def test_while_both_are_out_the_last_stamps_read_are_served(on_redis: RedisServer, short_busy_timeout: None) -> None:
    known = read_stamps(REVISION_KEY, CREDENTIALS_KEY)
    on_redis.stop()
    connection.close()
    holder = locked_database()
    try:
        assert read_stamps(REVISION_KEY, CREDENTIALS_KEY) == known
    finally:
        holder.close()


@pytest.fixture
def catalog(registry: CapabilityRegistry) -> Catalog:
    @mcp_expose.tool(registry=registry, key="t.limited", rate_limit="100/day")
    def limited() -> str:
        return "counted"

    @mcp_expose.tool(registry=registry, key="t.plain")
    def plain() -> str:
        return "served"

    return compile_catalog(registry, {}, "r")


@pytest.mark.anyio
async def test_rate_limited_tools_fail_closed_and_other_tools_are_served(
    on_redis: RedisServer, catalog: Catalog
) -> None:
    caller = Principal(user=None, method="local")
    # Served by their portable names: these settings are the library's defaults.
    assert (await call_tool(catalog, caller, "t_limited", {})).ok
    on_redis.stop()
    refused = await call_tool(catalog, caller, "t_limited", {})
    assert refused.failure is not None and refused.failure.code == "unavailable"
    assert refused.failure.details == {"retry_after": 5} and "shared cache" in refused.failure.message
    served = await call_tool(catalog, caller, "t_plain", {})
    assert served.ok and served.value == "served"


def test_a_later_round_is_not_run_while_its_single_use_cannot_be_checked(on_redis: RedisServer) -> None:
    from mcp_expose.core.asking import claim_round

    assert claim_round("round-1") is True
    assert claim_round("round-1") is False  # a replay
    on_redis.stop()
    with pytest.raises(DependencyUnavailable):
        claim_round("round-2")


def locked_database() -> sqlite3.Connection:
    """Another connection holding SQLite's exclusive lock: reads wait for the busy timeout, then fail."""
    holder = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    return holder


@pytest.fixture
def short_busy_timeout(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(connection.settings_dict["OPTIONS"], "timeout", 0.1)
    connection.close()
    yield
    connection.close()


def test_a_known_credential_keeps_working_through_a_database_outage_and_an_unknown_one_is_unavailable(
    settings: Any, short_busy_timeout: None
) -> None:
    settings.MCP_EXPOSE = {"CREDENTIAL_CACHE_SECONDS": 0.01, "CREDENTIAL_OUTAGE_GRACE_SECONDS": 300}
    credential_cache.clear()
    user = get_user_model().objects.create_user("grace")
    _, known = ApiKey.create_key(user=user, name="known", scopes="mcp")
    _, unknown = ApiKey.create_key(user=user, name="unknown", scopes="mcp")
    headers = {"authorization": f"Bearer {known}"}
    stamp = read_stamps(CREDENTIALS_KEY)[CREDENTIALS_KEY]
    first = authenticate(headers, credentials_stamp=stamp)
    assert isinstance(first, Principal) and first.user.username == "grace"
    while credential_cache.get(known, None, stamp) is not None:  # until its lifetime is over
        pass

    connection.close()
    holder = locked_database()
    try:
        held = authenticate(headers, credentials_stamp=stamp)
        assert isinstance(held, Principal) and held.api_key_prefix == first.api_key_prefix
        with pytest.raises(DependencyUnavailable) as refused:
            authenticate({"authorization": f"Bearer {unknown}"}, credentials_stamp=stamp)
        assert refused.value.dependency == "database"
    finally:
        holder.close()
    settings.MCP_EXPOSE = {"CREDENTIAL_CACHE_SECONDS": 0.01, "CREDENTIAL_OUTAGE_GRACE_SECONDS": 0}
    holder = locked_database()
    try:
        with pytest.raises(DependencyUnavailable):  # no grace: past its lifetime it must be asked for
            authenticate(headers, credentials_stamp=stamp)
    finally:
        holder.close()


class Recorded:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def __call__(self, message: dict[str, Any]) -> None:
        self.messages.append(message)

    @property
    def status(self) -> int:
        return self.messages[0]["status"]

    @property
    def headers(self) -> dict[bytes, bytes]:
        return dict(self.messages[0]["headers"])

    @property
    def body(self) -> dict[str, Any]:
        return json.loads(b"".join(message.get("body", b"") for message in self.messages[1:]))


async def nothing() -> dict[str, Any]:
    return {"type": "http.disconnect"}


@pytest.mark.anyio
async def test_an_unexpected_failure_at_the_edge_is_a_json_rpc_error_with_an_incident_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def broken(scope: Any, receive: Any, send: Any) -> None:
        raise RuntimeError("secret-bearing detail")

    sent = Recorded()
    with caplog.at_level(logging.ERROR, logger="mcp_expose"):
        await answering_failures(broken, {"type": "http"}, nothing, sent)
    assert sent.status == 500 and sent.headers[b"content-type"] == b"application/json"
    error = sent.body["error"]
    incident = error["data"]["incident"]
    assert sent.body["jsonrpc"] == "2.0" and error["code"] == -32603 and incident in error["message"]
    assert "secret-bearing" not in json.dumps(sent.body)
    [logged] = [record for record in caplog.records if incident in record.getMessage()]
    assert logged.exc_info is not None  # logged once, with its traceback, under the incident id


@pytest.mark.anyio
async def test_a_dependency_outage_at_the_edge_is_503_with_retry_after(caplog: pytest.LogCaptureFixture) -> None:
    async def cache_down(scope: Any, receive: Any, send: Any) -> None:
        raise DependencyUnavailable("database", "checking a credential this process does not know")

    sent = Recorded()
    with caplog.at_level(logging.INFO, logger="mcp_expose"):
        await answering_failures(cache_down, {"type": "http"}, nothing, sent)
    assert sent.status == 503 and sent.headers[b"retry-after"] == b"5"
    assert sent.body["error"]["data"] == {"unavailable": "database", "retry_after": 5}
    assert "database" in sent.body["error"]["message"]
    assert not any(record.exc_info for record in caplog.records)


@pytest.mark.anyio
async def test_a_failure_after_the_answer_began_is_logged_and_not_answered_twice(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def half(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        raise RuntimeError("mid-stream secret-bearing detail")

    sent = Recorded()
    with caplog.at_level(logging.DEBUG, logger="mcp_expose"):
        await answering_failures(half, {"type": "http"}, nothing, sent)
    # The client got the start it was already sent, and nothing after it: no second start, no error body.
    assert sent.messages == [{"type": "http.response.start", "status": 200, "headers": []}]
    assert "secret-bearing" not in repr(sent.messages) and "Traceback" not in repr(sent.messages)
    # Logged once, as an error of the ASGI edge, under an incident id, with the failure's traceback.
    [logged] = [record for record in caplog.records if record.name.startswith("mcp_expose")]
    assert (logged.name, logged.levelno) == ("mcp_expose.asgi", logging.ERROR)
    assert re.fullmatch(r"The MCP endpoint failed after answering began \(incident [0-9a-f]{16}\)", logged.getMessage())
    assert logged.exc_info is not None and logged.exc_info[0] is RuntimeError
    assert str(logged.exc_info[1]) == "mid-stream secret-bearing detail"


def test_stamp_copies_are_kept_by_every_move(on_redis: RedisServer) -> None:
    stamp = bump_revision()
    assert RevisionStamp.objects.get(key=REVISION_KEY).value == stamp
    assert copies.read([REVISION_KEY]) == {REVISION_KEY: stamp}


@pytest.mark.parametrize(
    ("override", "check_id"),
    [
        ({"CACHE_READ_TIMEOUT": 0}, "mcp_expose.E014"),
        ({"CACHE_RETRY_SECONDS": -1}, "mcp_expose.E014"),
        ({"CREDENTIAL_OUTAGE_GRACE_SECONDS": "300"}, "mcp_expose.E014"),
        ({"HEALTH_PATH": "health"}, "mcp_expose.E015"),
        ({"HEALTH_PATH": "/mcp"}, "mcp_expose.E015"),
    ],
)
def test_outage_settings_are_checked(settings: Any, override: dict[str, Any], check_id: str) -> None:
    from mcp_expose.checks import check_settings

    settings.MCP_EXPOSE = changed_settings(**override)
    assert check_id in [message.id for message in check_settings()]
    settings.MCP_EXPOSE = {}
    assert not [message for message in check_settings() if message.id in ("mcp_expose.E014", "mcp_expose.E015")]


@pytest.mark.live
def test_the_health_endpoint_answers_liveness_and_readiness_without_secrets(demo_server: Any) -> None:
    import httpx2

    live = httpx2.get(demo_server.base_url + "/mcp/health")
    assert live.status_code == 200 and live.json() == {"status": "ok"}
    assert live.headers["cache-control"] == "no-store"
    ready = httpx2.get(demo_server.base_url + "/mcp/health/ready")
    assert ready.status_code == 200
    report = ready.json()
    assert report["status"] == "ok" and report["dependencies"]["database"] == "ok"
    assert report["dependencies"]["cache"] == "ok" and report["breakers"] == {"cache": "closed"}
    assert "127.0.0.1" not in ready.text and "sqlite" not in ready.text.lower()
    assert httpx2.post(demo_server.base_url + "/mcp/health").status_code == 405


def test_a_move_the_cache_missed_is_renewed_by_the_next_audit(on_redis: RedisServer) -> None:
    """What a failed `move_stamp` leaves (the database's copy moved, the cache's not), found by an audit."""
    before = bump_revision()
    assert read_stamps(REVISION_KEY) == {REVISION_KEY: before}
    copies.audit()  # the copies as they are now
    copies.audit()  # nothing moved since: the cache is left alone
    assert read_stamps(REVISION_KEY) == {REVISION_KEY: before}
    copies.write(REVISION_KEY, "moved-while-the-cache-missed-it")
    copies.audit()
    renewed = read_stamps(REVISION_KEY)[REVISION_KEY]
    assert renewed != before  # every process reads a fresh stamp, so none keeps what it compiled before
