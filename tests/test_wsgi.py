"""The WSGI entry under gunicorn's sync workers: the stateless MCP paths, Django's pages beside them, and what
needs a stream refused naming the ASGI entry. Real gunicorn processes on 127.0.0.1, the official SDK client."""

from __future__ import annotations

import functools
import json
import os
import re
import secrets
import socket
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from .live import (
    HANG_GUARD_SECONDS,
    LIVE_SETTINGS,
    ROOT,
    LiveServer,
    jsonrpc_body,
    launch,
    modern_headers,
    prepare_demo,
    stop_server,
)
from .mcp_client import MODES, connect
from .test_processes import admin_session, disable_in_admin

pytestmark = [pytest.mark.anyio, pytest.mark.live]


def gunicorn_command(
    port: int,
    *,
    app: str = "project.wsgi:application",
    worker_class: str = "sync",
    workers: int = 2,
    threads: int = 1,
    access_log: Path | None = None,
) -> list[str]:
    """The arguments after `python` that run gunicorn serving `app` on `port`."""
    arguments = [
        *("-m", "gunicorn", app, "--bind", f"127.0.0.1:{port}", "--worker-class", worker_class),
        *("--workers", str(workers), "--threads", str(threads), "--timeout", "120", "--no-control-socket"),
        *("--log-level", "warning"),
    ]
    if access_log is not None:  # one line per request, with the pid of the worker that answered it
        arguments += ["--access-logfile", str(access_log), "--access-logformat", "%(p)s %(r)s %(s)s"]
    return arguments


def start_gunicorn(
    data_dir: Path,
    *,
    app: str = "project.wsgi:application",
    workers: int = 2,
    access_log: Path | None = None,
    **env: str,
) -> LiveServer:
    """gunicorn with sync workers serving `app`, answering once Django's home page does; stop it with
    `stop_server` (SIGTERM: each worker finishes its request, runs the lifespan's shutdown, and exits)."""
    command = functools.partial(gunicorn_command, app=app, workers=workers, access_log=access_log)
    return launch(data_dir, command, {**LIVE_SETTINGS, **env})


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("wsgi")
    prepare_demo(data_dir, **LIVE_SETTINGS)
    return data_dir


@pytest.fixture(scope="module")
def server(data: Path) -> Iterator[LiveServer]:
    server = start_gunicorn(data)
    try:
        yield server
        assert "Traceback" not in server.log(), server.log()
    finally:
        stop_server(server)


@pytest.mark.parametrize("mode", list(MODES))
async def test_the_sdk_client_lists_calls_reads_and_gets_prompts_in_both_eras(
    server: LiveServer, key: str, mode: str
) -> None:
    async with connect(server.mcp_url, key, mode) as client:
        assert "library.echo" in [tool.name for tool in (await client.list_tools()).tools]
        echoed = await client.call_tool("library.echo", {"message": f"over wsgi, {mode}"})
        assert echoed.structured_content == {"caller": "admin", "message": f"over wsgi, {mode}"}
        card = await client.call_tool("library.book_card", {"book_id": 1})
        assert not card.is_error and [item.type for item in card.content] == ["text", "image", "resource_link"]
        templates = [template.uri_template for template in (await client.list_resource_templates()).resource_templates]
        assert "library://books/{id}" in templates
        record = json.loads((await client.read_resource("library://books/1")).contents[0].text)
        assert record["id"] == 1
        assert "library.recommend" in [prompt.name for prompt in (await client.list_prompts()).prompts]
        prompt = await client.get_prompt("library.recommend", {"genre": "fantasy"})
        assert "fantasy" in prompt.messages[0].content.text


async def test_an_oauth_token_from_the_wsgi_served_token_endpoint_calls_a_tool(server: LiveServer, data: Path) -> None:
    client_id, secret = (data / "demo-oauth-client.txt").read_text().split()
    token = httpx2.post(
        server.base_url + "/o/token/",
        data={"grant_type": "client_credentials", "scope": "mcp", "resource": server.mcp_url},
        auth=(client_id, secret),
    )
    assert token.status_code == 200, token.text
    async with connect(server.mcp_url, token.json()["access_token"], "auto") as client:
        result = await client.call_tool("library.echo", {"message": "with a token"})
    assert result.structured_content["message"] == "with a token"


