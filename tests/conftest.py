from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_expose.declare.registry import CapabilityRegistry
from mcp_expose.declare.registry import registry as global_registry

from .live import LIVE_SETTINGS, LiveServer, prepare_demo, process_starters, run_server
from .scheduling import SERVICES_GROUP, SuiteScheduling, suite_group

# scripts/test runs the suite on two xdist workers with `--dist loadgroup --no-loadscope-reorder`, scheduled by
# `tests/scheduling.py`: a module's tests stay on one worker, so that its module-scoped servers and databases are
# made once, and the tests that drive the machine's shared PostgreSQL and Redis, or inject faults into servers of
# their own, form one group: they run one after another, never beside each other, whatever else runs on the other
# worker.


def _group(item: pytest.Item) -> str:
    return suite_group(item.nodeid)


@pytest.hookimpl(optionalhook=True)  # without xdist (`-p no:xdist`) there is no such hook
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Our grouping for `--dist loadgroup` (xdist's own reads markers through node ids that pytest 9.2 keeps
    apart); None leaves any other mode to xdist."""
    return SuiteScheduling(config, log) if config.getoption("dist") == "loadgroup" else None


class LongestFirst:
    """The groups in the order xdist hands them out (`--no-loadscope-reorder`): longest first, so that no long
    group starts last and leaves the other worker idle. The services group, then the modules that start real
    processes, then the rest in pytest-django's order (database tests before transactional ones), whose many short
    tests fill the gaps at the end."""

    @pytest.hookimpl(trylast=True)  # after pytest-django's own ordering
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        rank: dict[str, int] = {}
        for item in items:
            group = _group(item)
            item_rank = 0 if group == SERVICES_GROUP else 1 if process_starters(Path(item.path)) else 2
            rank[group] = min(rank.get(group, item_rank), item_rank)
        items.sort(key=lambda item: rank[_group(item)])  # stable: each group keeps its own order


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(LongestFirst(), "mcp-expose-suite-order")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def registry() -> CapabilityRegistry:
    """A fresh registry, so a test's declarations stay its own."""
    return CapabilityRegistry()


@pytest.fixture
def restore_global_registry() -> Iterator[CapabilityRegistry]:
    before = global_registry.snapshot()
    yield global_registry
    global_registry.restore(before)


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A migrated, seeded demo database shared by the read-mostly live tests, and the admin's API key."""
    data_dir = tmp_path_factory.mktemp("demo")
    return data_dir, prepare_demo(data_dir)


@pytest.fixture(scope="session")
def demo_server(demo_data: tuple[Path, str]) -> Iterator[LiveServer]:
    with run_server(demo_data[0]) as server:
        yield server


@pytest.fixture(scope="session")
def admin_key(demo_data: tuple[Path, str]) -> str:
    return demo_data[1]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh demo database for one test module that changes state."""
    data_dir = tmp_path_factory.mktemp("module")
    prepare_demo(data_dir)
    return data_dir


@pytest.fixture(scope="module")
def server(data: Path) -> Iterator[LiveServer]:
    """A live server on that database, with the test settings (toolbox tools, switches)."""
    with run_server(data, **LIVE_SETTINGS) as live:
        yield live


@pytest.fixture(scope="module")
def key(data: Path) -> str:
    """The demo administrator's API key in that database."""
    return (data / "demo-api-key.txt").read_text().strip()


@pytest.fixture
def short_busy_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Connections opened from now on wait 0.1 s for a lock instead of the settings' 20 s."""
    from django.db import connection

    monkeypatch.setitem(connection.settings_dict["OPTIONS"], "timeout", 0.1)


@pytest.fixture
def write_lock(short_busy_timeout: None) -> Iterator[sqlite3.Connection]:
    """The test database's write lock, held by another connection until the test releases it."""
    from django.db import connection

    holder = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield holder
    finally:
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        holder.close()


@pytest.fixture
def spill_dir(tmp_path: Path, settings: object, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Usage rows spilled to disk go to the test's own directory, through a spill of the test's own."""
    from mcp_expose.calls import usage_spill

    directory = tmp_path / "usage-spill"
    settings.MCP_EXPOSE = {**getattr(settings, "MCP_EXPOSE", {}), "USAGE_SPILL_DIR": str(directory)}
    fresh = usage_spill.Spill()
    monkeypatch.setattr(usage_spill, "spill", fresh)
    yield directory
    fresh.close()
