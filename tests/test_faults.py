"""Two server processes on PostgreSQL and Redis ride out a stopped or frozen service under load, and recover.

Each test warms a steady mixed load up (every kind of request succeeds), injects one fault into this module's
own Redis or PostgreSQL (the system services are shared with other runs), keeps the load going through it,
undoes it, and keeps the load going until every kind succeeds again. Then it checks every answer: never a plain
500; the listing and the echo (which need neither service once the catalog and the credential are known) never
fail; anything else fails only with a clear "retry later"; nothing is slow; every answered call has exactly one
usage row; and the servers logged a handful of tracebacks at most, not one per request. The readiness probe says
each fault as it lasts.
"""

from __future__ import annotations

import secrets
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import MCPError

from .live import LiveServer, manage, prepare_demo, run_server, run_worker
from .load import Answer, Load
from .mcp_client import connect
from .services import PostgresCluster, RedisServer, postgres_cluster, redis_server
from .task_client import TasksExtension, get_task, wait_for
from .test_streams import DISABLE_FROM_A_SHELL, next_event

pytestmark = [pytest.mark.anyio, pytest.mark.live, pytest.mark.scale, pytest.mark.outage]

# The slowest answer accepted, fault or not: a caller told to retry later must be told quickly.
MAX_LATENCY_SECONDS = 3.0
# Guards against a hang, not waits: the load warms up, and recovers after a fault, as soon as it succeeds.
WARM_UP_GUARD_SECONDS = 60.0
RECOVERY_GUARD_SECONDS = 30.0
ROWS_GUARD_SECONDS = 20.0
# A server may log an outage's start with its traceback; one per request is what must not happen.
MAX_TRACEBACKS_PER_SERVER = 5
# The servers' credential cache lifetime in the test whose database outage outlasts it.
SHORT_CREDENTIAL_CACHE_SECONDS = 2
TRACEBACK = "Traceback (most recent call last):"


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresCluster]:
    with postgres_cluster() as running:
        yield running


@pytest.fixture(scope="module")
def env(redis: RedisServer, cluster: PostgresCluster) -> dict[str, str]:
    """The scale settings on this module's own Redis and PostgreSQL cluster."""
    name = f"mcp_outage_{secrets.token_hex(4)}"
    with cluster.connect() as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return {
        "DJANGO_SETTINGS_MODULE": "tests.settings_scale",
        "MCP_SCALE_DB": name,
        "MCP_SCALE_PG_HOST": "127.0.0.1",
        "MCP_SCALE_PG_PORT": str(cluster.port),
        "MCP_SCALE_REDIS": redis.url,
        "MCP_SCALE_PREFIX": name,
    }


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]) -> Path:
    data_dir = tmp_path_factory.mktemp("outage")
    prepare_demo(data_dir, **env)
    return data_dir


@pytest.fixture(scope="module")
def key(data: Path) -> str:
    return (data / "demo-api-key.txt").read_text().strip()


@pytest.fixture(autouse=True)
def services_restored(redis: RedisServer, cluster: PostgresCluster) -> Iterator[None]:
    """Whatever a test left undone, the next one starts on running services."""
    yield
    redis.restore()
    cluster.restore()


@contextmanager
def server_pair(data: Path, env: dict[str, str], **extra: str) -> Iterator[list[LiveServer]]:
    """Two fresh server processes, so each test's logs are its own."""
    with ExitStack() as stack:
        yield [stack.enter_context(run_server(data, **env, **extra)) for _ in range(2)]


@dataclass
class Run:
    """A load's answers, and when (seconds since it started) the fault began, began to be undone and was undone."""

    load: Load
    fault_start: float
    undo_start: float
    fault_end: float
    recovery_failure: str | None

    def phase(self, answer: Answer) -> str:
        """Answered before the fault; else sent during it, while it was being undone, or after."""
        if answer.sent + answer.latency < self.fault_start:
            return "before"
        if answer.sent < self.undo_start:
            return "fault"  # including what was sent before it and answered while it lasted
        return "undoing" if answer.sent < self.fault_end else "after"

    def counts(self, answers: list[Answer]) -> str:
        tally = Counter((self.phase(answer), answer.kind, answer.label) for answer in answers)
        order = ["before", "fault", "undoing", "after"]
        rows = sorted(tally.items(), key=lambda item: (order.index(item[0][0]), item[0][1:]))
        return "\n".join(f"  {count:5d}  {phase:7s} {kind:7s} {label}" for (phase, kind, label), count in rows)


