"""Private Redis and PostgreSQL servers a test can stop, start, freeze and thaw.

The system services on 127.0.0.1:6379 and :5432 are shared with other test runs, so a test that injects faults
starts its own on free ports: a `redis-server` subprocess, and a PostgreSQL cluster of the installed version made
with Debian's `pg_createcluster` (which needs root). Each is always left running, thawed and then removed by its
context manager.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from .live import free_port

# How long a start may take before the test gives up: a guard against a hang on a loaded machine, not a wait.
START_GUARD_SECONDS = 60.0


def _wait_for(check: Any, what: str) -> None:
    """Return once `check()` is true; fail after START_GUARD_SECONDS."""
    deadline = time.monotonic() + START_GUARD_SECONDS
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not answer within {START_GUARD_SECONDS} s")
        time.sleep(0.05)


class RedisServer:
    """One `redis-server` on a free loopback port, without persistence (a restart starts empty, as after a crash)."""

    def __init__(self, log_path: Path) -> None:
        self.port = free_port()
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self.frozen = False

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start it on its port and wait until it answers PING."""
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        _wait_for(self.answers, f"redis-server on port {self.port}")

    def stop(self) -> None:
        """Stop it (SIGTERM) and wait for it to exit: connections are refused until `start`."""
        self.thaw()
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=START_GUARD_SECONDS)
            self.process = None

    def freeze(self) -> None:
        """SIGSTOP: the port still accepts connections, but nothing is ever answered until `thaw`."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)
        self.frozen = True

    def thaw(self) -> None:
        if self.frozen and self.process is not None:
            self.process.send_signal(signal.SIGCONT)
        self.frozen = False

    def answers(self) -> bool:
        import redis

        if self.process is not None and self.process.poll() is not None:
            raise AssertionError(f"redis-server exited with {self.process.returncode}:\n{self.log_path.read_text()}")
        try:
            with redis.Redis(port=self.port, socket_timeout=1, socket_connect_timeout=1) as client:
                return bool(client.ping())
        except redis.RedisError:
            return False

    def restore(self) -> None:
        """Running and answering, whatever a test did to it."""
        self.thaw()
        if self.process is None:
            self.start()


@contextmanager
def redis_server(directory: Path) -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is not on PATH: run scripts/services (as root it installs Redis)")
    server = RedisServer(directory / "redis.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


class PostgresCluster:
    """A private PostgreSQL cluster on a free port, with the role and password "mcp" the scale settings use."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.name = f"mcp_outage_{secrets.token_hex(4)}"
        self.port = free_port()
        self.running = False

    def create(self) -> None:
        """Make the cluster (fsync off: its data outlives no test) and start it; then add the role."""
        try:
            _run(
                "pg_createcluster",
                self.version,
                self.name,
                "-p",
                str(self.port),
                "--start-conf",
                "manual",
                "-o",
                "fsync=off",
                "-o",
                "synchronous_commit=off",
                "--start",
            )
            self.running = True
            _wait_for(self.answers, f"PostgreSQL cluster {self.name} on port {self.port}")
            _run(
                "su", "postgres", "-c", f"psql -q -p {self.port} -c \"CREATE ROLE mcp LOGIN SUPERUSER PASSWORD 'mcp'\""
            )
        except BaseException:
            subprocess.run(["pg_dropcluster", "--stop", self.version, self.name], capture_output=True, check=False)
            raise

    def stop(self) -> None:
        """Fast shutdown: open connections are ended, new ones refused until `start`."""
        _run("pg_ctlcluster", self.version, self.name, "stop", "-m", "fast")
        self.running = False

    def start(self) -> None:
        """Start it again and wait until it accepts connections."""
        _run("pg_ctlcluster", self.version, self.name, "start")
        self.running = True
        _wait_for(self.answers, f"PostgreSQL cluster {self.name} on port {self.port}")

    def restore(self) -> None:
        if not self.running:
            self.start()

    def drop(self) -> None:
        _run("pg_dropcluster", "--stop", self.version, self.name)

    def connect(self, database: str = "postgres") -> Any:
        """An autocommit connection as "mcp"."""
        import psycopg

        return psycopg.connect(
            host="127.0.0.1",
            port=self.port,
            user="mcp",
            password="mcp",
            dbname=database,
            autocommit=True,
            connect_timeout=5,
        )

    def answers(self) -> bool:
        result = subprocess.run(["pg_isready", "-q", "-h", "127.0.0.1", "-p", str(self.port)], check=False)
        return result.returncode == 0


def _run(*command: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True, timeout=START_GUARD_SECONDS, check=False)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(command)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")


def installed_postgres_version() -> str:
    """The newest PostgreSQL installed from Debian's packages, or a failure saying how to install one."""
    if os.geteuid() != 0 or shutil.which("pg_createcluster") is None:
        pytest.fail(
            "The outage tests make a private PostgreSQL cluster with pg_createcluster, which needs root and "
            "Debian's postgresql-common: run the tests as root after scripts/services (which installs it)"
        )
    versions = sorted((path.parent.parent.name for path in Path("/usr/lib/postgresql").glob("*/bin/postgres")), key=int)
    if not versions:
        pytest.fail("No PostgreSQL server is installed under /usr/lib/postgresql: run scripts/services")
    return versions[-1]


@contextmanager
def postgres_cluster() -> Iterator[PostgresCluster]:
    cluster = PostgresCluster(installed_postgres_version())
    cluster.create()
    try:
        yield cluster
    finally:
        cluster.drop()
