"""Turn the runs into rows (medians over rounds, ratios, targets) and the rows into Markdown."""

from __future__ import annotations

import statistics
from typing import Any

from .measure import NOISY_PERCENT
from .workloads import CEILING_SHARE, PROXY_ADDED_P50_MS, PROXY_CPU_TARGET, WORKLOADS, target


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median req/s and latency over the rounds; CPU per request over all of them; the highest peak RSS."""
    requests = sum(run["requests"] for run in runs)
    return {
        "rps": statistics.median(run["rps"] for run in runs),
        "rps_runs": [round(run["rps"], 1) for run in runs],
        "p50_ms": statistics.median(run["p50_ms"] for run in runs),
        "p99_ms": statistics.median(run["p99_ms"] for run in runs),
        "cpu_us_per_req": sum(run["cpu_s"] for run in runs) * 1e6 / requests if requests else None,
        "peak_rss_mb": max(run["peak_rss_mb"] for run in runs),
        "failures": sum(run["failures"] for run in runs),
        "noisy": any(run["other_load_percent"] > NOISY_PERCENT for run in runs),
    }


def rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for result in results:
        workload = WORKLOADS[result["workload"]]
        for cell in result["cells"]:
            ours, bare = summarize(cell["runs"]["ours"]), summarize(cell["runs"]["bare"])
            ceiling = summarize(cell["runs"]["ceiling"]) if cell["runs"].get("ceiling") else None
            ratio = ours["rps"] / bare["rps"] if bare["rps"] else None
            ceiling_ratio = (
                ceiling["rps"] / bare["rps"] if ceiling and not ceiling["failures"] and bare["rps"] else None
            )
            goal, rule = judged_target(workload, cell["era"], cell["concurrency"], ceiling_ratio)
            if ours["failures"] or bare["failures"]:
                verdict = "INVALID"
            elif goal is None or ratio is None:
                verdict = ""
            else:
                verdict = "met" if ratio >= goal else "missed"
            out.append(
                {
                    "workload": workload.name,
                    "title": workload.title,
                    "era": cell["era"],
                    "concurrency": cell["concurrency"],
                    "ours": ours,
                    "bare": bare,
                    "ratio": ratio,
                    "ceiling": ceiling,
                    "ceiling_ratio": ceiling_ratio,
                    "target": goal,
                    "target_rule": rule,
                    "verdict": verdict,
                }
            )
    return out


def judged_target(workload: Any, era: str, concurrency: int, ceiling_ratio: float | None) -> tuple[float | None, str]:
    """The row's target as judged: the issue's, or CEILING_SHARE of the ceiling where the ceiling is below it
    (or where the issue sets the target by the ceiling)."""
    goal, rule = target(workload, era, concurrency)
    by_ceiling = goal is None and "ceiling" in rule
    if ceiling_ratio is not None and (by_ceiling or (goal is not None and ceiling_ratio < goal)):
        share = CEILING_SHARE * ceiling_ratio
        return share, rule if by_ceiling else f"{rule}; the ceiling is {ceiling_ratio:.1f}×: {CEILING_SHARE}× of it"
    return goal, rule


def gateway_rows(table: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The gateway's targets, where a run measured `proxy` and `echo` in the same era and concurrency: our CPU per
    proxied echo over our CPU per local echo, and (at one connection) the p50 a proxied call adds over calling the
    upstream directly (the `proxy` row's baseline is that upstream, called directly)."""
    local = {(row["era"], row["concurrency"]): row for row in table if row["workload"] == "echo"}
    out = []
    for row in table:
        echo = local.get((row["era"], row["concurrency"]))
        if row["workload"] != "proxy" or echo is None:
            continue
        proxied, local_cpu = row["ours"]["cpu_us_per_req"], echo["ours"]["cpu_us_per_req"]
        cpu_ratio = proxied / local_cpu if proxied and local_cpu else None
        added = row["ours"]["p50_ms"] - row["bare"]["p50_ms"]
        invalid = bool(row["ours"]["failures"] or row["bare"]["failures"] or echo["ours"]["failures"])
        out.append(
            {
                "era": row["era"],
                "concurrency": row["concurrency"],
                "proxied_cpu_us": proxied,
                "local_cpu_us": local_cpu,
                "cpu_ratio": cpu_ratio,
                "cpu_verdict": "INVALID"
                if invalid
                else _verdict(cpu_ratio is not None and cpu_ratio <= PROXY_CPU_TARGET),
                "added_p50_ms": added,
                "latency_verdict": (
                    "" if row["concurrency"] != 1 else "INVALID" if invalid else _verdict(added <= PROXY_ADDED_P50_MS)
                ),
            }
        )
    return out


