"""Two server processes on PostgreSQL and Redis behave as one server.

Needs PostgreSQL (role and password "mcp") and Redis on 127.0.0.1, which `scripts/services` installs and starts;
`scripts/test` runs it first.
"""

from __future__ import annotations

import json
import secrets
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from .live import (
    LiveServer,
    create_api_key,
    jsonrpc_body,
    modern_headers,
    prepare_demo,
    run_server,
    start_server,
    stop_server,
)
from .mcp_client import connect
from .test_invocation import assert_refused_state, continue_round, first_round
from .test_processes import disable_in_admin

pytestmark = [pytest.mark.anyio, pytest.mark.live, pytest.mark.scale]


def _postgres(database: str = "postgres") -> Any:
    import psycopg

    try:
        return psycopg.connect(host="127.0.0.1", user="mcp", password="mcp", dbname=database, autocommit=True)
    except psycopg.OperationalError as exc:
        pytest.fail(f"PostgreSQL is not reachable on 127.0.0.1:5432 as 'mcp' (run scripts/services): {exc}")


@contextmanager
def scale_database(prefix: str) -> Iterator[dict[str, str]]:
    """A PostgreSQL database and a Redis key prefix of this run's own, as the environment of tests.settings_scale."""
    name = f"{prefix}_{secrets.token_hex(4)}"
    with _postgres() as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield {"DJANGO_SETTINGS_MODULE": "tests.settings_scale", "MCP_SCALE_DB": name, "MCP_SCALE_PREFIX": name}
    finally:
        with _postgres() as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def env() -> Iterator[dict[str, str]]:
    """A database and a Redis key prefix of this run's own."""
    with scale_database("mcp_scale") as environment:
        yield environment


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]) -> Path:
    data_dir = tmp_path_factory.mktemp("scale")
    prepare_demo(data_dir, **env)
    return data_dir


@pytest.fixture(scope="module")
def key(data: Path) -> str:
    return (data / "demo-api-key.txt").read_text().strip()


@pytest.fixture(scope="module")
def pair(data: Path, env: dict[str, str]) -> Iterator[tuple[LiveServer, LiveServer]]:
    with run_server(data, **env) as first, run_server(data, **env) as second:
        yield first, second


def rows(env: dict[str, str], conversation: str, expected: int) -> dict[str, int]:
    """Usage rows by outcome, once `expected` have arrived (running servers write them in batches, within
    USAGE_BATCH_SECONDS) or after 10 seconds; looked at again half a second later, so a row too many shows."""
    deadline = time.monotonic() + 10
    while sum(_outcomes(env, conversation).values()) < expected and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    return _outcomes(env, conversation)


def _outcomes(env: dict[str, str], conversation: str) -> dict[str, int]:
    with _postgres(env["MCP_SCALE_DB"]) as connection:
        result = connection.execute(
            "SELECT outcome, count(*) FROM mcp_expose_toolcall WHERE conversation_id = %s GROUP BY outcome",
            (conversation,),
        )
        return dict(result.fetchall())


async def post_call(http: httpx2.AsyncClient, url: str, key: str, conversation: str, message: str) -> httpx2.Response:
    return await http.post(
        url,
        content=jsonrpc_body("tools/call", {"name": "library.echo", "arguments": {"message": message}}),
        headers={**modern_headers("tools/call", key, name="library.echo"), "X-Conversation-Id": conversation},
    )


async def test_an_admin_change_through_one_process_is_served_by_the_other(pair: Any, key: str) -> None:
    first, second = pair
    async with connect(second.mcp_url, key, "auto") as client:
        assert "library.inventory" in [tool.name for tool in (await client.list_tools()).tools]
    await anyio.to_thread.run_sync(disable_in_admin, first.base_url, "library.inventory")
    async with connect(second.mcp_url, key, "legacy") as client:
        assert "library.inventory" not in [tool.name for tool in (await client.list_tools()).tools]


async def test_a_confirmation_started_on_one_process_completes_on_the_other(pair: Any, key: str) -> None:
    first, second = pair
    arguments = {"target": "across"}
    pending = await first_round(first.mcp_url, key, arguments)
    done = await continue_round(second.mcp_url, key, arguments, pending.request_state)
    assert done.structured_content == {"result": "launched across"}
    assert_refused_state(await continue_round(first.mcp_url, key, arguments, pending.request_state))


