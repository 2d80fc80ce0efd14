"""The live-server harness itself: a server is ready only when our process listens on its port and answers there.

It starts real uvicorn processes because the subject is a process binding a port that another holds: two xdist
workers can be handed the same free port, and the one that binds second must not pass for ready while the other
answers in its place (a test would then talk to another test's server).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import live
from .cimd import serve_documents
from .live import PortTaken, listens, prepare_demo, start_server, stop_server

pytestmark = pytest.mark.live


@pytest.fixture
def impostor() -> Iterator[int]:
    """Another process's server on a port, answering 200 at `/` as another test's server would."""
    with serve_documents({"/": {}}) as port:
        yield port


def test_a_server_whose_port_another_process_holds_is_not_taken_for_ready(tmp_path: Path, impostor: int) -> None:
    prepare_demo(tmp_path)
    assert listens(os.getpid(), impostor)  # the check sees who holds the port: this process
    with pytest.raises(PortTaken, match="address already in use"):
        start_server(tmp_path, port=impostor)  # that port exactly: no other is tried


def test_a_free_port_taken_before_the_bind_is_chosen_again(
    tmp_path: Path, impostor: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    prepare_demo(tmp_path)
    real_free_port = live.free_port
    handed = iter([impostor])  # the first choice is the port another process took meanwhile
    monkeypatch.setattr(live, "free_port", lambda: next(handed, None) or real_free_port())
    server = start_server(tmp_path)
    try:
        assert server.port != impostor and listens(server.process.pid, server.port)
        assert not listens(server.process.pid, impostor)
    finally:
        stop_server(server)