async def ride_out(
    servers: list[LiveServer], key: str, name: str, inject: Callable[[], None], undo: Callable[[], None], seconds: float
) -> Run:
    """Warm up, `inject`, keep the load going for `seconds`, `undo`, and keep it going until every kind succeeds."""
    load = Load([server.mcp_url for server in servers], key, f"{name}-{secrets.token_hex(3)}")
    recovery_failure = None
    async with anyio.create_task_group() as group:
        group.start_soon(load.run)
        try:
            await load.all_kinds_succeed(since=0, timeout=WARM_UP_GUARD_SECONDS)
            fault_start = load.now()
            await anyio.to_thread.run_sync(inject)
            try:
                await anyio.sleep(seconds)  # the fault's length: the load runs meanwhile
            finally:
                undo_start = load.now()
                await anyio.to_thread.run_sync(undo)
            fault_end = load.now()
            try:
                await load.all_kinds_succeed(since=fault_end, timeout=RECOVERY_GUARD_SECONDS)
            except AssertionError as exc:
                recovery_failure = str(exc)
        finally:
            load.stop()
    return Run(load, fault_start, undo_start, fault_end, recovery_failure)


def assert_rode_out(run: Run, servers: list[LiveServer], cluster: PostgresCluster, database: str) -> None:
    """Every check below, reported together with the counts of every kind of answer in each phase."""
    answers = run.load.answers
    failures = []

    def check(bad: list[Answer], what: str) -> None:
        if bad:
            failures.append(f"{len(bad)} answers {what}:\n{run.counts(bad)}\n  e.g. {bad[0]}")

    check(
        [
            a
            for a in answers
            if a.status is not None and a.status >= 500 and not (a.status == 503 and a.retry_after and a.json_body)
        ],
        "were a 5xx other than a JSON 503 with Retry-After",
    )
    check(
        [a for a in answers if a.kind in ("list", "echo") and not a.succeeded],
        "to tools/list or library.echo failed (they need neither service once warm)",
    )
    check([a for a in answers if not (a.succeeded or a.retryable)], "were neither a success nor a clear retry later")
    check([a for a in answers if a.latency > MAX_LATENCY_SECONDS], f"took longer than {MAX_LATENCY_SECONDS} s")
    if run.recovery_failure:
        failures.append(f"No recovery after the fault was undone: {run.recovery_failure}")
    failures.extend(usage_row_failures(run, cluster, database))
    for index, server in enumerate(servers):
        if len(raised := logged_exceptions(server.log())) > MAX_TRACEBACKS_PER_SERVER:
            failures.append(
                f"Server {index} logged {len(raised)} tracebacks (at most {MAX_TRACEBACKS_PER_SERVER}), "
                f"ending in: {Counter(raised).most_common(3)}"
            )
    summary = (
        f"{len(answers)} answers; the fault from {run.fault_start:.1f} s, undone from {run.undo_start:.1f} s "
        f"to {run.fault_end:.1f} s; "
        f"slowest {max(a.latency for a in answers):.1f} s. All answers:\n{run.counts(answers)}"
    )
    assert not failures, "\n".join(failures) + "\n" + summary


def logged_exceptions(log: str) -> list[str]:
    """The exception line ending each traceback in a server's log."""
    ends = []
    for chunk in log.split(TRACEBACK)[1:]:
        lines = [line for line in chunk.splitlines()[1:] if line and not line.startswith(" ")]
        ends.append(lines[0][:160] if lines else "?")
    return ends


def usage_row_failures(run: Run, cluster: PostgresCluster, database: str) -> list[str]:
    """One usage row for every tools/call answered with a result, none for a call refused before it ran.

    Servers write rows in batches (and keep them through a database outage), so this waits for the rows of
    the answered calls, then looks once more a moment later, so that a row too many shows."""
    calls = [answer for answer in run.load.answers if answer.conversation is not None]
    answered = {answer.conversation for answer in calls if answer.status == 200 and answer.result is not None}
    unknown = {answer.conversation for answer in calls if answer.rpc_error is not None or answer.status is None}
    deadline = time.monotonic() + ROWS_GUARD_SECONDS
    while not answered <= usage_rows(cluster, database, run.load.prefix).keys() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(0.5)
    rows = usage_rows(cluster, database, run.load.prefix)
    failures = []
    if missing := answered - set(rows):
        failures.append(f"{len(missing)} of {len(answered)} answered tools/call have no usage row")
    if unexpected := set(rows) - answered - unknown:
        failures.append(f"{len(unexpected)} usage rows belong to calls refused before they ran")
    if duplicated := {conversation: count for conversation, count in rows.items() if count > 1}:
        failures.append(f"{len(duplicated)} calls have more than one usage row: {list(duplicated.items())[:5]}")
    return failures


