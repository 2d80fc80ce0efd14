"""MCP tasks end to end: uvicorn serving the demo with the toolbox, `manage.py db_worker` running the tasks, the
official SDK client with the tasks extension (tests/task_client.py) on one side, and the database between."""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import MCPError

from .live import (
    LIVE_SETTINGS,
    ROOT,
    LiveServer,
    create_api_key,
    demo_env,
    jsonrpc_body,
    modern_headers,
    prepare_demo,
    run_server,
    run_snippet,
    run_worker,
    start_server,
    stop_server,
)
from .mcp_client import connect
from .task_client import TasksExtension, cancel_task, get_task, update_task, wait_for

pytestmark = [pytest.mark.anyio, pytest.mark.live]

# Short timings, so that a dead worker's task fails within a test; a fast poll, so that waits end soon.
TASK_ENV = {
    **LIVE_SETTINGS,
    "MCP_TEST_TASK_LEASE": "1.5",
    "MCP_TEST_TASK_HEARTBEAT": "0.1",
    "MCP_TEST_TASK_POLL_INTERVAL": "0.05",
}
UNKNOWN_TASK = "Failed to retrieve task: Task not found"


@pytest.fixture(scope="module")
def task_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("tasks")
    prepare_demo(data_dir)
    return data_dir


@pytest.fixture(scope="module")
def admin(task_data: Path) -> str:
    return create_api_key(task_data, "admin", "mcp library:read library:write")


@pytest.fixture(scope="module")
def other_admin_key(task_data: Path) -> str:
    """The same user's other key: a task belongs to the credential that made it."""
    return create_api_key(task_data, "admin", "mcp library:read library:write")


@pytest.fixture(scope="module")
def reader(task_data: Path) -> str:
    return create_api_key(task_data, "reader", "mcp library:read")


@pytest.fixture(scope="module")
def worker(task_data: Path) -> Iterator[Any]:
    with run_worker(task_data, **TASK_ENV) as process:
        yield process


@pytest.fixture(scope="module")
def live(task_data: Path, worker: Any) -> Iterator[LiveServer]:
    with run_server(task_data, **TASK_ENV) as server:
        yield server


async def never_asked(context: Any, params: Any) -> Any:
    """Declares elicitation: a task asks through tasks/get, never with a request to the client."""
    raise AssertionError("a task asks through tasks/get, never with a request to the client")


def _text(result: Any) -> str:
    return result.content[0].text


async def test_a_task_runs_in_the_worker_as_its_caller_and_returns_what_a_direct_call_returns(
    live: LiveServer, admin: str
) -> None:
    tasks = TasksExtension()
    async with connect(live.mcp_url, admin, "auto", extensions=[tasks]) as client:
        assert "io.modelcontextprotocol/tasks" in (client.server_capabilities.extensions or {})
        as_task = await client.call_tool("toolbox.slow_task", {"seconds": 0.3})
    async with connect(live.mcp_url, admin, "auto") as client:
        direct = await client.call_tool("toolbox.slow_task", {"seconds": 0.3})
    [created] = tasks.created
    assert created.status == "working"
    assert created.ttl_ms == 3600 * 1000 and created.poll_interval_ms == 50
    assert len(created.task_id) >= 32
    assert as_task.structured_content == {"slept": 0.3, "user": "admin", "in_task": True}
    assert direct.structured_content == {"slept": 0.3, "user": "admin", "in_task": False}
    assert as_task.is_error is False and json.loads(_text(as_task)) == as_task.structured_content


async def test_bad_input_is_refused_before_a_task_is_made_and_a_protocol_error_fails_the_task(
    live: LiveServer, admin: str
) -> None:
    tasks = TasksExtension()
    async with connect(live.mcp_url, admin, "auto", extensions=[tasks]) as client:
        refused = await client.call_tool("toolbox.slow_task", {"seconds": 99})  # over the schema's bound
        assert refused.is_error and not tasks.created
        # This client declared no elicitation: the task's question is -32021, as a direct call's would be.
        with pytest.raises(MCPError) as failed:
            await client.call_tool("toolbox.asking_task", {})
    assert failed.value.code == -32021 and len(tasks.created) == 1