def test_the_401_challenge_points_at_metadata_served_beside_django_oauth_metadata(server: LiveServer) -> None:
    refused = httpx2.post(server.mcp_url, content=jsonrpc_body("tools/list"), headers=modern_headers("tools/list"))
    assert refused.status_code == 401
    challenge = refused.headers["www-authenticate"]
    metadata_url = re.search(r'resource_metadata="([^"]+)"', challenge).group(1)
    metadata = httpx2.get(metadata_url)
    assert metadata.status_code == 200 and metadata.json()["resource"] == server.mcp_url
    issuer = metadata.json()["authorization_servers"][0]
    assert issuer == server.base_url + "/o"
    # RFC 8414: the issuer's path after the well-known prefix.
    authorization_server = httpx2.get(server.base_url + "/.well-known/oauth-authorization-server/o")
    assert authorization_server.status_code == 200 and authorization_server.json()["issuer"] == issuer
    assert httpx2.get(server.mcp_url + "/health").status_code == 200


def test_django_pages_are_served_by_the_same_application(server: LiveServer) -> None:
    login = httpx2.get(server.base_url + "/admin/login/")
    assert login.status_code == 200 and 'name="csrfmiddlewaretoken"' in login.text
    with admin_session(server.base_url) as browser:  # the admin's login form, its session cookie
        connect_page = browser.get("/mcp/connect/")
    assert connect_page.status_code == 200 and server.mcp_url in connect_page.text


def test_what_needs_a_stream_is_refused_naming_the_asgi_entry(server: LiveServer, key: str) -> None:
    standing = httpx2.get(server.mcp_url, headers={"Accept": "text/event-stream", "Authorization": f"Bearer {key}"})
    assert standing.status_code == 405 and standing.headers["allow"] == "POST"
    assert "mcp_expose.asgi.get_asgi_application()" in standing.json()["error_description"]
    listen = httpx2.post(
        server.mcp_url,
        content=jsonrpc_body("subscriptions/listen", {"notifications": {"toolsListChanged": True}}),
        headers=modern_headers("subscriptions/listen", key),
    )
    error = listen.json()["error"]
    assert listen.headers["content-type"].startswith("application/json")
    assert error["code"] == -32601 and "mcp_expose.asgi.get_asgi_application()" in error["message"]


async def test_a_question_in_the_middle_of_a_2025_11_25_call_is_a_tool_error(server: LiveServer, key: str) -> None:
    with anyio.fail_after(60):  # a guard against a hang only: the answer comes at once
        async with connect(server.mcp_url, key, "legacy") as client:
            result = await client.call_tool("toolbox.greet", {})
    assert result.is_error and result.structured_content["error"]["code"] == "client_input_unavailable"
    assert "mcp_expose.asgi" in result.content[0].text


