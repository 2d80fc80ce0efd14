"""One way into a thread: `core/db.in_worker_thread`, with its three kinds of hop, and nothing else in the package."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import anyio
import pytest
from asgiref.sync import async_to_sync

import mcp_expose
from mcp_expose.core.db import hops_on_callers_thread, in_worker_thread

PACKAGE = Path(mcp_expose.__file__).parent
HOP_MODULE = PACKAGE / "core" / "db.py"


def other_hops(source: str) -> list[str]:
    """Each `sync_to_async` and `to_thread` that `source` names, with its line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name) and node.id == "sync_to_async":
            found.append(f"line {node.lineno}: sync_to_async")
        elif isinstance(node, ast.Attribute) and node.attr in ("sync_to_async", "to_thread"):
            found.append(f"line {node.lineno}: {node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module in ("asgiref.sync", "anyio.to_thread"):
            found += [
                f"line {node.lineno}: import {alias.name}" for alias in node.names if alias.name != "async_to_sync"
            ]
    return found


def test_the_package_leaves_the_event_loop_only_through_in_worker_thread() -> None:
    elsewhere = {
        str(path.relative_to(PACKAGE)): hops
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != HOP_MODULE and (hops := other_hops(path.read_text()))
    }
    assert elsewhere == {}, f"thread hops made around core/db.in_worker_thread: {elsewhere}"


def test_the_reading_finds_each_way_around_it() -> None:
    source = """
import anyio
from asgiref.sync import async_to_sync, sync_to_async
import asgiref.sync
hop = sync_to_async(len, thread_sensitive=False)
also = asgiref.sync.sync_to_async(len)
async def f():
    await anyio.to_thread.run_sync(len, "x")
"""
    assert other_hops(source) == [
        "line 3: import sync_to_async",
        "line 5: sync_to_async",
        "line 6: sync_to_async",
        "line 8: to_thread",
    ]


@pytest.mark.anyio
async def test_an_abandonable_hop_lets_a_cancelled_caller_go_while_its_thread_finishes_alone() -> None:
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def blocks() -> None:
        started.set()
        release.wait(30)
        finished.set()

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:

            async def cancel_once_started() -> None:
                await anyio.to_thread.run_sync(started.wait, 30)
                scope.cancel()

            group.start_soon(cancel_once_started)
            await in_worker_thread(blocks, abandon_on_cancel=True)()
    assert scope.cancelled_caught and not finished.is_set()  # the caller left while the thread still ran
    release.set()
    await anyio.to_thread.run_sync(finished.wait, 30)
    assert finished.is_set()


@pytest.mark.anyio
async def test_a_default_hop_runs_apart_and_a_shared_thread_hop_runs_on_one_thread() -> None:
    here = threading.get_ident()
    apart = in_worker_thread(threading.get_ident)
    shared = in_worker_thread(threading.get_ident, shared_thread=True)
    assert await apart() != here
    first, second = await shared(), await shared()
    assert first == second != here


def test_a_default_hop_runs_on_the_callers_thread_when_a_test_asks() -> None:
    """What `mcp_expose.testing` relies on: inside `hops_on_callers_thread`, under `async_to_sync`, a hop runs on
    the thread that called, with its database connection and transaction."""
    hop = in_worker_thread(threading.get_ident)

    async def both() -> tuple[int, int]:
        with hops_on_callers_thread():
            inside = await hop()
        return inside, await hop()

    inside, outside = async_to_sync(both)()
    assert inside == threading.get_ident() != outside
