"""The suite's own rules (docs/contributing.md, the budget): a test module that starts a real process says why.

A real process (a server, a worker, a command, a browser, a Node client, a service) is the most expensive thing a
test can do; the whole command has 30 minutes. Processes belong where they are the subject, and the module's
docstring says which.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEST_MODULES = sorted([*ROOT.glob("tests/**/test_*.py"), *ROOT.glob("project/*/tests/test_*.py")])
# What starts a real process in this suite: the helpers of tests/live.py, tests/upstream_servers.py,
# tests/services.py and the browser tests, and the standard library's own.
PROCESS_STARTERS = {
    "run_server",
    "start_server",
    "run_demo",
    "start_demo",
    "run_upstream",
    "run_worker",
    "start_worker",
    "manage",
    "Popen",
    "redis_server",
    "PostgresCluster",
    "runpytest_subprocess",
    "launch",
}
# A docstring that says why names what makes the process the subject.
WHY_WORDS = ("process", "uvicorn", "gunicorn", "browser", "chromium", "live", "real ", "worker", "node")


def starts_processes(tree: ast.Module) -> set[str]:
    called = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            function = node.func
            name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", None)
            if name in PROCESS_STARTERS:
                called.add(name)
    return called


@pytest.mark.parametrize("module", TEST_MODULES, ids=lambda path: str(path.relative_to(ROOT)))
def test_a_module_that_starts_a_real_process_says_why(module: Path) -> None:
    tree = ast.parse(module.read_text())
    starters = starts_processes(tree)
    if not starters:
        return
    docstring = (ast.get_docstring(tree) or "").lower()
    assert any(word in docstring for word in WHY_WORDS), (
        f"{module.relative_to(ROOT)} starts real processes ({', '.join(sorted(starters))}) and its docstring does "
        "not say why: say which processes are the subject (docs/contributing.md, the budget)."
    )


def test_the_rule_sees_the_modules_that_start_processes() -> None:
    """The rule reads the suite as it is: the modules known to start servers, workers and browsers are seen."""
    seen = {path.name for path in TEST_MODULES if starts_processes(ast.parse(path.read_text()))}
    assert {"test_processes.py", "test_scale.py", "test_tasks.py", "test_pages.py", "test_commands.py"} <= seen