def usage_rows(cluster: PostgresCluster, database: str, prefix: str) -> dict[str, int]:
    with cluster.connect(database) as connection:
        result = connection.execute(
            "SELECT conversation_id, count(*) FROM mcp_expose_toolcall WHERE conversation_id LIKE %s"
            " GROUP BY conversation_id",
            (f"{prefix}-%",),
        )
        return dict(result.fetchall())


async def test_without_a_fault_the_load_passes_every_check(
    cluster: PostgresCluster, data: Path, env: dict[str, str], key: str
) -> None:
    """The control: what the fault tests find is the faults' doing, not the load's or the checks'."""
    with server_pair(data, env) as servers:
        run = await ride_out(servers, key, "no-fault", lambda: None, lambda: None, seconds=3)
        assert_rode_out(run, servers, cluster, env["MCP_SCALE_DB"])


async def test_redis_stopped_and_started_again(
    redis: RedisServer, cluster: PostgresCluster, data: Path, env: dict[str, str], key: str
) -> None:
    with server_pair(data, env) as servers:
        run = await ride_out(servers, key, "redis-stop", redis.stop, redis.start, seconds=5)
        assert_rode_out(run, servers, cluster, env["MCP_SCALE_DB"])


async def test_redis_frozen_and_thawed(
    redis: RedisServer, cluster: PostgresCluster, data: Path, env: dict[str, str], key: str
) -> None:
    with server_pair(data, env) as servers:
        run = await ride_out(servers, key, "redis-freeze", redis.freeze, redis.thaw, seconds=4)
        assert_rode_out(run, servers, cluster, env["MCP_SCALE_DB"])


async def test_postgres_stopped_and_started_again(
    cluster: PostgresCluster, data: Path, env: dict[str, str], key: str
) -> None:
    with server_pair(data, env) as servers:
        run = await ride_out(servers, key, "postgres-stop", cluster.stop, cluster.start, seconds=5)
        assert_rode_out(run, servers, cluster, env["MCP_SCALE_DB"])


async def test_postgres_stopped_for_longer_than_the_credential_cache_lasts(
    cluster: PostgresCluster, data: Path, env: dict[str, str], key: str
) -> None:
    with server_pair(data, env, MCP_SCALE_CREDENTIAL_CACHE=str(SHORT_CREDENTIAL_CACHE_SECONDS)) as servers:
        run = await ride_out(
            servers, key, "postgres-long", cluster.stop, cluster.start, seconds=3 * SHORT_CREDENTIAL_CACHE_SECONDS
        )
        assert_rode_out(run, servers, cluster, env["MCP_SCALE_DB"])


def test_the_scale_settings_take_the_credential_cache_lifetime_from_the_environment(
    data: Path, env: dict[str, str]
) -> None:
    code = "from mcp_expose.core.conf import get_settings; print(get_settings().CREDENTIAL_CACHE_SECONDS)"
    lifetimes = [
        manage(data, "shell", "-c", code, env={**env, **extra}).stdout.strip().splitlines()[-1]
        for extra in ({}, {"MCP_SCALE_CREDENTIAL_CACHE": "2"})
    ]
    assert lifetimes == ["30", "2"]


async def test_a_change_saved_while_redis_is_stopped_reaches_a_listener(
    redis: RedisServer, data: Path, env: dict[str, str], key: str
) -> None:
    """Neither the cache's stamp nor the channel layer can carry it: the database's copy of the revision does."""
    with run_server(data, **env) as server:
        async with connect(server.mcp_url, key, "auto") as client:
            async with client.listen(tools_list_changed=True) as subscription:
                await anyio.to_thread.run_sync(redis.stop)
                changed = await anyio.to_thread.run_sync(
                    lambda: manage(data, "shell", "-c", DISABLE_FROM_A_SHELL, env=env)
                )
                assert changed.returncode == 0
                assert await next_event(subscription) == "ToolsListChanged"
            names = [tool.name for tool in (await client.list_tools()).tools]
        assert "library.popular_authors" not in names and "library.echo" in names
        log = server.log()
    assert "The shared cache is unavailable" in log and log.count(TRACEBACK) <= MAX_TRACEBACKS_PER_SERVER
    await anyio.to_thread.run_sync(redis.start)
    manage(data, "shell", "-c", DISABLE_FROM_A_SHELL.replace("row.enabled = False", "row.enabled = True"), env=env)


