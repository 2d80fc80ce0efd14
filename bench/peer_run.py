"""Our server against the other MCP libraries (`bench/peers/`), each from its own pinned virtualenv.

For each workload (echo, the 2-tool and the 200-tool listing) ours starts once with the workload's catalog; then
each peer starts with the same tools under its own names, and in every era the peer serves, at each concurrency,
the runs alternate ours, peer, ours, peer… Each peer's ratio is its rate over ours (below 1: we are faster), and
the target is ours at PEER_TARGET× every peer.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

from . import proc
from .measure import Target, check_answers, measure, warm_up
from .peers import COMMON_DIR, PEERS, Peer, ensure_venv
from .report import summarize
from .servers import LOAD_CPU, ROOT, Server
from .session import BARE_APP, OURS_APP, Plan, _django, django_env
from .workloads import ECHO_TEXT, PEER_TARGET, WORKLOADS, Workload, _listing

# Each peer workload, and the tool profile a peer serves for it (bench/peers/README.md). In `proxy`, ours and a
# proxying peer both call one bare upstream (the bench's bare server), started first.
PEER_WORKLOADS = {"list2": "two", "list200": "many", "echo": "calls", "proxy": "calls"}
VENV_ROOT = ROOT / "var" / "bench-peers"


def as_peer_asks(workload: Workload, peer: Peer) -> Workload:
    """The workload under the peer's own tool names, checked for the same answer."""
    names = peer.tool_names
    if workload.name == "list2":
        listed = [names["echo"], names["get_book"]]
        return replace(workload, ok_marker=f'"{names["get_book"]}"', check=_listing(listed))
    if workload.name == "list200":
        many = [names["many"].format(index) for index in range(200)]
        return replace(workload, ok_marker=f'"{many[-1]}"', check=_listing(many))
    return replace(workload, tool=names["echo"], check=_echoed)


def _echoed(result: dict[str, Any], _: dict[str, Any]) -> str | None:
    """A peer may answer echo as structured content or as text: either way the message comes back."""
    if result.get("isError"):
        return f"tool error: {str(result)[:300]}"
    return None if ECHO_TEXT in json.dumps(result) else f"unexpected result: {str(result)[:300]}"


