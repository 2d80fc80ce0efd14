"""Real server processes for integration tests: uvicorn serving the demo project on 127.0.0.1."""

from __future__ import annotations

import ast
import atexit
import functools
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2

ROOT = Path(__file__).resolve().parent.parent
# The demo settings plus the test switches and toolbox (see tests/settings_live.py).
LIVE_SETTINGS = {"DJANGO_SETTINGS_MODULE": "tests.settings_live"}
# Every wait below ends on its event (the server answers or exits, the command or the shutdown returns); this only
# stops a hang. Generous, since a loaded machine shared by several runs can be many times slower than an idle one.
HANG_GUARD_SECONDS = 600.0
# A server's stop: under a second when nothing holds it (the lifespan writes its last rows and closes its
# connections), so this is generous even on a loaded machine.
SHUTDOWN_GUARD_SECONDS = 120.0


# What starts a real process in this suite: the helpers here and in tests/upstream_servers.py, tests/services.py and
# the browser tests, and the standard library's own (tests/test_suite_rules.py makes the modules that call them
# say why; tests/conftest.py hands their groups out first).
PROCESS_STARTERS = {
    "run_server",
    "start_server",
    "run_demo",
    "start_demo",
    "run_upstream",
    "run_worker",
    "start_worker",
    "manage",
    "Popen",
    "redis_server",
    "PostgresCluster",
    "runpytest_subprocess",
    "launch",
}


@functools.cache
def process_starters(module: Path) -> frozenset[str]:
    """Which of PROCESS_STARTERS the test module at `module` calls."""
    called = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.Call):
            function = node.func
            name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", None)
            if name in PROCESS_STARTERS:
                called.add(name)
    return frozenset(called)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def demo_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "DEMO_DATA_DIR": str(data_dir), "DJANGO_SETTINGS_MODULE": "project.settings"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["MCP_EXPOSE_LOG_LEVEL"] = "WARNING"
    env.update(extra)
    return env


