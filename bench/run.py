"""Benchmark our server against a bare SDK server: `python bench/run.py [--duration S] [--rounds N] [--only W]`.

Prints a Markdown table and writes the full results (every run) as JSON. See bench/README.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from importlib.metadata import version
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/run.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import report  # noqa: E402
from bench.protocol import ERAS  # noqa: E402
from bench.servers import LOAD_CPU, uvicorn_options  # noqa: E402
from bench.session import Plan, prepare_data, run_workload  # noqa: E402
from bench.workloads import WORKLOADS  # noqa: E402
from bench.wrk import find_wrk  # noqa: E402


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration", type=int, default=3, help="seconds per measured run (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="seconds of unmeasured load before each run (0: none)")
    parser.add_argument("--rounds", type=int, default=2, help="runs per server and cell, alternating (default 2)")
    parser.add_argument(
        "--only",
        action="append",
        choices=sorted(WORKLOADS),
        metavar="WORKLOAD",
        help=f"run only this workload (repeatable): {', '.join(WORKLOADS)}",
    )
    parser.add_argument("--era", action="append", choices=ERAS, help="only this protocol era (repeatable)")
    parser.add_argument("--concurrency", type=int, action="append", help="connections (repeatable; default 1 and 16)")
    parser.add_argument(
        "--peers",
        action="store_true",
        help="also measure every peer library (bench/peers/), each from its own virtualenv, against ours",
    )
    parser.add_argument("--peer", action="append", metavar="NAME", help="measure only this peer (repeatable)")
    parser.add_argument(
        "--leak",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the leak check (200,000 calls per era); default: on unless --only is given",
    )
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("results.json"), help="JSON results file")
    parser.add_argument(
        "--data-dir", type=Path, help="keep the demo database and server logs here (default: a temp dir)"
    )
    args = parser.parse_args(argv)
    if args.peer:
        from bench.peers import PEERS

        unknown = sorted(set(args.peer) - set(PEERS))
        if unknown:
            parser.error(f"unknown peer {', '.join(unknown)}; the peers are {', '.join(PEERS)}")
    if args.duration < 1 or args.rounds < 1 or args.warmup < 0:
        parser.error("--duration and --rounds must be at least 1, --warmup at least 0")
    return args


def environment() -> dict[str, Any]:
    wrk_version = subprocess.run([find_wrk(), "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "python": platform.python_version(),
        "packages": {name: version(name) for name in ("mcp", "django", "uvicorn", "djangorestframework")},
        "wrk": wrk_version.strip(),
        "uvicorn_options": uvicorn_options(),
        "cpus": platform.machine() + ", " + _cpu_model(),
        "source": _source(),
    }


def _source() -> dict[str, Any]:
    """Which code was measured: the commit, and whether the working tree differed from it (read-only git)."""
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--", "mcp_expose", "project"], cwd=root, capture_output=True, text=True
        ).stdout.split("\n")
    except OSError:
        return {}
    return {"commit": commit, "uncommitted_changes": [line[3:] for line in changed if line.strip()]}


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds through every server's cleanup


def main(argv: list[str]) -> int:
    args = parse(argv)
    missing = [name for name in ("django", "mcp", "uvicorn") if importlib.util.find_spec(name) is None]
    if missing:
        raise SystemExit(
            f"{', '.join(missing)} not importable: run with the project's virtualenv, "
            "e.g. .venv/bin/python bench/run.py"
        )
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with SIGINT ignored (`cmd &`)
    # Keep this process (and the Django commands it runs) off the servers' core; servers re-pin themselves.
    os.sched_setaffinity(0, {int(LOAD_CPU)})
    find_wrk()
    plan = Plan(
        eras=tuple(args.era or ERAS),
        concurrencies=tuple(args.concurrency or (1, 16)),
        rounds=args.rounds,
        seconds=args.duration,
        warmup=args.warmup,
    )
    # `echo_otel` needs the otel extra, which a deployment's virtualenv (the README's table) does not have: asked for.
    names = args.only or [name for name, workload in WORKLOADS.items() if not workload.telemetry]
    measured_on = environment()  # before the runs: the code that is about to be measured

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="mcp-bench-") as scratch:
        data_dir = args.data_dir or Path(scratch)
        data_dir.mkdir(parents=True, exist_ok=True)
        log(f"Preparing the demo database in {data_dir} …")
        api_key = prepare_data(data_dir)
        results = []
        for name in names:
            log(f"{name}: {WORKLOADS[name].title}")
            results.append(run_workload(WORKLOADS[name], plan, data_dir, api_key, log))
        peers = None
        if args.peers or args.peer:
            from bench import peer_run
            from bench.peers import PEERS

            log("peers: " + ", ".join(args.peer or PEERS))
            peers = peer_run.run_peers(args.peer or list(PEERS), plan, data_dir, api_key, log)
        leaks = None
        if args.leak or (args.leak is None and not args.only):
            from bench import leak

            log("leak check")
            leaks = leak.leak_check(plan.eras, data_dir, api_key, log)

    table, idle = report.rows(results), report.idle_rows(results)
    document: dict[str, Any] = {
        "environment": measured_on,
        "plan": asdict(plan),
        "rows": table,
        "idle_rss": idle,
        "workloads": results,
    }
    print(report.markdown(table, idle))
    gateway = report.gateway_rows(table)
    if gateway:
        document["gateway"] = gateway
        print(report.gateway_markdown(gateway))
    if peers is not None:
        from bench import peer_run

        document["peers"] = {**peers, "rows": peer_run.rows(peers)}
        print(peer_run.markdown(document["peers"]["rows"], peers["idle_rss_mb"]))
    if leaks is not None:
        from bench import leak

        document["leak"] = leaks
        print(leak.markdown(leaks))
    args.out.write_text(json.dumps(document, indent=1, default=str) + "\n")
    log(f"Wrote {args.out}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        print("Interrupted; every server was stopped.", file=sys.stderr)
        sys.exit(130)
