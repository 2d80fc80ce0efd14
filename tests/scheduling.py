"""Which tests share an xdist worker, told from their node ids alone (the controller has no items to ask).

A module's tests run on one worker, in their order, so that its module-scoped servers and data directories are made
once and a test may build on the one before it. The tests marked `scale` or `outage` form one `services` group
whatever their module: they drive the machine's shared PostgreSQL and Redis, or stop and freeze servers of their
own, so they run one after another, never beside each other.

xdist's own `--dist loadgroup` reads `xdist_group` markers through a node id suffix that pytest 9.2 no longer
lets it set: each test was then sent alone, a module's tests could run on both workers, and the services tests
side by side. `SuiteScheduling` groups by reading the test modules' source instead (`tests/conftest.py` installs
it for `--dist loadgroup`).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling

ROOT = Path(__file__).resolve().parent.parent
SERVICES_GROUP = "services"
SERVICES_MARKERS = frozenset({"scale", "outage"})


def suite_group(nodeid: str) -> str:
    """The group of the test at `nodeid`: `services`, or its module's path."""
    path, _, rest = nodeid.partition("::")
    test = rest.split("::")[-1].split("[")[0]
    return SERVICES_GROUP if test in services_tests(path) else path


@functools.cache
def services_tests(path: str) -> frozenset[str]:
    """The test functions of the module at `path` (relative to the repository) marked `scale` or `outage`, by a
    decorator or by the module's `pytestmark`."""
    module = ROOT / path
    if module.suffix != ".py" or not module.is_file():
        return frozenset()
    tree = ast.parse(module.read_text())
    whole_module = any(
        isinstance(node, ast.Assign)
        and any(isinstance(target, ast.Name) and target.id == "pytestmark" for target in node.targets)
        and _marks(node.value)
        for node in tree.body
    )
    return frozenset(
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test")
        and (whole_module or any(_marks(decorator) for decorator in node.decorator_list))
    )


def _marks(node: ast.AST) -> bool:
    """Whether `node` (a decorator, or a `pytestmark` value) names `pytest.mark.scale` or `pytest.mark.outage`."""
    return any(
        isinstance(part, ast.Attribute)
        and part.attr in SERVICES_MARKERS
        and isinstance(part.value, ast.Attribute)
        and part.value.attr == "mark"
        for part in ast.walk(node)
    )


class SuiteScheduling(LoadScopeScheduling):
    """Whole groups to a worker, in the order of the collection (`--no-loadscope-reorder` keeps the longest first,
    as `tests/conftest.py` sorts them)."""

    def _split_scope(self, nodeid: str) -> str:
        return suite_group(nodeid)
