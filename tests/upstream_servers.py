"""Upstream servers for the tests, each a real process on 127.0.0.1: the bare SDK server and the hostile one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.live import LiveServer, launch, stop_server


@contextmanager
def run_upstream(data_dir: Path, module: str, **env: str) -> Iterator[LiveServer]:
    """`uvicorn tests.upstreams.<module>:app` on a free port, until the block ends.

    At the end it stops as uvicorn stops on SIGTERM: it refuses new connections at once, then waits for the open
    ones. A gateway keeps streams open to its upstreams, so that wait is bounded: a second, then the streams are
    cut, as a gone upstream's are (uvicorn alone would wait for them for ever)."""

    def command(port: int) -> list[str]:
        return [
            "-m",
            "uvicorn",
            f"tests.upstreams.{module}:app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--timeout-graceful-shutdown",
            "1",
        ]

    server = launch(data_dir, command, env)
    try:
        yield server
    finally:
        stop_server(server)
