"""Upstream servers for the tests, each a real process on 127.0.0.1: the bare SDK server and the hostile one."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.live import LiveServer, launch, stop_server


@contextmanager
def run_upstream(
    data_dir: Path,
    module: str,
    *,
    args: Sequence[str] = (),
    bind: str = "127.0.0.1",
    addressing: dict[str, Any] | None = None,
    **env: str,
) -> Iterator[LiveServer]:
    """`uvicorn tests.upstreams.<module>:app` on a free port, until the block ends.

    `args` go to uvicorn after ours (`--ssl-certfile …`); `bind` is the address it listens on; `addressing`, the
    `LiveServer` fields that say how it is reached when not as plain HTTP on 127.0.0.1 (a TLS server, by the name
    its certificate is for: `{"scheme": "https", "host": "localhost", "verify": context}`).

    At the end it stops as uvicorn stops on SIGTERM: it refuses new connections at once, then waits for the open
    ones. A gateway keeps streams open to its upstreams, so that wait is bounded: a second, then the streams are
    cut, as a gone upstream's are (uvicorn alone would wait for them for ever)."""

    def command(port: int) -> list[str]:
        return [
            "-m",
            "uvicorn",
            f"tests.upstreams.{module}:app",
            "--host",
            bind,
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--timeout-graceful-shutdown",
            "1",
            *args,
        ]

    server = launch(data_dir, command, env, **(addressing or {}))
    try:
        yield server
    finally:
        stop_server(server)