async def test_a_rate_limit_is_shared(pair: Any, data: Path, env: dict[str, str]) -> None:
    reader_key = create_api_key(data, "reader", "library:read", **env)
    outcomes = []
    for server in (pair[0], pair[1], pair[0], pair[1]):
        async with connect(server.mcp_url, reader_key, "auto") as client:
            outcomes.append((await client.call_tool("toolbox.limited", {})).is_error)
    assert outcomes == [False, False, False, True]


async def test_list_changed_reaches_a_listener_on_the_other_process(pair: Any, key: str) -> None:
    first, second = pair
    async with connect(second.mcp_url, key, "auto") as client:
        async with client.listen(tools_list_changed=True) as subscription:
            await anyio.to_thread.run_sync(disable_in_admin, first.base_url, "library.popular_authors")
            event = None
            with anyio.move_on_after(15):  # only a guard against a hang: the event ends the wait
                event = await subscription.__anext__()
    assert type(event).__name__ == "ToolsListChanged", (
        f"No list change reached the listener on the other process.\nIts log:\n{second.log()[-4000:]}\n"
        f"The changing process's log:\n{first.log()[-4000:]}"
    )


async def test_500_concurrent_calls_over_both_processes_leave_500_rows(
    pair: Any, key: str, env: dict[str, str]
) -> None:
    conversation = f"burst-{secrets.token_hex(3)}"
    limits = anyio.CapacityLimiter(100)
    statuses: list[int] = []

    async def one(index: int, http: httpx2.AsyncClient) -> None:
        async with limits:
            response = await post_call(http, pair[index % 2].mcp_url, key, conversation, f"call {index}")
            statuses.append(response.status_code)

    async with httpx2.AsyncClient(timeout=120, limits=httpx2.Limits(max_connections=200)) as http:
        async with anyio.create_task_group() as group:
            for index in range(500):
                group.start_soon(one, index, http)
    assert statuses.count(200) == 500
    assert rows(env, conversation, 500) == {"ok": 500}


async def test_restarting_one_process_mid_load_loses_nothing(data: Path, env: dict[str, str], key: str) -> None:
    """Requests go to both processes; one is stopped (SIGTERM: it finishes what it accepted) and started again.

    A request the stopping process never accepted fails to connect and is sent to the other one: no 5xx, and
    exactly one row per answered call.
    """
    conversation = f"restart-{secrets.token_hex(3)}"
    answered: list[int] = []
    redirected: list[str] = []
    replacements: list[LiveServer] = []
    with run_server(data, **env) as steady, run_server(data, **env) as restarted:
        urls = [steady.mcp_url, restarted.mcp_url]

        async def client(worker: int, http: httpx2.AsyncClient) -> None:
            for index in range(40):
                await anyio.sleep(0.05)  # a steady load, spread over the restart
                targets = [urls[(worker + index) % 2], steady.mcp_url]
                for url in targets:
                    try:
                        response = await post_call(http, url, key, conversation, f"{worker}-{index}")
                    except httpx2.TransportError:
                        redirected.append(url)
                        continue  # not accepted: try the other process
                    answered.append(response.status_code)
                    break
                else:
                    raise AssertionError("no process accepted the request")

        async def restart() -> None:
            await anyio.sleep(0.5)
            restarted.process.send_signal(signal.SIGTERM)
            await anyio.to_thread.run_sync(lambda: restarted.process.wait(timeout=30))
            replacement = await anyio.to_thread.run_sync(lambda: start_server(data, port=restarted.port, **env))
            replacements.append(replacement)

        try:
            async with httpx2.AsyncClient(timeout=60) as http:
                async with anyio.create_task_group() as group:
                    group.start_soon(restart)
                    for worker in range(10):
                        group.start_soon(client, worker, http)
        finally:
            for replacement in replacements:
                stop_server(replacement)
        # uvicorn finishes what it accepted, then exits through the signal it got (status -15).
        assert restarted.process.returncode in (0, -signal.SIGTERM) and "Traceback" not in restarted.log()
        assert len(replacements) == 1
    assert len(answered) == 400 and set(answered) == {200}, sorted(set(answered))
    assert redirected, "the restart should have happened while the load was running"
    assert rows(env, conversation, 400) == {"ok": 400}


