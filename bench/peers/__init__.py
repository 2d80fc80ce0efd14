"""The peer MCP servers the bench compares ours against, each from its own pinned virtualenv.

Standard library only: this module is imported by the bench's own interpreter, never by a peer's. Each peer is
an ASGI app under uvicorn, started with cwd (and so `sys.path[0]`) = `app_dir`, the peer's venv python, and
`env` plus BENCH_PEER_PROFILE (two | many | calls), BENCH_PEER_DATA (a writable directory) and
PYTHONPATH = COMMON_DIR (the shared modules in common/) from the runner.
See README.md beside this file.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..toolspec import ECHO_TOOL

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements"
# The peers' shared tool and Django settings modules (bench_peer_tools, bench_peer_settings): the runner puts
# this directory on every peer's PYTHONPATH (after its cwd).
COMMON_DIR = HERE / "common"
BASE_PYTHON = "/usr/bin/python3"

LEGACY = "2025-11-25"
MODERN = "2026-07-28"

# The one setup step every Django peer needs: its tables (auth, contenttypes, sessions) in the SQLite file under
# BENCH_PEER_DATA. Idempotent, so it may run before every start.
_MIGRATE: tuple[tuple[str, ...], ...] = (("-m", "django", "migrate", "--noinput", "-v", "0"),)


_PLAIN_NAMES = {"echo": "echo", "get_book": "get_book", "many": "tool_{:03d}"}


@dataclass(frozen=True)
class Peer:
    name: str
    title: str
    venv: str
    app: str
    app_dir: Path
    env: dict[str, str]
    eras: tuple[str, ...]
    stateful: bool
    does_less: str
    setup: tuple[tuple[str, ...], ...] = ()
    tool_names: dict[str, str] = field(default_factory=lambda: dict(_PLAIN_NAMES))
    path: str = "/mcp"  # the MCP endpoint's path
    # The peer workloads (bench/peer_run.PEER_WORKLOADS) it serves: a proxy serves only the proxied call.
    workloads: tuple[str, ...] = ("list2", "list200", "echo")
    version: str = field(default="", compare=False)  # the library's pinned version, for the report


def _django_peer(name: str, project: str, eras: tuple[str, ...], title: str, does_less: str, version: str) -> Peer:
    """A Django peer: venv `name`, app_dir `name` with `_`, `<project>.settings` and `<project>.asgi`, migrated."""
    return Peer(
        name,
        title,
        name,
        f"{project}.asgi:application",
        HERE / name.replace("-", "_"),
        {"DJANGO_SETTINGS_MODULE": f"{project}.settings"},
        eras,
        False,
        does_less,
        _MIGRATE,
        version=version,
    )


_FASTMCP = Peer(
    name="fastmcp-stateless-json",
    title="fastmcp 4.2.3, stateless JSON",
    venv="fastmcp",
    app="app:app",
    app_dir=HERE / "fastmcp_server",
    env={"BENCH_FASTMCP_MODE": "stateless-json"},
    eras=(MODERN, LEGACY),
    stateful=False,
    does_less=(
        "A standalone Starlette app with in-code tools: no authentication, no per-key tool grants or "
        "enable/disable, no usage log or admin, no database; stateless, so no SSE stream or session."
    ),
    version="fastmcp 4.2.3 (mcp 2.3.0)",
)

PEERS: dict[str, Peer] = {
    peer.name: peer
    for peer in (
        _FASTMCP,
        replace(
            _FASTMCP,
            name="fastmcp-stateful-sse",
            title="fastmcp 4.2.3, stateful SSE",
            env={"BENCH_FASTMCP_MODE": "stateful-sse"},
            stateful=True,
            does_less=(
                "A standalone Starlette app with in-code tools and in-memory sessions (lost on restart, one "
                "process only): no authentication, no per-key tool grants, no usage log or admin, no database."
            ),
        ),
        replace(
            _FASTMCP,
            name="fastmcp-proxy",
            title="fastmcp 4.2.3, its proxy, stateless JSON",
            env={"BENCH_FASTMCP_MODE": "proxy"},
            workloads=("proxy",),
            tool_names={**_PLAIN_NAMES, "echo": ECHO_TOOL},  # the upstream's own name, as it proxies it
            does_less=(
                "fastmcp's proxy (`create_proxy`) in front of the same bare upstream as our gateway, mirroring "
                "the caller's era: no authentication, no per-key grants, no review or approval of upstream tools, "
                "no bounded reader of their definitions, no breaker, no usage log."
            ),
        ),
        _django_peer(
            "django-mcp-server",
            "dms_project",
            (LEGACY,),
            "django-mcp-server 0.5.7, stateless",
            "Tools are code in the Django process behind one DRF view (here with no authentication classes): "
            "no per-key tool grants or enable/disable, no usage log, no SSE (JSON answers only), and only the "
            "pre-2026 protocol through mcp 1.x.",
            "django-mcp-server 0.5.7 (mcp 1.30.0, Django 5.2.19)",
        ),
        _django_peer(
            "django-stateless-mcp",
            "dsm_project",
            (MODERN, LEGACY),
            "django-stateless-mcp 0.1.11",
            "A Django view around the mcp SDK's stateless transport with tools in code (auth only if a token "
            "verifier is passed, none here): no per-key tool grants or enable/disable, no usage log or admin, "
            "no sessions and no SSE except subscriptions/listen.",
            "django-stateless-mcp 0.1.11 (mcp 2.3.0, Django 5.2.19)",
        ),
        _django_peer(
            "drf-mcp-server",
            "drf_project",
            (MODERN, LEGACY),
            "djangorestframework-mcp-server 0.54.0, sessionless",
            "drf-services selectors registered in code, served by its async viewset with AllowAnyBackend "
            "and no per-tool permissions (as run here): no usage log or admin-managed catalog, and with "
            "sessions off no GET SSE stream.",
            "djangorestframework-mcp-server 0.54.0 (Django 5.2.19, DRF 3.18.3)",
        ),
    )
}


def _digest(requirements: Path) -> str:
    return hashlib.sha256(f"{BASE_PYTHON}\n".encode() + requirements.read_bytes()).hexdigest()


def ensure_venv(peer_or_key: Peer | str, root: Path) -> Path:
    """The python of `root/<venv>`, created and installed from requirements/<venv>.txt if missing or stale.

    A venv is (re)built when it has no python or when the hash of its requirements file differs from the one
    stored in the venv after the last successful install. Progress goes to stderr; stdin is never read.
    """
    key = peer_or_key.venv if isinstance(peer_or_key, Peer) else peer_or_key
    requirements = REQUIREMENTS / f"{key}.txt"
    if not requirements.is_file():
        raise FileNotFoundError(f"no requirements file for venv {key!r}: {requirements}")
    venv = Path(root).absolute() / key
    python = venv / "bin" / "python"
    stamp = venv / ".bench-requirements.sha256"
    wanted = _digest(requirements)
    if python.exists() and stamp.is_file() and stamp.read_text().strip() == wanted:
        return python

    def say(message: str) -> None:
        print(f"[bench.peers] {message}", file=sys.stderr, flush=True)

    if venv.exists():
        say(f"{key}: requirements changed or install incomplete, rebuilding {venv}")
        shutil.rmtree(venv)
    else:
        say(f"{key}: creating {venv}")
    venv.parent.mkdir(parents=True, exist_ok=True)
    quiet = {"stdin": subprocess.DEVNULL}
    subprocess.run([BASE_PYTHON, "-m", "venv", str(venv)], check=True, **quiet)
    say(f"{key}: pip install -r {requirements.relative_to(HERE.parent.parent)}")
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-input", "-r", str(requirements)],
        env=env,
        capture_output=True,
        text=True,
        **quiet,
    )
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        raise RuntimeError(f"pip install for peer venv {key!r} failed:\n{tail}")
    stamp.write_text(wanted + "\n")
    say(f"{key}: ready ({python})")
    return python


__all__ = ["COMMON_DIR", "LEGACY", "MODERN", "PEERS", "Peer", "ensure_venv"]