async def test_questions_park_the_task_until_tasks_update_answers_them(live: LiveServer, admin: str) -> None:
    asked: list[dict[str, Any]] = []

    async def answer(requests: dict[str, Any]) -> dict[str, Any]:
        asked.append(requests)
        return await _answer_ada(requests)

    tasks = TasksExtension(answer)
    async with connect(live.mcp_url, admin, "auto", extensions=[tasks], elicitation_callback=never_asked) as client:
        result = await client.call_tool("toolbox.asking_task", {})
    assert result.structured_content == {"hello": "Ada"}
    [questions] = asked
    assert list(questions) == ["name"] and questions["name"]["method"] == "elicitation/create"
    assert questions["name"]["params"]["message"] == "What is your name?"


async def test_a_cancelled_task_stops_and_stays_cancelled(live: LiveServer, admin: str) -> None:
    tasks = TasksExtension(follow=False)
    async with connect(live.mcp_url, admin, "auto", extensions=[tasks]) as client:
        await client.call_tool("toolbox.slow_task", {"seconds": 60})
        task_id = tasks.created[0].task_id
        await wait_for(client.session, task_id, ("working",))
        ack = await cancel_task(client.session, task_id)
        assert ack["resultType"] == "complete" and not {"taskId", "status", "result", "error"} & set(ack)
        cancelled = await get_task(client.session, task_id)
        assert cancelled["status"] == "cancelled" and "result" not in cancelled and "error" not in cancelled
        again = await cancel_task(client.session, task_id)  # idempotent on an ended task
        assert again["resultType"] == "complete" and "status" not in again
        assert (await get_task(client.session, task_id))["status"] == "cancelled"
        # The worker let go of it: the next task runs at once.
        follow = TasksExtension()
    async with connect(live.mcp_url, admin, "auto", extensions=[follow]) as client:
        assert (await client.call_tool("toolbox.slow_task", {"seconds": 0})).structured_content["in_task"] is True


async def test_only_the_credential_that_made_a_task_can_see_answer_or_cancel_it(
    live: LiveServer, admin: str, other_admin_key: str, reader: str
) -> None:
    tasks = TasksExtension(follow=False)
    async with connect(live.mcp_url, admin, "auto", extensions=[tasks], elicitation_callback=never_asked) as client:
        await client.call_tool("toolbox.asking_task", {})
        task_id = tasks.created[0].task_id
        await wait_for(client.session, task_id, ("input_required",))
    for stranger in (reader, other_admin_key):
        async with connect(live.mcp_url, stranger, "auto", extensions=[TasksExtension()]) as client:
            for attempt in (
                get_task(client.session, task_id),
                update_task(client.session, task_id, {"name": {"action": "accept", "content": {"name": "Eve"}}}),
                cancel_task(client.session, task_id),
                get_task(client.session, "no-such-task"),
            ):
                with pytest.raises(MCPError) as refused:
                    await attempt
                assert (refused.value.code, refused.value.message) == (-32602, UNKNOWN_TASK)
    async with connect(live.mcp_url, admin, "auto", extensions=[TasksExtension()]) as client:
        untouched = await get_task(client.session, task_id)
        assert untouched["status"] == "input_required" and list(untouched["inputRequests"]) == ["name"]
        await cancel_task(client.session, task_id)


