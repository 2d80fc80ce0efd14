"""The leak check: our server's RSS after 200,000 calls is within 2% of its RSS after 20,000, in both eras.

A fresh server per era (the demo's catalog, the admin's API key, the usage log on), loaded with `tools/call` echo at
16 connections in wrk runs sized from the measured rate; RSS is read from /proc between runs, at the two counts.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from . import proc
from .measure import Target, check_answers, load_for
from .servers import Server
from .session import OURS_APP, _django, django_env
from .workloads import LEAK_CALLS, LEAK_TOLERANCE, WORKLOADS
from .wrk import failures, run

CONNECTIONS = 16
PROBE_SECONDS = 2


def leak_check(eras: tuple[str, ...], data_dir: Path, api_key: str, log: Callable[[str], None]) -> list[dict[str, Any]]:
    workload = WORKLOADS["echo"]
    _django(data_dir, "-m", "bench.catalogs", workload.ours_catalog)
    rows = []
    for era in eras:
        with ExitStack() as stack:
            server = Server("ours", OURS_APP, django_env(data_dir), data_dir)
            stack.callback(server.stop)
            server.start()
            target = Target(server, workload, era, "Bearer " + api_key)
            check_answers(target)
            calls, failed, elapsed, readings = 0, 0, 0.0, {}
            for goal in LEAK_CALLS:
                while calls < goal:
                    seconds = PROBE_SECONDS if calls == 0 else _seconds_for(goal - calls, calls, elapsed)
                    started = time.monotonic()
                    result = run(load_for(target), CONNECTIONS, seconds)
                    elapsed += time.monotonic() - started
                    calls += int(result["requests"])
                    failed += failures(result)
                readings[goal] = {"calls": calls, "rss_mb": proc.memory_kb(server.pid, "VmRSS") / 1024}
                log(f"  leak {era}: {readings[goal]['rss_mb']:.1f} MB after {calls:,} calls")
            first, last = (readings[goal]["rss_mb"] for goal in LEAK_CALLS)
            growth = last / first - 1
            rows.append(
                {
                    "era": era,
                    "readings": list(readings.values()),
                    "growth": growth,
                    "failures": failed,
                    "verdict": "INVALID" if failed else ("met" if growth <= LEAK_TOLERANCE else "missed"),
                }
            )
    return rows


def _seconds_for(remaining: int, calls: int, elapsed: float) -> int:
    """wrk runs by time: enough seconds for `remaining` calls at the rate seen so far (a little past is fine)."""
    rate = calls / elapsed
    return max(1, math.ceil(remaining / rate))


def markdown(rows: list[dict[str, Any]]) -> str:
    low, high = LEAK_CALLS
    lines = [
        f"| leak check, tools/call echo, c={CONNECTIONS} | RSS after {low:,} calls | RSS after {high:,} calls | "
        f"growth | target | |",
        "|---|--:|--:|--:|--:|---|",
    ]
    for row in rows:
        first, last = row["readings"]
        lines.append(
            f"| {row['era']} | {first['rss_mb']:.1f} MB ({first['calls']:,}) | {last['rss_mb']:.1f} MB "
            f"({last['calls']:,}) | {100 * row['growth']:+.2f}% | ≤ {100 * LEAK_TOLERANCE:.0f}% | {row['verdict']} |"
        )
    return "\n".join(lines) + "\n"
