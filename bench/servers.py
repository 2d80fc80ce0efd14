"""Start and stop the servers under test: uvicorn, one process, pinned to one core, on 127.0.0.1.

Both servers run exactly the same way (`taskset -c 0 python -m uvicorn APP --workers 1
--no-access-log --log-level warning`, uvloop + httptools when installed), so the only
difference measured is the application. Each process gets its own session (Ctrl-C in the
terminal reaches only run.py, which then stops them) and is stopped on every way out.
"""

from __future__ import annotations

import http.client
import importlib.util
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER_CPU = "0"
LOAD_CPU = "1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def uvicorn_options(lifespan: str = "on") -> list[str]:
    """uvloop and httptools if this interpreter has them (the fastest uvicorn stack), else uvicorn's defaults."""
    options = ["--workers", "1", "--no-access-log", "--log-level", "warning", "--lifespan", lifespan]
    if importlib.util.find_spec("uvloop"):
        options += ["--loop", "uvloop"]
    if importlib.util.find_spec("httptools"):
        options += ["--http", "httptools"]
    return options


@dataclass
class Server:
    """One uvicorn process serving `app` with `env` added to ours."""

    label: str
    app: str
    env: dict[str, str]
    log_dir: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    # A peer runs from its own virtualenv and directory, and may serve MCP at another path.
    python: str = sys.executable
    cwd: Path = ROOT
    mcp_path: str = "/mcp"
    lifespan: str = "on"  # "auto" for a plain Django ASGI app, which refuses lifespan events
    # The core it runs on: the server core, or (an upstream of ours in the gateway workloads) the load core, so
    # that our server's core and its CPU time are its own.
    cpu: str = SERVER_CPU

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.mcp_path}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"{self.label}-{self.port}.log"

    def start(self, timeout: float = 60.0) -> None:
        env = {**os.environ, **self.env}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.cwd), env.get("PYTHONPATH")]))
        command = [
            "taskset",
            "-c",
            self.cpu,
            self.python,
            "-m",
            "uvicorn",
            self.app,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            *uvicorn_options(self.lifespan),
        ]
        with open(self.log_path, "wb") as log:
            # taskset execs the interpreter, so this pid is the server's own.
            self.process = subprocess.Popen(
                command, cwd=self.cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self._wait_until_listening(timeout)

    def _wait_until_listening(self, timeout: float) -> None:
        """uvicorn binds only after the lifespan startup, so an HTTP answer of any status means ready."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.label} exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                connection.request("GET", self.mcp_path)
                connection.getresponse().read()
                connection.close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{self.label} did not start within {timeout:.0f}s:\n{self.log_tail()}")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