async def test_a_required_task_tool_is_minus_32021_for_clients_without_tasks(live: LiveServer, admin: str) -> None:
    for mode in ("auto", "legacy"):
        async with connect(live.mcp_url, admin, mode) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("toolbox.author_task", {"name": "Nobody"})
            assert refused.value.code == -32021
            assert refused.value.data == {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
            # An optional one runs directly, in either era.
            direct = await client.call_tool("toolbox.slow_task", {"seconds": 0})
            assert direct.structured_content["in_task"] is False
    # The extension's methods do not exist in 2025-11-25.
    async with connect(live.mcp_url, admin, "legacy") as client:
        with pytest.raises(MCPError) as missing:
            await get_task(client.session, "any")
        assert missing.value.code == -32601


async def test_a_call_is_confirmed_in_its_own_rounds_before_its_task_is_made(live: LiveServer, admin: str) -> None:
    asked: list[str] = []

    async def person(context: Any, params: Any) -> Any:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True})

    tasks = TasksExtension()
    async with connect(live.mcp_url, admin, "auto", extensions=[tasks], elicitation_callback=person) as client:
        result = await client.call_tool("toolbox.confirmed_task", {"label": "yes"})
    assert result.structured_content == {"confirmed": "yes"}
    assert len(asked) == 1 and len(tasks.created) == 1  # one yes, in the call; then one task

    async def refusing(context: Any, params: Any) -> Any:
        return types.ElicitResult(action="decline")

    refused_tasks = TasksExtension()
    async with connect(
        live.mcp_url, admin, "auto", extensions=[refused_tasks], elicitation_callback=refusing
    ) as client:
        declined = await client.call_tool("toolbox.confirmed_task", {"label": "no"})
    assert declined.is_error and declined.structured_content["error"]["code"] == "confirmation_declined"
    assert not refused_tasks.created


async def test_a_required_task_writes_in_the_worker_and_is_counted_once(
    live: LiveServer, admin: str, task_data: Path
) -> None:
    tasks = TasksExtension()
    async with connect(live.mcp_url, admin, "auto", extensions=[tasks]) as client:
        result = await client.call_tool("toolbox.author_task", {"name": "Written By A Task"})
    assert result.structured_content["name"] == "Written By A Task"
    task_id = tasks.created[0].task_id
    code = (
        "from project.library.models import Author; from mcp_expose.models import ToolCall, ToolTask;"
        "print(Author.objects.filter(name='Written By A Task').count(),"
        " ToolCall.objects.filter(tool_name='toolbox.author_task', outcome='ok').count(),"
        f" ToolTask.objects.get(id={task_id!r}).status)"
    )
    assert run_snippet(task_data, code, env=TASK_ENV).stdout.split()[-3:] == ["1", "1", "completed"]


async def test_the_tasks_methods_need_the_extension_and_name_their_task(live: LiveServer, admin: str) -> None:
    tasks = TasksExtension(follow=False)
    async with connect(live.mcp_url, admin, "auto", extensions=[tasks]) as client:
        await client.call_tool("toolbox.slow_task", {"seconds": 30})
        task_id = tasks.created[0].task_id
    auth = {"Authorization": f"Bearer {admin}"}
    async with httpx2.AsyncClient(headers=auth) as http:
        # Without the extension in the request's client capabilities: -32021, naming it.
        plain = await http.post(
            live.mcp_url,
            content=jsonrpc_body("tasks/get", {"taskId": task_id}),
            headers=modern_headers("tasks/get", name=task_id),
        )
        assert plain.status_code == 400
        assert plain.json()["error"]["code"] == -32021
        declared = json.loads(jsonrpc_body("tasks/get", {"taskId": task_id}))
        declared["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = {
            "extensions": {"io.modelcontextprotocol/tasks": {}}
        }
        for name, code in ((task_id, None), ("another-task", -32020), (None, -32020)):
            answer = await http.post(
                live.mcp_url, content=json.dumps(declared), headers=modern_headers("tasks/get", name=name)
            )
            body = answer.json() if "json" in answer.headers["content-type"] else _sse_json(answer.text)
            if code is None:
                assert body["result"]["taskId"] == task_id and body["result"]["resultType"] == "complete"
            else:
                assert (answer.status_code, body["error"]["code"]) == (400, code)
        # Methods of the extension's first version are gone.
        for gone in ("tasks/list", "tasks/result"):
            declared["method"] = gone
            answer = await http.post(
                live.mcp_url, content=json.dumps(declared), headers=modern_headers(gone, name=task_id)
            )
            assert answer.status_code == 404
    async with connect(live.mcp_url, admin, "auto", extensions=[TasksExtension()]) as client:
        await cancel_task(client.session, task_id)