def _verdict(met: bool) -> str:
    return "met" if met else "missed"


def gateway_markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        f"| gateway | era | c | ours CPU µs per proxied echo | per local echo | proxied/local (≤ {PROXY_CPU_TARGET:g}×) "
        f"| | p50 added over calling the upstream directly (≤ {PROXY_ADDED_P50_MS:g} ms at c=1) | |",
        "|---|---|--:|--:|--:|--:|---|--:|---|",
    ]
    for row in rows:
        lines.append(
            f"| tools/call echo through our gateway | {row['era']} | {row['concurrency']} | "
            f"{_n(row['proxied_cpu_us'], 0)} | {_n(row['local_cpu_us'], 0)} | {_n(row['cpu_ratio'], 2)}× | "
            f"{row['cpu_verdict']} | {row['added_p50_ms']:+.2f} ms | {row['latency_verdict']} |"
        )
    return "\n".join(lines) + "\n"


def idle_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Idle RSS after start and warm-up, for information (the issue retired its target)."""
    out = []
    for result in results:
        ours, bare = result["idle_rss_mb"]["ours"], result["idle_rss_mb"]["bare"]
        out.append(
            {
                "workload": result["workload"],
                "catalogs": f"{result['ours_catalog']} / {result['bare_catalog']}",
                "ours_mb": ours,
                "bare_mb": bare,
                "ratio": ours / bare,
            }
        )
    return out


def _n(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def markdown(table: list[dict[str, Any]], idle: list[dict[str, Any]]) -> str:
    lines = [
        "| workload | era | c | ours req/s | baseline req/s | ours/baseline | target | | ceiling req/s (/baseline) | "
        "ours p50 / p99 ms | baseline p50 / p99 ms | ours CPU µs/req | baseline CPU µs/req | ceiling CPU µs/req | "
        "ours peak RSS MB | baseline peak RSS MB |",
        "|---|---|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for row in table:
        ours, bare = row["ours"], row["bare"]
        flag = " ⚠" if ours["noisy"] or bare["noisy"] else ""
        failures = f" ({ours['failures']} / {bare['failures']} failed)" if row["verdict"] == "INVALID" else ""
        ceiling = row.get("ceiling") or {}
        ceiling_rps = "–"
        if ceiling:
            invalid = " INVALID" if ceiling["failures"] else ""
            ceiling_rps = f"{_n(ceiling['rps'], 0)} ({_n(row.get('ceiling_ratio'), 1)}×){invalid}"
        lines.append(
            f"| {row['title']} | {row['era']} | {row['concurrency']} | {_n(ours['rps'])} | {_n(bare['rps'])} | "
            f"{_n(row['ratio'], 2)}×{flag} | {'≥ ' + _n(row['target'], 2) + '×' if row['target'] else ''} | "
            f"{row['verdict']}{failures} | {ceiling_rps} | {_n(ours['p50_ms'], 2)} / {_n(ours['p99_ms'], 2)} | "
            f"{_n(bare['p50_ms'], 2)} / {_n(bare['p99_ms'], 2)} | {_n(ours['cpu_us_per_req'], 0)} | "
            f"{_n(bare['cpu_us_per_req'], 0)} | {_n(ceiling.get('cpu_us_per_req'), 0)} | "
            f"{_n(ours['peak_rss_mb'])} | {_n(bare['peak_rss_mb'])} |"
        )
    lines += [
        "",
        f"⚠: other processes used more than {NOISY_PERCENT:.0f}% of the server core during a run of that row: "
        "suspect numbers. INVALID: some response was wrong (non-200, JSON-RPC error, isError, missing "
        "content) or a socket failed; the ratio is not judged. Ceiling: a raw ASGI app (bench/raw_app.py) under the "
        "same uvicorn, answering every request with our server's own answer bytes: the most any server can reach "
        "here, and in CPU per request the part of ours that is uvicorn, the kernel and the socket rather than "
        "our application. Measured once per era and concurrency, after the rounds of ours and bare.",
        "",
        "| idle RSS after start + warm-up | catalogs (ours / baseline) | ours MB | baseline MB | ours/baseline |",
        "|---|---|--:|--:|--:|",
    ]
    for row in idle:
        lines.append(
            f"| {WORKLOADS[row['workload']].title} | {row['catalogs']} | {_n(row['ours_mb'])} | "
            f"{_n(row['bare_mb'])} | {_n(row['ratio'], 2)}× |"
        )
    return "\n".join(lines) + "\n"
