"""Upstream servers for the tests, each a real process on 127.0.0.1: the bare SDK server and the hostile one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.live import LiveServer, _launch, free_port, stop_server


@contextmanager
def run_upstream(data_dir: Path, module: str, **env: str) -> Iterator[LiveServer]:
    """`uvicorn tests.upstreams.<module>:app` on a free port, until the block ends."""
    port = free_port()
    command = [
        "-m",
        "uvicorn",
        f"tests.upstreams.{module}:app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    server = _launch(data_dir, port, command, env)
    try:
        yield server
    finally:
        stop_server(server)
