"""One measured run of one server: check the answers, warm up, then wrk with the server watched through /proc."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from . import proc, protocol, wrk
from .servers import SERVER_CPU, Server
from .workloads import Workload

# Other processes (test suites) on the server's core above this share of a run make it suspect.
NOISY_PERCENT = 10.0


@dataclass(frozen=True)
class Target:
    """A server and how to talk to it for one workload and era: over MCP, or (`over_http`) the workload's view
    called directly, `GET http_path` for each argument set. A stateful server's session id, once the
    handshake made one, rides every request."""

    server: Server
    workload: Workload
    era: str
    authorization: str | None
    over_http: bool = False
    session: dict[str, str] = field(default_factory=dict)

    def request_headers(self) -> dict[str, str]:
        if self.over_http:
            return {
                "Accept": "application/json",
                **({"Authorization": self.authorization} if self.authorization else {}),
            }
        headers = protocol.headers(self.era, self.workload.method, self.workload.tool, self.authorization)
        return {**headers, **self.session}

    def bodies(self) -> list[str]:
        return [protocol.body(self.era, self.workload.method, params) for params in self.workload.params()]

    def http_paths(self) -> tuple[str, ...]:
        return tuple(self.workload.http_path.format(**arguments) for arguments in self.workload.arguments)


def check_answers(target: Target) -> list[dict[str, Any]]:
    """Send every distinct request once and insist on correct answers; returns the results, in order."""
    if target.over_http:
        return _check_http_answers(target)
    if target.era == protocol.LEGACY:
        session = protocol.legacy_handshake(target.server.url, target.authorization)
        target.session.clear()
        if session:
            target.session["Mcp-Session-Id"] = session
    results = []
    arguments = target.workload.arguments or [{}]
    for data, args in zip(target.bodies(), arguments, strict=False):
        reply = protocol.post(target.server.url, data, target.request_headers())
        message = reply.message()
        label = f"{target.server.label} {target.workload.name} {target.era}"
        if reply.status != 200 or not isinstance(message, dict) or "result" not in message:
            problem = f"HTTP {reply.status} {reply.body[:400]!r}"
        else:
            problem = target.workload.check(message["result"], args)
        if problem:
            raise RuntimeError(f"{label}: {problem}\n{target.server.log_tail()}")
        results.append(message["result"])
    return results


def _check_http_answers(target: Target) -> list[dict[str, Any]]:
    """The view over plain HTTP: each GET must answer 200 with the object asked for, as a tool result would hold it."""
    results = []
    base = target.server.url.removesuffix("/mcp")
    for path, arguments in zip(target.http_paths(), target.workload.arguments, strict=True):
        reply = protocol.get(base + path, target.request_headers())
        message = reply.message()
        result = {"structuredContent": message} if isinstance(message, dict) else None
        problem = f"HTTP {reply.status} {reply.body[:400]!r}" if reply.status != 200 or result is None else None
        problem = problem or target.workload.check(result or {}, arguments)
        if problem:
            raise RuntimeError(f"{target.server.label} GET {path}: {problem}\n{target.server.log_tail()}")
        results.append(result or {})
    return results


def load_for(target: Target) -> wrk.Load:
    if target.over_http:
        base = target.server.url.removesuffix("/mcp")
        return wrk.Load(
            base + "/", target.request_headers(), [], target.workload.ok_marker, method="GET", paths=target.http_paths()
        )
    return wrk.Load(target.server.url, target.request_headers(), target.bodies(), target.workload.ok_marker)


def warm_up(target: Target, seconds: int) -> None:
    if seconds > 0:
        wrk.run(load_for(target), 1, seconds)


def measure(target: Target, connections: int, seconds: int, warmup: int) -> dict[str, Any]:
    """A checked, warmed-up, measured wrk run; the numbers as one flat dict."""
    check_answers(target)
    return watched_run(target.server, load_for(target), connections, seconds, warmup)


def ceiling_load(server: Server, workload: Workload) -> wrk.Load:
    """What wrk sends the raw app: any body will do (it answers every request the same), checked the same way."""
    return wrk.Load(server.url, {"Content-Type": "application/json"}, ["{}"], workload.ok_marker)


def watched_run(server: Server, load: wrk.Load, connections: int, seconds: int, warmup: int) -> dict[str, Any]:
    """Warm up, then one wrk run with the server's CPU, the other load on its core and its peak RSS read from /proc."""
    pid = server.pid
    if warmup > 0:
        wrk.run(load, connections, warmup)
    peak_reset = proc.reset_peak_rss(pid)
    cpu_before, cores_before = proc.cpu_seconds(pid), proc.core_jiffies()
    result = wrk.run(load, connections, seconds)
    cpu = proc.cpu_seconds(pid) - cpu_before
    core_busy = proc.busy_percent(cores_before, proc.core_jiffies(), int(SERVER_CPU))
    if not server.alive():
        raise RuntimeError(f"{server.label} died during the run:\n{server.log_tail()}")
    duration = result["duration_us"] / 1e6
    requests = int(result["requests"])
    return {
        "at": time.strftime("%H:%M:%S"),
        "requests": requests,
        "rps": requests / duration if duration else 0.0,
        "p50_ms": result["p50_us"] / 1000,
        "p90_ms": result["p90_us"] / 1000,
        "p99_ms": result["p99_us"] / 1000,
        "max_ms": result["max_us"] / 1000,
        "wrk_p50_ms": result["wrk_p50_us"] / 1000,
        "wrk_p99_ms": result["wrk_p99_us"] / 1000,
        "cpu_s": cpu,
        "cpu_us_per_req": cpu * 1e6 / requests if requests else None,
        "server_cpu_percent": 100 * cpu / duration if duration else 0.0,
        "other_load_percent": max(0.0, core_busy - (100 * cpu / duration if duration else 0.0)),
        "peak_rss_mb": proc.memory_kb(pid, "VmHWM") / 1024,
        "peak_rss_since": "run start" if peak_reset else "server start",  # clear_refs refused: VmHWM since start
        "failures": wrk.failures(result),
        "wrk": result,
    }
