"""One workload end to end: expose its tools, start both servers, compare their answers, then alternate runs.

Each workload gets a fresh pair of processes, so every idle-RSS reading and every run starts from
the same state, and the runs of one cell go ours, bare, ours, bare… (round-robin, `rounds` times).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import secrets
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import proc, protocol
from .measure import NOISY_PERCENT, Target, ceiling_load, check_answers, measure, warm_up, watched_run
from .servers import LOAD_CPU, ROOT, SERVER_CPU, Server
from .workloads import Workload, comparable

OURS_APP = "project.asgi:application"
BARE_APP = "bench.bare_server:app"
RAW_APP = "bench.raw_app:app"


@dataclass(frozen=True)
class Plan:
    eras: tuple[str, ...]
    concurrencies: tuple[int, ...]
    rounds: int
    seconds: int
    warmup: int


def django_env(data_dir: Path) -> dict[str, str]:
    return {
        "DJANGO_SETTINGS_MODULE": "bench.settings",
        "DEMO_DATA_DIR": str(data_dir),
        "MCP_EXPOSE_LOG_LEVEL": "WARNING",
    }


def _django(data_dir: Path, *args: str) -> str:
    env = {**os.environ, **django_env(data_dir)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def prepare_data(data_dir: Path) -> str:
    """Migrate and seed the demo database (with the bench app installed); returns the admin's API key."""
    _django(data_dir, "manage.py", "demo", "--noinput", "--no-serve")
    return (data_dir / "demo-api-key.txt").read_text().strip()