def _sse_json(text: str) -> dict[str, Any]:
    data = [line[len("data: ") :] for line in text.splitlines() if line.startswith("data: ")]
    return json.loads(data[-1])


async def test_a_task_outlives_the_server_that_made_it(task_data: Path, admin: str, worker: Any) -> None:
    tasks = TasksExtension(follow=False)
    first = start_server(task_data, **TASK_ENV)
    try:
        async with connect(first.mcp_url, admin, "auto", extensions=[tasks]) as client:
            await client.call_tool("toolbox.slow_task", {"seconds": 0.5})
    finally:
        stop_server(first)
    task_id = tasks.created[0].task_id
    with run_server(task_data, **TASK_ENV) as second:
        async with connect(second.mcp_url, admin, "auto", extensions=[TasksExtension()]) as client:
            done = await wait_for(client.session, task_id)
    assert done["status"] == "completed"
    assert done["result"]["structuredContent"] == {"slept": 0.5, "user": "admin", "in_task": True}


async def test_a_task_whose_worker_dies_fails_with_an_internal_error(tmp_path: Path) -> None:
    """The only worker of its own database, killed without a chance to clean up: the lease runs out."""
    task_data = tmp_path
    admin = prepare_demo(task_data)
    tasks = TasksExtension(follow=False)
    with run_server(task_data, **TASK_ENV) as server, run_worker(task_data, **TASK_ENV) as doomed:
        async with connect(server.mcp_url, admin, "auto", extensions=[tasks]) as client:
            await client.call_tool("toolbox.stuck_task", {})
            task_id = tasks.created[0].task_id
            # Running: the worker beats (its heartbeat is what keeps the task alive).
            running = await wait_for(client.session, task_id, ("working",))
            assert running["status"] == "working"
            await _wait_until_started(task_data, task_id)
            doomed.send_signal(signal.SIGKILL)
            doomed.wait()
            failed = await wait_for(client.session, task_id)
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == -32603 and "worker" in failed["error"]["message"]
    assert "result" not in failed


async def _wait_until_started(task_data: Path, task_id: str) -> None:
    """Until a worker has taken the run (the row says so)."""
    import anyio

    code = f"from mcp_expose.models import ToolTask; print(ToolTask.objects.get(id={task_id!r}).run)"
    with anyio.fail_after(120):
        while run_snippet(task_data, code, env=TASK_ENV).stdout.split()[-1] != "running":
            await anyio.sleep(0.1)


celery_installed = importlib.util.find_spec("django_tasks_celery") is not None


@pytest.mark.skipif(not celery_installed, reason="django-tasks-celery needs Django 6.0+ (the Django 6 leg runs this)")
async def test_tasks_run_on_celery_workers_with_redis_as_the_broker(tmp_path: Path) -> None:
    """The same flow on Celery: the server queues on Redis, a Celery worker in its own process runs the task."""
    admin = prepare_demo(tmp_path)
    celery_env = {**TASK_ENV, "DEMO_TASKS": "celery", "DEMO_CELERY_BROKER": "redis://127.0.0.1:6379/12"}
    log = tmp_path / "celery.log"
    with open(log, "wb") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "project", "worker", "--pool", "threads", "--concurrency", "4"],
            env=demo_env(tmp_path, **celery_env),
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        with run_server(tmp_path, **celery_env) as server:
            tasks = TasksExtension()
            async with connect(
                server.mcp_url, admin, "auto", extensions=[tasks], elicitation_callback=never_asked
            ) as c:
                done = await c.call_tool("toolbox.slow_task", {"seconds": 0.2})
                tasks.answer = _answer_ada
                greeted = await c.call_tool("toolbox.asking_task", {})
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    assert done.structured_content == {"slept": 0.2, "user": "admin", "in_task": True}, log.read_text()
    assert greeted.structured_content == {"hello": "Ada"}
    assert len(tasks.created) == 2


async def _answer_ada(requests: dict[str, Any]) -> dict[str, Any]:
    return {key: {"action": "accept", "content": {"name": "Ada"}} for key in requests}
