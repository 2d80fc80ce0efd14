"""How many of our modules and functions one warm `tools/call` passes, on each path.

`docs/architecture.md` quotes these figures in its table "What one warm call passes"; this test measures them and
fails when the page and the code differ, so the page cannot drift. The server is the in-process live server; every
thread has a profiler that records our functions (the test client's, under `mcp_expose/testing`, aside) while the
server handles the measured request and whatever that request starts (a context variable set for it is read).
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

import mcp_expose
from mcp_expose.testing.live import LiveMcpServer, project_application

PACKAGE = str(Path(mcp_expose.__file__).parent)
NOT_THE_PATH = f"{PACKAGE}/testing/"
ARCHITECTURE = Path(__file__).parent.parent / "docs" / "architecture.md"
TOOLS = {"a function tool": ("library_echo", {"message": "hi"}), "a DRF view": ("library_books_list", {"page_size": 5})}
PATHS = {"the fast path": True, "the SDK's path": False}
ROW = re.compile(r"^\| (?P<tool>[^|]+?) \| (?P<path>[^|]+?) \| (?P<modules>\d+) \| (?P<functions>\d+) \|$", re.M)
# Comprehensions are functions of their own before Python 3.12, and inlined from it on (PEP 709): not counted.
INLINED = ("<listcomp>", "<dictcomp>", "<setcomp>")
# True while the server handles the measured request, in it and in everything it starts (tasks, thread hops).
MEASURED: ContextVar[bool] = ContextVar("tests.measured_request", default=False)


class PathTrace:
    """Our functions called on the way of the requests that arrive while `recording` is on, in any thread."""

    def __init__(self) -> None:
        self.recording = False
        self.calls: set[tuple[str, str]] = set()

    def profile(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call" and MEASURED.get():
            filename = frame.f_code.co_filename
            name = frame.f_code.co_qualname
            if filename.startswith(PACKAGE) and not filename.startswith(NOT_THE_PATH) and not name.endswith(INLINED):
                self.calls.add((filename[len(PACKAGE) + 1 :], name))

    def serving(self, application: Any) -> Any:
        async def measured(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http" and self.recording:
                MEASURED.set(True)
            await application(scope, receive, send)

        return measured

    def figures(self) -> tuple[int, int]:
        return len({filename for filename, _ in self.calls}), len(self.calls)


@contextmanager
def profiled(trace: PathTrace) -> Iterator[None]:
    """The profiler on in this thread and every thread started inside (the server's, the worker threads')."""
    sys.setprofile(trace.profile)
    threading.setprofile(trace.profile)
    try:
        yield
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
        sys.setprofile(None)


def documented() -> dict[tuple[str, str], tuple[int, int]]:
    return {
        (row["tool"], row["path"]): (int(row["modules"]), int(row["functions"]))
        for row in ROW.finditer(ARCHITECTURE.read_text())
    }


def test_the_page_quotes_a_figure_for_each_tool_and_path() -> None:
    assert set(documented()) == {(tool, path) for tool in TOOLS for path in PATHS}


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("tool", TOOLS)
async def test_a_warm_call_passes_the_modules_and_functions_the_architecture_page_says(
    settings: Any, tool: str, path: str
) -> None:
    """The default deployment's settings, with the fast path on or off. Each figure is the least of three warm
    calls: a call may also do periodic work (a stamp read due, a cache entry renewed), which is not its path."""
    settings.MCP_EXPOSE = {**settings.MCP_EXPOSE, "FAST_PATH": PATHS[path], "WIRE_NAMES": "portable"}
    name, arguments = TOOLS[tool]
    reader = await sync_to_async(User.objects.create_user)("reader")
    trace = PathTrace()
    measured = []
    with profiled(trace), LiveMcpServer(trace.serving(project_application())) as live:
        async with live.connect(reader, ["library:read"]) as client:
            await client.list_tools()
            for _ in range(3):  # warm: the credential, the catalog, the caller's schema, the connections
                assert not (await client.call_tool(name, arguments)).is_error
            for _ in range(3):
                trace.calls = set()
                trace.recording = True
                result = await client.call_tool(name, arguments)
                trace.recording = False
                assert not result.is_error
                measured.append(trace.figures())
    modules = min(figures[0] for figures in measured)
    functions = min(figures[1] for figures in measured)
    assert (modules, functions) == documented()[(tool, path)], (
        f"A warm call of {tool} on {path} passes {modules} of our modules and {functions} of our functions; "
        f"docs/architecture.md says {documented()[(tool, path)]}. Update the page's table."
    )
