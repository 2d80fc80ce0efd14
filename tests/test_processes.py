"""An admin change made through one server process is served by another on its next request."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2
import pytest

from .live import SHUTDOWN_GUARD_SECONDS, prepare_demo, run_server, start_server
from .mcp_client import MODES, connect

pytestmark = [pytest.mark.anyio, pytest.mark.live]


@contextmanager
def admin_session(base_url: str) -> Iterator[httpx2.Client]:
    """Log in to the admin like a browser: cookie jar, CSRF token from the form."""
    with httpx2.Client(base_url=base_url, follow_redirects=False) as client:
        yield _logged_in(client, base_url)


def _logged_in(client: httpx2.Client, base_url: str) -> httpx2.Client:
    login = client.get("/admin/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
    response = client.post(
        "/admin/login/?next=/admin/",
        data={"username": "admin", "password": "admin", "csrfmiddlewaretoken": token, "next": "/admin/"},
        headers={"Referer": base_url + "/admin/login/"},
    )
    assert response.status_code == 302, response.text
    return client


def row_id(client: httpx2.Client, key: str) -> str:
    page = client.get("/admin/mcp_expose/exposedtool/", params={"q": key})
    return re.search(r'name="_selected_action" value="(\d+)"', page.text).group(1)


@pytest.mark.parametrize("mode", list(MODES))
async def test_disabling_in_the_admin_of_one_process_hides_the_tool_in_another(tmp_path: Path, mode: str) -> None:
    key = prepare_demo(tmp_path)
    with run_server(tmp_path) as first, run_server(tmp_path) as second:
        async with connect(second.mcp_url, key, mode) as client:
            assert "library_popular_authors" in [tool.name for tool in (await client.list_tools()).tools]

        with admin_session(first.base_url) as admin:
            pk = row_id(admin, "library.popular_authors")
            changelist = "/admin/mcp_expose/exposedtool/"
            action = {"action": "disable_selected", "_selected_action": pk, "index": "0"}
            # Without the CSRF token the admin refuses and nothing changes.
            assert (
                admin.post(changelist, data=action, headers={"Referer": first.base_url + changelist}).status_code == 403
            )
            async with connect(second.mcp_url, key, mode) as client:
                assert "library_popular_authors" in [tool.name for tool in (await client.list_tools()).tools]

            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', admin.get(changelist).text).group(1)
            done = admin.post(
                changelist,
                data={**action, "csrfmiddlewaretoken": token},
                headers={"Referer": first.base_url + changelist},
            )
            assert done.status_code == 302

        async with connect(second.mcp_url, key, mode) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            assert "library_popular_authors" not in names and "library_search_books" in names
            with pytest.raises(Exception, match="Unknown tool: library_popular_authors"):
                await client.call_tool("library_popular_authors", {})


@pytest.mark.parametrize("mode", list(MODES))
async def test_servers_without_lifespan_events_start_the_sdk_on_first_use(tmp_path: Path, mode: str) -> None:
    """daphne and runserver send no lifespan events; uvicorn --lifespan off behaves the same way."""
    key = prepare_demo(tmp_path)
    with run_server(tmp_path, lifespan="off") as server:
        async with connect(server.mcp_url, key, mode) as client:
            result = await client.call_tool("library_echo", {"message": "first use"})
        assert result.structured_content == {"caller": "admin", "message": "first use"}
        assert "Task group is not initialized" not in server.log()


def disable_in_admin(base_url: str, key: str) -> None:
    with admin_session(base_url) as admin:
        changelist = "/admin/mcp_expose/exposedtool/"
        pk = row_id(admin, key)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', admin.get(changelist).text).group(1)
        done = admin.post(
            changelist,
            data={"action": "disable_selected", "_selected_action": pk, "index": "0", "csrfmiddlewaretoken": token},
            headers={"Referer": base_url + changelist},
        )
        assert done.status_code == 302


async def test_list_changed_reaches_an_open_listen_stream(tmp_path: Path) -> None:
    import anyio

    key = prepare_demo(tmp_path)
    with run_server(tmp_path) as server:
        async with connect(server.mcp_url, key, "auto") as client:
            async with client.listen(tools_list_changed=True, prompts_list_changed=True) as subscription:
                assert subscription.honored.tools_list_changed is True
                await anyio.to_thread.run_sync(disable_in_admin, server.base_url, "library.popular_authors")
                events = []
                with anyio.fail_after(10):
                    async for event in subscription:
                        events.append(type(event).__name__)
                        if len(events) == 2:
                            break
            names = [tool.name for tool in (await client.list_tools()).tools]
    assert events == ["ToolsListChanged", "PromptsListChanged"]
    assert "library_popular_authors" not in names


async def test_a_server_told_to_stop_ends_its_listen_streams_and_stops(tmp_path: Path) -> None:
    """uvicorn waits for every open response before it stops; a listen stream, which lasts until its client
    leaves, used to keep the process up until it was killed. Now it ends with its result (a graceful close; an
    abrupt one raises `SubscriptionLost`), and the process runs its shutdown and exits."""
    import anyio

    key = prepare_demo(tmp_path)
    server = start_server(tmp_path, log_level="info", MCP_EXPOSE_LOG_LEVEL="INFO")
    try:
        async with connect(server.mcp_url, key, "auto") as client:
            async with client.listen(tools_list_changed=True) as subscription:
                server.process.terminate()
                with anyio.fail_after(SHUTDOWN_GUARD_SECONDS):
                    events = [type(event).__name__ async for event in subscription]
        exited = await anyio.to_thread.run_sync(lambda: server.process.wait(SHUTDOWN_GUARD_SECONDS))
    finally:
        if server.process.poll() is None:
            server.process.kill()
    assert events == []
    assert exited == -signal.SIGTERM  # uvicorn's own exit: it raises the signal again once it has stopped
    log = server.log()
    assert "The server is stopping: ended 1 listen stream(s)" in log
    assert "Application shutdown complete." in log


async def test_a_server_stopped_while_the_database_is_locked_loses_no_usage_row(tmp_path: Path) -> None:
    """SIGTERM during an outage: the rows of every answered call go to the spill file, and the next server on
    the same data writes each of them once."""
    import sqlite3

    from .live import HANG_GUARD_SECONDS, LIVE_SETTINGS, stop_server

    key = prepare_demo(tmp_path)
    spill = tmp_path / "usage-spill"
    env = {**LIVE_SETTINGS, "MCP_TEST_SQLITE_TIMEOUT": "0.2", "MCP_TEST_USAGE_SPILL_DIR": str(spill)}
    database = sqlite3.connect(tmp_path / "demo.sqlite3", isolation_level=None)

    def echo_rows() -> list[str]:
        return [
            row
            for (row,) in database.execute("SELECT row_id FROM mcp_expose_toolcall WHERE tool_name = 'library.echo'")
        ]

    def wait_for(condition: Callable[[], object], what: str) -> None:
        deadline = time.monotonic() + HANG_GUARD_SECONDS
        while not condition():
            assert time.monotonic() < deadline, f"still waiting for {what}"
            time.sleep(0.05)

    with run_server(tmp_path, **env) as first:
        async with connect(first.mcp_url, key, "auto") as client:
            await client.call_tool("library.echo", {"message": "before"})  # the key's last use is written now
            wait_for(lambda: len(echo_rows()) == 1, "the first row")
            database.execute("BEGIN IMMEDIATE")  # the write lock, held until the first server is gone
            for index in range(5):
                answered = await client.call_tool("library.echo", {"message": f"locked-{index}"})
                assert answered.structured_content == {"caller": "admin", "message": f"locked-{index}"}
        wait_for(lambda: "Usage rows cannot be written: the database is unavailable" in first.log(), "the outage")
        stop_server(first)  # SIGTERM, with the lock still held
        assert "5 usage rows are kept in" in first.log()
    database.execute("ROLLBACK")
    assert len(echo_rows()) == 1

    with run_server(tmp_path, **env):
        wait_for(lambda: len(echo_rows()) == 6 and not list(spill.glob("*.jsonl")), "the spilled rows")
    rows = echo_rows()
    assert len(rows) == len(set(rows)) == 6 and None not in rows
    database.close()