def test_settings_use_postgres_and_redis(data: Path, env: dict[str, str]) -> None:
    from .live import manage

    output = (
        manage(
            data,
            "shell",
            "-c",
            "import json; from django.conf import settings; from django.db import connection;"
            "print(json.dumps([connection.vendor, settings.CACHES['default']['BACKEND'], settings.CHANNEL_LAYERS['default']['BACKEND']]))",
            env=env,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    assert json.loads(output) == [
        "postgresql",
        "django.core.cache.backends.redis.RedisCache",
        "channels_redis.core.RedisChannelLayer",
    ]


UPSTREAM_SETUP = """
import json
from django.contrib.auth import get_user_model
from mcp_expose.models import ExposedTool, UpstreamServer, UpstreamTool
from mcp_expose.upstream.snapshots import approve, rediscover
server = UpstreamServer.objects.create(name="tickets", url={url!r}, connect_timeout=1.0, call_timeout=5.0)
discovery, counts = rediscover(server)
for name in ["echo", "notes"]:
    tool = UpstreamTool.objects.get(server=server, name=name)
    approve(tool, get_user_model().objects.get(username="admin"), tool.proposed_digest)
    row = ExposedTool.objects.get(key=tool.key)
    row.enabled, row.requires_confirmation = True, False
    row.save()
print(json.dumps(counts))
"""

UPSTREAM_CHANGE = """
import json
from django.contrib.auth import get_user_model
from mcp_expose.models import UpstreamServer, UpstreamTool
from mcp_expose.upstream.snapshots import approve, rediscover
discovery, counts = rediscover(UpstreamServer.objects.get(name="tickets"))
tool = UpstreamTool.objects.get(name="notes")
if {approve_it}:
    approve(tool, get_user_model().objects.get(username="admin"), tool.proposed_digest)
    tool.refresh_from_db()
print(json.dumps(tool.status))
"""


async def test_both_processes_serve_the_approved_upstream_set_and_each_keeps_its_own_breaker(
    pair: Any, data: Path, env: dict[str, str], key: str
) -> None:
    from .live import manage
    from .upstream_servers import run_upstream

    def shell(code: str) -> Any:
        return json.loads(manage(data, "shell", "-c", code, env=env).stdout.strip().splitlines()[-1])

    async def described(server: LiveServer) -> dict[str, str]:
        async with connect(server.mcp_url, key, "auto") as client:
            tools = (await client.list_tools()).tools
        return {tool.name: tool.description or "" for tool in tools if tool.name.startswith("tickets.")}

    notes = data / "upstream-notes.txt"
    notes.unlink(missing_ok=True)
    with run_upstream(data, "bare_server", UPSTREAM_DESCRIPTION_FILE=str(notes)) as upstream:
        assert shell(UPSTREAM_SETUP.format(url=upstream.mcp_url))["new"] == 3
        expected = {"tickets.echo": "Say the text back.", "tickets.notes": "Notes on a topic."}
        for server in pair:  # the approval moved the revision in Redis: both recompile
            assert await described(server) == expected
        notes.write_text("A new text nobody approved.")
        assert shell(UPSTREAM_CHANGE.format(approve_it=False)) == "changed"
        for server in pair:
            assert await described(server) == expected
        assert shell(UPSTREAM_CHANGE.format(approve_it=True)) == "approved"
        for server in pair:
            assert (await described(server))["tickets.notes"] == "A new text nobody approved."
        async with connect(pair[0].mcp_url, key, "auto") as client:
            answer = await client.call_tool("tickets.echo", {"text": "through process one"})
        assert answer.structured_content == {"result": "through process one"}
    # The upstream is gone. The first process fails five calls in a row and opens its breaker; the second,
    # which has its own, still tries the upstream on its next call.
    async with connect(pair[0].mcp_url, key, "auto") as first, connect(pair[1].mcp_url, key, "auto") as second:
        for _ in range(5):
            failed = await first.call_tool("tickets.echo", {"text": "x"})
            assert failed.structured_content["error"]["code"] == "upstream_unavailable"
            assert "cannot be reached" in failed.structured_content["error"]["message"]
        fast = await first.call_tool("tickets.echo", {"text": "x"})
        assert "failed repeatedly just now" in fast.structured_content["error"]["message"]
        tried = await second.call_tool("tickets.echo", {"text": "x"})
        assert "cannot be reached" in tried.structured_content["error"]["message"]
