"""Drive wrk (Debian's /usr/bin/wrk) with bench/wrk_mcp.lua and read back its one-line JSON summary."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .servers import LOAD_CPU

LUA_SCRIPT = Path(__file__).with_name("wrk_mcp.lua")
# A JSON-RPC error object, or a tool's error result: either makes a response count as failed.
BAD_MARKERS = ('"error":{"code"', '"isError":true')


@dataclass(frozen=True)
class Load:
    """What wrk sends: the same headers on every request, bodies round-robin (POST); or, for `method="GET"`,
    `paths` round-robin with no body."""

    url: str
    headers: dict[str, str]
    bodies: list[str]
    ok_marker: str
    method: str = "POST"
    paths: tuple[str, ...] = ()


def find_wrk() -> str:
    found = shutil.which("wrk")
    if found is None:
        raise SystemExit("wrk is not installed (Debian: apt-get install wrk)")
    return found


def _lua_string(text: str) -> str:
    """A Lua long-bracket literal, whatever the text contains."""
    level = 0
    while f"]{'=' * level}]" in text:
        level += 1
    return f"[{'=' * level}[{text}]{'=' * level}]"


def _config(load: Load) -> str:
    headers = ", ".join(f"[ {_lua_string(k)} ] = {_lua_string(v)}" for k, v in load.headers.items())
    bodies = ", ".join(_lua_string(body) for body in load.bodies)
    bad = ", ".join(_lua_string(marker) for marker in BAD_MARKERS)
    path = urlsplit(load.url).path
    paths = ", ".join(_lua_string(item) for item in load.paths)
    return (
        f"return {{path = {_lua_string(path)}, headers = {{{headers}}}, bodies = {{{bodies}}},\n"
        f"  method = {_lua_string(load.method)}, paths = {{{paths}}},\n"
        f"  ok_marker = {_lua_string(load.ok_marker)}, bad_markers = {{{bad}}}}}\n"
    )


def run(load: Load, connections: int, seconds: int, timeout: int = 10) -> dict[str, Any]:
    """One closed-loop wrk run on the load core; one connection per wrk thread (see wrk_mcp.lua)."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", prefix="bench-wrk-", delete=False) as config:
        config.write(_config(load))
    try:
        command = [
            "taskset",
            "-c",
            LOAD_CPU,
            find_wrk(),
            "-t",
            str(connections),
            "-c",
            str(connections),
            "-d",
            f"{seconds}s",
            "--timeout",
            f"{timeout}s",
            "-s",
            str(LUA_SCRIPT),
            load.url,
        ]
        env = {**os.environ, "BENCH_WRK_CONFIG": config.name}
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=seconds + timeout + 30)
    finally:
        os.unlink(config.name)
    for line in done.stdout.splitlines():
        if line.startswith("BENCHJSON "):
            return dict(json.loads(line.removeprefix("BENCHJSON ")))
    raise RuntimeError(f"wrk gave no summary (exit {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")


def failures(result: dict[str, Any]) -> int:
    """Every response that was not a correct answer, and every socket error."""
    keys = ("bad_status", "rpc_errors", "connect_errors", "read_errors", "write_errors", "timeouts")
    return sum(int(result[key]) for key in keys)
