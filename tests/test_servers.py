"""Every server the docs name serves the demo to the official SDK client, in both eras: hypercorn, granian and
daphne with the ASGI entry (uvicorn is every other live test's server), gunicorn's `gthread` workers with the WSGI
entry (its sync workers are tests/test_wsgi.py's). Real server processes on 127.0.0.1: the servers are the
subject. One process per server for the module; each test lists, calls a function tool and a DRF view, and,
where the entry keeps streams, holds a listen stream open until it is acknowledged."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest

from .live import HANG_GUARD_SECONDS, LiveServer, launch, stop_server
from .mcp_client import MODES, connect
from .test_wsgi import gunicorn_command

pytestmark = [pytest.mark.anyio, pytest.mark.live]

ASGI_APP = "project.asgi:application"

# How each server is started on a port: the arguments after `python`.
SERVERS: dict[str, Callable[[int], list[str]]] = {
    "hypercorn": lambda port: [
        *("-m", "hypercorn", ASGI_APP, "--bind", f"127.0.0.1:{port}", "--log-level", "warning"),
        # hypercorn waits this long for open responses when told to stop (its default is longer).
        *("--graceful-timeout", "5"),
    ],
    "granian": lambda port: [
        *("-m", "granian", "--interface", "asgi", "--host", "127.0.0.1", "--port", str(port)),
        *("--workers", "1", "--log-level", "warning", "--no-ws", ASGI_APP),
    ],
    # daphne sends no lifespan events: the SDK's manager starts on the first request.
    "daphne": lambda port: ["-m", "daphne", "--bind", "127.0.0.1", "--port", str(port), ASGI_APP],
    "gunicorn-gthread": lambda port: gunicorn_command(port, worker_class="gthread", workers=2, threads=4),
}
STREAMS = {"hypercorn", "granian", "daphne"}


@pytest.fixture(scope="module")
def key(data: Path) -> str:
    """The demo admin's API key, in the module's demo database (tests/conftest.py's `data`)."""
    return (data / "demo-api-key.txt").read_text().strip()


@pytest.fixture(scope="module", params=list(SERVERS))
def server(request: pytest.FixtureRequest, data: Path) -> Iterator[tuple[str, LiveServer]]:
    name = request.param
    server = launch(data, SERVERS[name], {})
    try:
        yield name, server
        assert "Traceback" not in server.log(), server.log()
    finally:
        stop_server(server)


@pytest.mark.parametrize("mode", list(MODES))
async def test_the_sdk_client_lists_and_calls_through_each_named_server(
    server: tuple[str, LiveServer], key: str, mode: str
) -> None:
    name, live = server
    async with connect(live.mcp_url, key, mode) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        echoed = await client.call_tool("library_echo", {"message": f"through {name}"})
        book = await client.call_tool("library_get_book", {"book_id": 1})
        if name in STREAMS and mode == "auto":  # a stream the server must write before the response ends
            with anyio.fail_after(HANG_GUARD_SECONDS):
                async with client.listen(tools_list_changed=True) as subscription:
                    assert subscription.honored.tools_list_changed is True
    assert {"library_echo", "library_get_book", "library_books_list"} <= names
    assert echoed.structured_content == {"caller": "admin", "message": f"through {name}"}
    assert not book.is_error and book.structured_content["title"] == "A Wizard of Earthsea"