def test_a_body_over_the_limit_is_refused_unread(server: LiveServer, key: str) -> None:
    """A gigabyte announced and never sent: 413 at once, from headers alone."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(
            (
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Authorization: Bearer {key}\r\nContent-Length: 1000000000\r\n\r\n{{"
            ).encode()
        )
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413 ") and b"request_too_large" in answer


@pytest.fixture(scope="module")
def batching(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, Path]]:
    """A server of its own whose usage rows wait for the shutdown (one batch an hour), and whose answers may
    take two seconds (then 504): settings and a WSGI module written for it, beside the test settings."""
    modules = tmp_path_factory.mktemp("wsgi-modules")
    (modules / "wsgi_batching_settings.py").write_text(
        "from tests.settings_live import *  # noqa: F403\nfrom tests.settings_live import MCP_EXPOSE\n"
        "MCP_EXPOSE = {**MCP_EXPOSE, 'USAGE_BATCH_SECONDS': 3600}\n"
    )
    (modules / "wsgi_short.py").write_text(
        "from mcp_expose.wsgi import get_wsgi_application\napplication = get_wsgi_application(timeout=2.0)\n"
    )
    env = {"DJANGO_SETTINGS_MODULE": "wsgi_batching_settings", "PYTHONPATH": f"{ROOT}:{modules}"}
    server = start_gunicorn(data, app="wsgi_short:application", workers=1, **env)
    try:
        yield server, data / "demo.sqlite3"
    finally:
        stop_server(server)


async def test_a_slow_answer_is_cancelled_and_answered_504(batching: tuple[LiveServer, Path], key: str) -> None:
    server, _ = batching
    started = time.monotonic()
    async with httpx2.AsyncClient(timeout=60) as http:
        slow = await http.post(
            server.mcp_url,
            content=jsonrpc_body("tools/call", {"name": "toolbox.slow_task", "arguments": {"seconds": 30}}),
            headers=modern_headers("tools/call", key, name="toolbox.slow_task"),
        )
        assert slow.status_code == 504 and time.monotonic() - started < 20
        assert "did not answer within 2 s" in slow.json()["error"]["message"]
        # The worker's loop is free again: the next request on the same (only) worker is answered.
        quick = await http.post(
            server.mcp_url,
            content=jsonrpc_body("tools/call", {"name": "library.echo", "arguments": {"message": "after"}}),
            headers=modern_headers("tools/call", key, name="library.echo"),
        )
    assert quick.status_code == 200 and quick.json()["result"]["structuredContent"]["message"] == "after"


async def test_the_last_usage_rows_are_written_when_the_worker_stops(
    batching: tuple[LiveServer, Path], key: str
) -> None:
    server, database = batching
    conversation = f"wsgi-{secrets.token_hex(3)}"
    async with connect(server.mcp_url, key, "auto", headers={"X-Conversation-Id": conversation}) as client:
        for index in range(3):
            await client.call_tool("library.echo", {"message": f"row {index}"})

    def rows() -> list[tuple[str, str]]:
        with closing(sqlite3.connect(database)) as connection:
            query = "SELECT tool_name, outcome FROM mcp_expose_toolcall WHERE conversation_id = ?"
            return connection.execute(query, (conversation,)).fetchall()

    assert rows() == []  # queued for the hourly batch
    stop_server(server)  # SIGTERM: the worker's exit runs the lifespan's shutdown
    assert rows() == [("library.echo", "ok")] * 3, server.log()


# Two sync workers on PostgreSQL and Redis.


@pytest.fixture(scope="module")
def scale_env() -> Iterator[dict[str, str]]:
    from .test_scale import scale_database

    with scale_database("mcp_wsgi") as environment:
        yield environment


def answered_by_every_worker(server: LiveServer, access_log: Path, workers: int, ask: Callable[[], Any]) -> None:
    """Ask until the access log shows each worker answered at least once since now (gunicorn hands each
    connection to whichever worker accepts it first): `ask` checks every answer itself."""
    start = len(access_log.read_text()) if access_log.exists() else 0
    deadline = time.monotonic() + HANG_GUARD_SECONDS
    while True:
        ask()
        pids = set(re.findall(r"^(<\d+>) POST /mcp ", access_log.read_text()[start:], re.MULTILINE))
        if len(pids) >= workers:
            return
        assert time.monotonic() < deadline, f"only {pids} answered:\n{server.log()}"


@pytest.mark.scale
def test_two_workers_on_postgres_and_redis_both_stop_serving_a_tool_switched_off(
    tmp_path: Path, scale_env: dict[str, str]
) -> None:
    key = prepare_demo(tmp_path, **scale_env)
    access_log = tmp_path / "access.log"
    server = start_gunicorn(tmp_path, workers=2, access_log=access_log, **scale_env)
    try:

        def listed() -> list[str]:
            answer = httpx2.post(
                server.mcp_url, content=jsonrpc_body("tools/list"), headers=modern_headers("tools/list", key)
            )
            assert answer.status_code == 200, answer.text
            return [tool["name"] for tool in answer.json()["result"]["tools"]]

        def served() -> None:
            assert "library.popular_authors" in listed()

        def hidden() -> None:
            names = listed()
            assert "library.popular_authors" not in names and "library.echo" in names

        answered_by_every_worker(server, access_log, 2, served)  # each worker compiled the catalog
        disable_in_admin(server.base_url, "library.popular_authors")  # the admin, served by one of them
        answered_by_every_worker(server, access_log, 2, hidden)
        assert "Traceback" not in server.log(), server.log()
    finally:
        stop_server(server)


def test_the_demo_wsgi_module_is_importable_without_starting_anything(tmp_path: Path) -> None:
    """Importing the module starts no thread and no loop: a pre-forking server imports it before it forks."""
    import subprocess

    code = (
        "import threading, project.wsgi as w;"
        "print(type(w.application).__name__, sorted(t.name for t in threading.enumerate()))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, **LIVE_SETTINGS, "DEMO_DATA_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_SECONDS,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "McpExposeWSGI ['MainThread']"