def manage(
    data_dir: Path, *args: str, input_text: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run manage.py against the data directory, failing loudly with its output."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        env=demo_env(data_dir, **(env or {})),
        cwd=ROOT,
        capture_output=True,
        text=True,
        input=input_text,
        timeout=HANG_GUARD_SECONDS,
    )
    if result.returncode != 0:
        raise AssertionError(f"manage.py {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


class ShellWorker:
    """One `tests.shell_worker` process: `manage.py shell -c` for many snippets, paying Django's start once."""

    def __init__(self, data_dir: Path, env: dict[str, str]) -> None:
        self.lock = threading.Lock()
        self.log_path = data_dir / f"shell-{time.monotonic_ns()}.log"
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.shell_worker"],
                env=demo_env(data_dir, **env),
                cwd=ROOT,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        self._answer()  # its "ready", once Django is set up

    def run(self, code: str) -> str:
        with self.lock:
            assert self.process.stdin is not None
            self.process.stdin.write(json.dumps({"code": code}) + "\n")
            self.process.stdin.flush()
            answer = self._answer()
        if answer["failure"]:
            raise AssertionError(
                f"manage.py shell -c failed:\n{answer['stdout']}\n{answer['stderr']}{answer['failure']}"
            )
        return answer["stdout"]

    def _answer(self) -> dict:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            self.process.wait()
            raise AssertionError(
                f"The shell worker exited with {self.process.returncode}:\n" + self.log_path.read_text(errors="replace")
            )
        return json.loads(line)

    def stop(self) -> None:
        """End its input (its loop ends there), and wait for it with its pipes closed."""
        try:
            self.process.communicate(timeout=HANG_GUARD_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate()


# The workers by data directory and environment; the least recently used stops beyond a few.
_shell_workers: OrderedDict[tuple[str, tuple[tuple[str, str], ...]], ShellWorker] = OrderedDict()
_shell_workers_lock = threading.Lock()
MAX_SHELL_WORKERS = 4


def run_snippet(data_dir: Path, code: str, *, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """What `manage(data_dir, "shell", "-c", code, env=env)` gives, from a long-lived process per data directory
    and environment. For tests that are not about the command or about fresh processes (an outage's, say)."""
    key = (str(data_dir), tuple(sorted((env or {}).items())))
    with _shell_workers_lock:
        worker = _shell_workers.pop(key, None)
        if worker is None or worker.process.poll() is not None:
            worker = ShellWorker(data_dir, env or {})
        _shell_workers[key] = worker
        retired = [_shell_workers.popitem(last=False)[1] for _ in range(len(_shell_workers) - MAX_SHELL_WORKERS)]
    for old in retired:
        old.stop()
    stdout = worker.run(code)
    return subprocess.CompletedProcess(["manage.py", "shell", "-c", code], 0, stdout, "")


@atexit.register
def _stop_shell_workers() -> None:
    with _shell_workers_lock:
        workers = list(_shell_workers.values())
        _shell_workers.clear()
    for worker in workers:
        worker.stop()


# Settings whose demo database is SQLite in the data directory: a copy of a migrated and seeded one is as fresh.
SQLITE_SETTINGS = {"project.settings", "tests.settings_live", "tests.settings_conformance"}
_demo_templates: dict[tuple[tuple[str, str], ...], Path] = {}
_demo_templates_lock = threading.Lock()


def prepare_demo(data_dir: Path, **env: str) -> str:
    """A migrated and seeded demo database in `data_dir`; return the admin's API key.

    On SQLite, `manage.py demo` runs once per environment and session, into a template directory, and each data
    directory gets a copy of its files: the same rows, keys and secrets as a run of its own (and ten times
    cheaper). Elsewhere (PostgreSQL) the command runs against the data directory's database."""
    if env.get("DJANGO_SETTINGS_MODULE", "project.settings") not in SQLITE_SETTINGS:
        manage(data_dir, "demo", "--noinput", "--no-serve", env=env)
    else:
        shutil.copytree(_demo_template(env), data_dir, dirs_exist_ok=True)
    return (data_dir / "demo-api-key.txt").read_text().strip()


def _demo_template(env: dict[str, str]) -> Path:
    key = tuple(sorted(env.items()))
    with _demo_templates_lock:
        if key not in _demo_templates:
            template = Path(tempfile.mkdtemp(prefix="mcp-expose-demo-template-"))
            atexit.register(shutil.rmtree, template, ignore_errors=True)
            manage(template, "demo", "--noinput", "--no-serve", env=env)
            _demo_templates[key] = template
        return _demo_templates[key]


def create_api_key(data_dir: Path, username: str, scopes: str, *, fresh_process: bool = False, **env: str) -> str:
    code = (
        "from django.contrib.auth import get_user_model;"
        "from mcp_expose.models import ApiKey;"
        f"user = get_user_model().objects.get(username={username!r});"
        f"print(ApiKey.create_key(user=user, name='test', scopes={scopes!r})[1])"
    )
    if fresh_process:  # a `manage.py shell` of its own, which ends once the key is made
        return manage(data_dir, "shell", "-c", code, env=env).stdout.strip().splitlines()[-1]
    return run_snippet(data_dir, code, env=env).stdout.strip().splitlines()[-1]


@dataclass
class LiveServer:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path
    # How it is addressed, when not as plain HTTP on 127.0.0.1 (a TLS server by the name its certificate is for),
    # and what verifies its certificate.
    scheme: str = "http"
    host: str = "127.0.0.1"
    verify: ssl.SSLContext | bool = True

    @property
    def base_url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def mcp_url(self) -> str:
        return f"{self.base_url}/mcp"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def listens(pid: int, port: int) -> bool:
    """Whether process `pid`, or a child of it, holds the listening TCP socket on `port` (Linux: the kernel's socket
    tables and the processes' descriptors; granian's worker binds it, not the process started). A free port is only
    free when it is chosen: another worker's server may take it first, and then it, not ours, answers there."""
    if not Path("/proc/net/tcp").exists():  # no kernel tables to read (not Linux): the answer alone must do
        return True
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # LISTEN
                inodes.add(f"socket:[{fields[9]}]")
    for process in (pid, *_children(pid)):
        try:
            descriptors = os.listdir(f"/proc/{process}/fd")
        except OSError:
            continue
        for descriptor in descriptors:
            try:
                if os.readlink(f"/proc/{process}/fd/{descriptor}") in inodes:
                    return True
            except OSError:
                continue
    return False


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from each process's stat line: its fourth field)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


class PortTaken(AssertionError):
    """Our server could not bind its port: another process took it between its choice and the bind."""


def _wait_until_serving(server: LiveServer, timeout: float = HANG_GUARD_SECONDS) -> None:
    """Until our process listens on its port and answers there (never another process that holds the port)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            log = server.log()
            # uvicorn: "[Errno 98] ... address already in use"; gunicorn: "Connection in use".
            taken = "address already in use" in log.lower() or "connection in use" in log.lower()
            failure = PortTaken if taken else AssertionError
            raise failure(f"The server exited with {server.process.returncode}:\n{log}")
        try:
            if listens(server.process.pid, server.port):
                if httpx2.get(server.base_url + "/", timeout=1.0, verify=server.verify).status_code == 200:
                    return
        except httpx2.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"The server did not start within {timeout}s:\n{server.log()}")


def start_server(
    data_dir: Path, *, port: int | None = None, lifespan: str = "on", log_level: str = "warning", **env: str
) -> LiveServer:
    """Start uvicorn serving the demo and wait until it answers; stop it with `stop_server`. At `log_level`
    "info" uvicorn writes its access log (through the demo's LOGGING). `port`: this one (a restart on the same
    address), else a free one."""

    def command(chosen: int) -> list[str]:
        return [
            "-m",
            "uvicorn",
            "project.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(chosen),
            "--lifespan",
            lifespan,
            "--log-level",
            log_level,
        ]

    return launch(data_dir, command, env, port=port)


def start_demo(data_dir: Path, *options: str, **env: str) -> LiveServer:
    """Start `manage.py demo` (which serves in-process with uvicorn) and wait until it answers."""
    return launch(
        data_dir, lambda port: [str(ROOT / "manage.py"), "demo", "--addrport", f"127.0.0.1:{port}", *options], env
    )


# How many free ports a launch tries when another process takes the one chosen before the server binds it.
PORT_ATTEMPTS = 5


def launch(
    data_dir: Path,
    command: Callable[[int], list[str]],
    env: dict[str, str],
    *,
    port: int | None = None,
    **addressing: Any,
) -> LiveServer:
    """Run `python <command(port)>` and wait until it serves on that port: a free port, chosen again when another
    process took it first (two xdist workers may be handed the same free port); or `port`, exactly. `addressing`:
    the `LiveServer` fields that say how it is reached, when not as plain HTTP on 127.0.0.1."""
    for attempt in range(1 if port is not None else PORT_ATTEMPTS):
        chosen = port if port is not None else free_port()
        try:
            return _launch(data_dir, chosen, command(chosen), env, addressing)
        except PortTaken:
            if port is not None or attempt == PORT_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def _launch(
    data_dir: Path, port: int, command: list[str], env: dict[str, str], addressing: dict[str, Any]
) -> LiveServer:
    log_path = data_dir / f"server-{port}-{time.monotonic_ns()}.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, *command],
            env=demo_env(data_dir, **env),
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = LiveServer(process, port, log_path, **addressing)
    try:
        _wait_until_serving(server)
    except BaseException:
        stop_server(server)
        raise
    return server


def stop_server(server: LiveServer) -> None:
    """SIGTERM, and wait until the server has stopped. One that does not stop is a defect, not a slow test: it is
    killed, and the test fails with its log (uvicorn waits for every open response before it stops, so a stream
    nothing ends kept one alive until a deployment's orchestrator killed it)."""
    server.process.terminate()
    try:
        server.process.wait(timeout=SHUTDOWN_GUARD_SECONDS)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()
        raise AssertionError(f"The server did not stop on SIGTERM; killed. Its log:\n{server.log()}") from None


@contextmanager
def run_server(data_dir: Path, *, lifespan: str = "on", log_level: str = "warning", **env: str) -> Iterator[LiveServer]:
    server = start_server(data_dir, lifespan=lifespan, log_level=log_level, **env)
    try:
        yield server
    finally:
        stop_server(server)


@contextmanager
def run_demo(data_dir: Path, *options: str, **env: str) -> Iterator[LiveServer]:
    server = start_demo(data_dir, *options, **env)
    try:
        yield server
    finally:
        stop_server(server)


def jsonrpc_body(method: str, params: dict | None = None, *, modern: bool = True, request_id: int = 1) -> str:
    params = dict(params or {})
    if modern:
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


def modern_headers(method: str, key: str | None = None, name: str | None = None) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return headers


def start_worker(data_dir: Path, **env: str) -> subprocess.Popen[bytes]:
    """Start `manage.py db_worker`, the database queue's worker that runs MCP tasks; stop it with `stop_worker`."""
    log_path = data_dir / f"worker-{time.monotonic_ns()}.log"
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "manage.py"),
                "db_worker",
                "--no-reload",
                "--no-startup-delay",
                "--interval",
                "0.05",
            ],
            env=demo_env(data_dir, **env),
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def stop_worker(worker: subprocess.Popen[bytes]) -> None:
    worker.terminate()
    try:
        worker.wait(timeout=HANG_GUARD_SECONDS)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()


@contextmanager
def run_worker(data_dir: Path, **env: str) -> Iterator[subprocess.Popen[bytes]]:
    worker = start_worker(data_dir, **env)
    try:
        yield worker
    finally:
        stop_worker(worker)