def oauth_token(base_url: str, data_dir: Path, resource: str) -> str:
    """A real access token from django-oauth-toolkit: the demo's script client, client credentials, this resource."""
    client_id, secret = (data_dir / "demo-oauth-client.txt").read_text().split()
    form = urllib.parse.urlencode({"grant_type": "client_credentials", "scope": "mcp", "resource": resource}).encode()
    request = urllib.request.Request(base_url + "/o/token/", data=form, method="POST")
    request.add_header("Authorization", "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode())
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(json.load(response)["access_token"])


def user_token(data_dir: Path, resources: list[str], scope: str) -> str:
    """A django-oauth-toolkit access token of the demo admin (a user, which DRF's permission asks for) for these
    resources: a real token row, as the authorization-code flow would leave it, made directly."""
    token = secrets.token_urlsafe(32)
    code = (
        "from datetime import timedelta; from django.utils import timezone; "
        "from django.contrib.auth import get_user_model; "
        "from oauth2_provider.models import AccessToken, get_application_model; "
        f"client_id = {(data_dir / 'demo-oauth-client.txt').read_text().split()[0]!r}; "
        "AccessToken.objects.create(user=get_user_model().objects.get(username='admin'), "
        "application=get_application_model().objects.get(client_id=client_id), "
        f"token={token!r}, scope={scope!r}, resource={resources!r}, "
        "expires=timezone.now() + timedelta(days=1))"
    )
    _django(data_dir, "manage.py", "shell", "-c", code)
    return token


def run_workload(
    workload: Workload, plan: Plan, data_dir: Path, api_key: str, log: Callable[[str], None]
) -> dict[str, Any]:
    """Every era × concurrency cell of one workload, plus idle RSS and the parity check."""
    _django(data_dir, "-m", "bench.catalogs", workload.ours_catalog)
    with ExitStack() as stack:
        targets = _start_pair(workload, plan, data_dir, api_key, stack)
        parity = _compare_and_warm_up(workload, targets, plan.warmup, log)
        time.sleep(0.5)
        idle = {
            target.server.label: proc.memory_kb(target.server.pid, "VmRSS") / 1024
            for target in next(iter(targets.values()))
        }
        log(f"  idle RSS after start + warm-up: ours {idle['ours']:.1f} MB, bare {idle['bare']:.1f} MB")
        raws = {era: _start_ceiling(workload, pair[0], data_dir, stack) for era, pair in targets.items()}
        cells = []
        for era, pair in targets.items():
            for connections in plan.concurrencies:
                runs: dict[str, list[dict[str, Any]]] = {"ours": [], "bare": []}
                for _ in range(plan.rounds):
                    for target in pair:
                        run = measure(target, connections, plan.seconds, plan.warmup)
                        runs[target.server.label].append(run)
                        log(f"  {workload.name:8} {era} c={connections:<3} {target.server.label}: {_describe(run)}")
                raw = raws[era]
                ceiling = watched_run(raw, ceiling_load(raw, pair[0].workload), connections, plan.seconds, plan.warmup)
                log(f"  {workload.name:8} {era} c={connections:<3} raw ASGI ceiling: {_describe(ceiling)}")
                runs["ceiling"] = [ceiling]
                cells.append({"era": era, "concurrency": connections, "runs": runs})
    return {
        "workload": workload.name,
        "title": workload.title,
        "ours_catalog": workload.ours_catalog,
        "bare_catalog": workload.bare_catalog,
        "idle_rss_mb": idle,
        "parity": parity,
        "cells": cells,
    }


def _start_pair(
    workload: Workload, plan: Plan, data_dir: Path, api_key: str, stack: ExitStack
) -> dict[str, tuple[Target, Target]]:
    """Both servers started (and registered for stopping), and how to call each in each era."""
    ours = Server(
        "ours", OURS_APP, {**django_env(data_dir), **({"MCP_BENCH_OTEL": "1"} if workload.telemetry else {})}, data_dir
    )
    stack.callback(ours.stop)
    if workload.baseline == "http":  # the baseline is our own process, the same view called over HTTP
        ours.start()
        api = ours.url.removesuffix("/mcp") + "/api/"  # django-oauth-toolkit checks the audience by URL prefix
        token = "Bearer " + user_token(data_dir, [ours.url, api], "mcp library:read")
        # The same process under the baseline's label (stopping either stops it).
        direct = dataclasses.replace(ours, label="bare")
        return {
            era: (Target(ours, workload, era, token), Target(direct, workload, era, token, over_http=True))
            for era in plan.eras
        }
    bare_token = secrets.token_urlsafe(32)
    bare_env = {
        "BENCH_BARE_CATALOG": workload.bare_catalog,
        "BENCH_DB": str(data_dir / "demo.sqlite3"),
        "BENCH_TOKEN": bare_token,
    }
    if workload.bare_catalog == "orm":  # the bare server reads through Django's ORM with our settings
        bare_env.update(django_env(data_dir))
    bare = Server("bare", BARE_APP, bare_env, data_dir, cpu=LOAD_CPU if workload.gateway else SERVER_CPU)
    bare.env["BENCH_RESOURCE"] = bare.url
    stack.callback(bare.stop)
    bare.start()  # the bare server first: a gateway workload registers it before ours starts
    if workload.gateway:
        _django(data_dir, "-m", "bench.catalogs", "gateway", bare.url)
    ours.start()
    ours_auth: str | None = "Bearer " + api_key
    bare_auth: str | None = None
    if workload.oauth:
        ours_auth = "Bearer " + oauth_token(ours.url.removesuffix("/mcp"), data_dir, ours.url)
        bare_auth = "Bearer " + bare_token
    gateway = workload.as_gateway()
    return {era: (Target(ours, gateway, era, ours_auth), Target(bare, workload, era, bare_auth)) for era in plan.eras}


def _start_ceiling(workload: Workload, ours: Target, data_dir: Path, stack: ExitStack) -> Server:
    """The raw ASGI app (bench/raw_app.py), started (and registered for stopping) with our server's own
    answer to the workload's first request in `ours`'s era (JSON in 2026-07-28, SSE in 2025-11-25)."""
    reply = protocol.post(ours.server.url, ours.bodies()[0], ours.request_headers())
    body_path = data_dir / f"ceiling-{workload.name}-{ours.era}.body"
    body_path.write_bytes(reply.body)
    raw = Server(
        "raw", RAW_APP, {"BENCH_RAW_BODY": str(body_path), "BENCH_RAW_CONTENT_TYPE": reply.content_type}, data_dir
    )
    stack.callback(raw.stop)
    raw.start()
    return raw


def _compare_and_warm_up(
    workload: Workload, targets: dict[str, tuple[Target, Target]], warmup: int, log: Callable[[str], None]
) -> list[dict[str, Any]]:
    """Both servers must give the same answer (tools, or the row): a mismatch is logged and kept."""
    parity = []
    for era, pair in targets.items():
        ours_first, bare_first = (comparable(workload, check_answers(target)[0]) for target in pair)
        equal = ours_first == bare_first
        if not equal:
            log(f"  ! {workload.name} {era}: the two servers' answers differ (see parity in the JSON)")
        parity.append({"era": era, "equal": equal, **({} if equal else {"ours": ours_first, "bare": bare_first})})
        for target in pair:
            warm_up(target, warmup)
    return parity


def _describe(run: dict[str, Any]) -> str:
    noise = run["other_load_percent"]
    return (
        f"{run['rps']:8.1f} req/s  p50 {run['p50_ms']:.2f} ms  p99 {run['p99_ms']:.2f} ms  "
        f"{run['cpu_us_per_req'] or 0:.0f} µs CPU/req  failures {run['failures']}"
        + (f"  (other load on the server core {noise:.0f}%)" if noise > NOISY_PERCENT else "")
    )