def _prepare(peer: Peer, python: str, env: dict[str, str], log: Callable[[str], None]) -> None:
    for command in peer.setup:
        done = subprocess.run(
            [python, *command], cwd=peer.app_dir, env={**os.environ, **env}, capture_output=True, text=True, timeout=300
        )
        if done.returncode != 0:
            raise RuntimeError(f"{peer.name}: {' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
    log(f"  {peer.name}: ready ({python})")


def run_peers(names: list[str], plan: Plan, data_dir: Path, api_key: str, log: Callable[[str], None]) -> dict[str, Any]:
    peers = [PEERS[name] for name in names]
    pythons = {peer.name: str(ensure_venv(peer, VENV_ROOT)) for peer in peers}
    cells: list[dict[str, Any]] = []
    idle: list[dict[str, Any]] = []
    for workload_name, profile in PEER_WORKLOADS.items():
        workload = WORKLOADS[workload_name]
        serving = [peer for peer in peers if workload_name in peer.workloads]
        if not serving:
            continue
        _django(data_dir, "-m", "bench.catalogs", workload.ours_catalog)
        with ExitStack() as stack:
            upstream: dict[str, str] = {}
            if workload.gateway:  # one bare upstream for ours and the peer, on the load's core as in `session`
                bare_env = {"BENCH_BARE_CATALOG": workload.bare_catalog, "BENCH_DB": str(data_dir / "demo.sqlite3")}
                bare = Server("bare", BARE_APP, bare_env, data_dir, cpu=LOAD_CPU)
                bare.env["BENCH_RESOURCE"] = bare.url
                stack.callback(bare.stop)
                bare.start()
                _django(data_dir, "-m", "bench.catalogs", "gateway", bare.url)
                upstream = {"BENCH_PEER_UPSTREAM": bare.url}
            ours = Server("ours", OURS_APP, django_env(data_dir), data_dir)
            stack.callback(ours.stop)
            ours.start()
            for peer in serving:
                peer_data = data_dir / "peers" / peer.name
                peer_data.mkdir(parents=True, exist_ok=True)
                env = {
                    **peer.env,
                    "BENCH_PEER_PROFILE": profile,
                    "BENCH_PEER_DATA": str(peer_data),
                    "PYTHONPATH": str(COMMON_DIR),
                    **upstream,
                }
                _prepare(peer, pythons[peer.name], env, log)
                server = Server(
                    peer.name,
                    peer.app,
                    env,
                    data_dir,
                    python=pythons[peer.name],
                    cwd=peer.app_dir,
                    mcp_path=peer.path,
                    lifespan="auto",
                )
                try:
                    server.start()
                    asked = as_peer_asks(workload, peer)
                    eras = [era for era in plan.eras if era in peer.eras]
                    pairs = [
                        (
                            Target(ours, workload.as_gateway(), era, "Bearer " + api_key),
                            Target(server, asked, era, None),
                        )
                        for era in eras
                    ]
                    for pair in pairs:
                        for target in pair:
                            check_answers(target)
                            warm_up(target, plan.warmup)
                    time.sleep(0.5)
                    idle.append(
                        {
                            "peer": peer.name,
                            "workload": workload_name,
                            "ours_mb": proc.memory_kb(ours.pid, "VmRSS") / 1024,
                            "peer_mb": proc.memory_kb(server.pid, "VmRSS") / 1024,
                        }
                    )
                    for pair in pairs:
                        for connections in plan.concurrencies:
                            runs: dict[str, list[dict[str, Any]]] = {"ours": [], "peer": []}
                            for _ in range(plan.rounds):
                                for side, target in zip(("ours", "peer"), pair, strict=True):
                                    run = measure(target, connections, plan.seconds, plan.warmup)
                                    runs[side].append(run)
                                    log(
                                        f"  {peer.name:22} {workload_name:8} {target.era} c={connections:<3} {side}: "
                                        f"{run['rps']:8.1f} req/s  {run['cpu_us_per_req'] or 0:.0f} µs CPU/req"
                                        f"  failures {run['failures']}"
                                    )
                            cells.append(
                                {
                                    "peer": peer.name,
                                    "workload": workload_name,
                                    "era": pair[0].era,
                                    "concurrency": connections,
                                    "runs": runs,
                                }
                            )
                finally:
                    server.stop()
    return {"cells": cells, "idle_rss_mb": idle}


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for cell in result["cells"]:
        ours, peer = summarize(cell["runs"]["ours"]), summarize(cell["runs"]["peer"])
        ratio = peer["rps"] / ours["rps"] if ours["rps"] else None
        if ours["failures"] or peer["failures"]:
            verdict = "INVALID"
        else:
            verdict = "met" if ratio is not None and ratio <= 1 / PEER_TARGET else "missed"
        out.append({**{key: cell[key] for key in ("peer", "workload", "era", "concurrency")}, "ours": ours})
        out[-1].update({"peer_summary": peer, "ratio": ratio, "verdict": verdict})
    return out


def markdown(table: list[dict[str, Any]], idle: list[dict[str, Any]]) -> str:
    lines = [
        "| peer | workload | era | c | ours req/s | peer req/s | peer/ours | target | | ours CPU µs/req | "
        "peer CPU µs/req | ours p50 ms | peer p50 ms |",
        "|---|---|---|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|",
    ]
    for row in table:
        ours, peer = row["ours"], row["peer_summary"]
        lines.append(
            f"| {PEERS[row['peer']].title} | {WORKLOADS[row['workload']].title} | {row['era']} | "
            f"{row['concurrency']} | {ours['rps']:,.1f} | {peer['rps']:,.1f} | {row['ratio']:.2f} | "
            f"≤ {1 / PEER_TARGET:.2f} | {row['verdict']} | {ours['cpu_us_per_req'] or 0:,.0f} | "
            f"{peer['cpu_us_per_req'] or 0:,.0f} | {ours['p50_ms']:.2f} | {peer['p50_ms']:.2f} |"
        )
    lines += ["", "| idle RSS after start + warm-up | workload | ours MB | peer MB |", "|---|---|--:|--:|"]
    for entry in idle:
        lines.append(
            f"| {PEERS[entry['peer']].title} | {WORKLOADS[entry['workload']].title} | {entry['ours_mb']:.1f} | "
            f"{entry['peer_mb']:.1f} |"
        )
    return "\n".join(lines) + "\n"