async def test_a_task_rides_out_a_database_outage(
    cluster: PostgresCluster, data: Path, env: dict[str, str], key: str
) -> None:
    """PostgreSQL stops while a task runs: tasks/get says the database is unavailable (retryable), the worker keeps
    running the tool and waits to write its outcome, and the task completes once the database is back."""
    task_env = {**env, "MCP_TEST_TASK_HEARTBEAT": "0.2", "MCP_TEST_TASK_LEASE": "60"}
    tasks = TasksExtension(follow=False)
    with run_server(data, **task_env) as server, run_worker(data, **task_env):
        async with connect(server.mcp_url, key, "auto", extensions=[tasks]) as client:
            await client.call_tool("toolbox.slow_task", {"seconds": 3})
            task_id = tasks.created[0].task_id
            await _until_running(client, task_id)
            await anyio.to_thread.run_sync(cluster.stop)
            try:
                with pytest.raises(MCPError) as unavailable:
                    await get_task(client.session, task_id)
                assert unavailable.value.data == {"unavailable": "database", "retry_after": 5}
                await anyio.sleep(4)  # the outage outlasts the tool's work, so its outcome waits for the database
            finally:
                await anyio.to_thread.run_sync(cluster.start)
            done = await _until_readable(client, task_id)
    assert done["status"] == "completed", done
    assert done["result"]["structuredContent"] == {"slept": 3, "user": "admin", "in_task": True}


async def _until_running(client: Any, task_id: str) -> None:
    """Until the worker runs the task: its first progress message is then the task's status message."""
    with anyio.fail_after(120):
        while (await get_task(client.session, task_id)).get("statusMessage") != "starting":
            await anyio.sleep(0.05)


async def _until_readable(client: Any, task_id: str) -> dict[str, Any]:
    """The task once the database answers again and the task has ended."""
    with anyio.fail_after(120):
        while True:
            try:
                return await wait_for(client.session, task_id)
            except MCPError as exc:
                if (exc.data or {}).get("unavailable") != "database":
                    raise
                await anyio.sleep(0.2)


def readiness_until(server: LiveServer, status: str) -> httpx2.Response:
    """The readiness answer once it reports `status` (each probe asks the services again, a second apart at
    most), or a failure with the last answer after RECOVERY_GUARD_SECONDS."""
    deadline = time.monotonic() + RECOVERY_GUARD_SECONDS
    while True:
        answer = httpx2.get(server.base_url + "/mcp/health/ready", timeout=MAX_LATENCY_SECONDS * 3)
        if answer.json()["status"] == status or time.monotonic() > deadline:
            assert answer.json()["status"] == status, answer.text
            return answer
        time.sleep(0.2)


def test_readiness_is_degraded_without_redis_and_unavailable_without_the_database(
    redis: RedisServer, cluster: PostgresCluster, data: Path, env: dict[str, str]
) -> None:
    """Health's three states against real faults: Redis stopped (the process serves what it can: 200 `degraded`),
    PostgreSQL stopped (503 `unavailable`, so a load balancer takes the process out), and back to `ok` after each.
    The answer names states and counts only: no host, port, database or error message."""
    with run_server(data, **env) as server:
        ok = readiness_until(server, "ok")
        assert ok.status_code == 200 and ok.json()["dependencies"]["cache"] == "ok"

        redis.stop()
        degraded = readiness_until(server, "degraded")
        assert degraded.status_code == 200
        assert degraded.json()["dependencies"]["cache"] == "unavailable"
        assert degraded.json()["dependencies"]["database"] == "ok"
        redis.start()
        assert readiness_until(server, "ok").status_code == 200

        cluster.stop()
        unavailable = readiness_until(server, "unavailable")
        assert unavailable.status_code == 503
        assert unavailable.json()["dependencies"]["database"] == "unavailable"
        # Liveness stays up: the process is not restarted for an outage it rides out.
        assert httpx2.get(server.base_url + "/mcp/health").json() == {"status": "ok"}
        cluster.start()
        assert readiness_until(server, "ok").status_code == 200

    for answer in (degraded, unavailable):
        for detail in ("127.0.0.1", str(redis.port), str(cluster.port), env["MCP_SCALE_DB"], "Error", "refused"):
            assert detail not in answer.text
