"""How a serving process sees that its server was told to stop. The uvicorn path, end to end, is in
tests/test_processes.py (`test_a_server_told_to_stop_ends_its_listen_streams_and_stops`)."""

from __future__ import annotations

import pytest
from sse_starlette.sse import AppStatus

from mcp_expose.serving.draining import server_stopping


def test_a_stop_is_seen_through_sse_starlettes_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where sse-starlette wrapped uvicorn's exit handler before uvicorn installed it (an app imported before the
    server runs), the wrapper's flag is what a stop sets."""
    monkeypatch.setattr(AppStatus, "should_exit", False)
    assert server_stopping() is False
    monkeypatch.setattr(AppStatus, "should_exit", True)
    assert server_stopping() is True
