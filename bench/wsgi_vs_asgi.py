"""Our WSGI entry under gunicorn against our ASGI entry under uvicorn: `python bench/wsgi_vs_asgi.py [options]`.

The same demo (`bench.settings`), database and API key; one worker each, pinned to the server core: uvicorn
serving `project.asgi:application` as bench/run.py runs it, and gunicorn's sync worker serving
`project.wsgi:application`. The workloads are bench/run.py's `echo` and `list200`, in both eras, checked the same
way (every answer checked by wrk_mcp.lua, a wrong one marks the row INVALID). Runs alternate asgi, wsgi, asgi,
wsgi in each cell. Prints a Markdown table with req/s, CPU per request and the WSGI/ASGI ratio.

A sync worker answers one request at a time and closes the connection after it (gunicorn's sync workers do not
keep connections alive), so each request also pays a TCP connect; at 16 connections the other 15 wait in the
listen queue. That is what a deployment with sync workers gets, and what is measured.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/wsgi_vs_asgi.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.measure import Target, measure, warm_up  # noqa: E402
from bench.protocol import ERAS  # noqa: E402
from bench.servers import LOAD_CPU, SERVER_CPU, Server  # noqa: E402
from bench.session import OURS_APP, _django, django_env, prepare_data  # noqa: E402
from bench.workloads import WORKLOADS  # noqa: E402
from bench.wrk import find_wrk  # noqa: E402

WSGI_APP = "project.wsgi:application"
NAMES = ("echo", "list200")


@dataclass
class GunicornServer(Server):
    """gunicorn with one sync worker; `pid` is the worker's (what serves, and what /proc is read for)."""

    def start(self, timeout: float = 60.0) -> None:
        env = {**os.environ, **self.env}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.cwd), env.get("PYTHONPATH")]))
        command = [
            *("taskset", "-c", SERVER_CPU, self.python, "-m", "gunicorn", self.app),
            *("--bind", f"127.0.0.1:{self.port}", "--worker-class", "sync", "--workers", "1"),
            *("--no-control-socket", "--log-level", "warning", "--timeout", "120", "--backlog", "2048"),
        ]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                command, cwd=self.cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self._wait_until_listening(timeout)

    @property
    def pid(self) -> int:
        assert self.process is not None
        master = self.process.pid
        children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        if len(children) != 1:
            raise RuntimeError(f"gunicorn {master} has workers {children}, not one")
        return int(children[0])


def run(names: list[str], eras: tuple[str, ...], concurrencies: tuple[int, ...], args: argparse.Namespace) -> list:
    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    cells = []
    with tempfile.TemporaryDirectory(prefix="mcp-bench-wsgi-") as scratch:
        data_dir = Path(scratch)
        log(f"Preparing the demo database in {data_dir} …")
        key = "Bearer " + prepare_data(data_dir)
        for name in names:
            workload = WORKLOADS[name]
            _django(data_dir, "-m", "bench.catalogs", workload.ours_catalog)
            asgi = Server("asgi", OURS_APP, django_env(data_dir), data_dir)
            wsgi = GunicornServer("wsgi", WSGI_APP, django_env(data_dir), data_dir)
            try:
                asgi.start()
                wsgi.start()
                for era in eras:
                    pair = (Target(asgi, workload, era, key), Target(wsgi, workload, era, key))
                    for target in pair:
                        warm_up(target, args.warmup)
                    for connections in concurrencies:
                        runs: dict[str, list[dict[str, Any]]] = {"asgi": [], "wsgi": []}
                        for _ in range(args.rounds):
                            for target in pair:
                                result = measure(target, connections, args.duration, args.warmup)
                                runs[target.server.label].append(result)
                                log(
                                    f"  {name:8} {era} c={connections:<3} {target.server.label}: "
                                    f"{result['rps']:8.1f} req/s  {result['cpu_us_per_req'] or 0:.0f} µs CPU/req  "
                                    f"failures {result['failures']}"
                                )
                        cells.append({"workload": name, "era": era, "concurrency": connections, "runs": runs})
            finally:
                wsgi.stop()
                asgi.stop()
    return cells


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    requests = sum(run["requests"] for run in runs)
    return {
        "rps": statistics.median(run["rps"] for run in runs),
        "cpu_us_per_req": sum(run["cpu_s"] for run in runs) * 1e6 / requests if requests else None,
        "p50_ms": statistics.median(run["p50_ms"] for run in runs),
        "failures": sum(run["failures"] for run in runs),
    }


def markdown(cells: list[dict[str, Any]]) -> str:
    lines = [
        "| workload | era | conns | ASGI req/s | WSGI req/s | WSGI/ASGI | ASGI CPU µs/req | WSGI CPU µs/req "
        "| ASGI p50 ms | WSGI p50 ms |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for cell in cells:
        asgi, wsgi = _summary(cell["runs"]["asgi"]), _summary(cell["runs"]["wsgi"])
        invalid = asgi["failures"] or wsgi["failures"]
        ratio = "INVALID" if invalid else f"{wsgi['rps'] / asgi['rps']:.2f}×"
        lines.append(
            f"| {cell['workload']} | {cell['era']} | {cell['concurrency']} | {asgi['rps']:,.0f} | {wsgi['rps']:,.0f} "
            f"| {ratio} | {asgi['cpu_us_per_req'] or 0:,.0f} | {wsgi['cpu_us_per_req'] or 0:,.0f} "
            f"| {asgi['p50_ms']:.2f} | {wsgi['p50_ms']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration", type=int, default=3, help="seconds per measured run (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="seconds of unmeasured load before each run")
    parser.add_argument("--rounds", type=int, default=2, help="runs per server and cell, alternating (default 2)")
    parser.add_argument("--only", action="append", choices=NAMES, help="one workload (repeatable)")
    parser.add_argument("--era", action="append", choices=ERAS, help="one protocol era (repeatable)")
    parser.add_argument("--concurrency", type=int, action="append", help="connections (repeatable; default 1, 16)")
    parser.add_argument("--out", type=Path, help="write every run as JSON here")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    os.sched_setaffinity(0, {int(LOAD_CPU)})
    find_wrk()
    cells = run(list(args.only or NAMES), tuple(args.era or ERAS), tuple(args.concurrency or (1, 16)), args)
    print(markdown(cells))
    if args.out is not None:
        args.out.write_text(json.dumps(cells, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
