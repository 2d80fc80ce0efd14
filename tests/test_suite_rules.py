"""The suite's own rules (docs/contributing.md, the budget): a test module that starts a real process says why.

A real process (a server, a worker, a command, a browser, a Node client, a service) is the most expensive thing a
test can do; the whole command has 30 minutes. Processes belong where they are the subject, and the module's
docstring says which.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .live import process_starters

ROOT = Path(__file__).resolve().parent.parent
TEST_MODULES = sorted([*ROOT.glob("tests/**/test_*.py"), *ROOT.glob("project/*/tests/test_*.py")])
# A docstring that says why names what makes the process the subject.
WHY_WORDS = ("process", "uvicorn", "gunicorn", "browser", "chromium", "live", "real ", "worker", "node")


@pytest.mark.parametrize("module", TEST_MODULES, ids=lambda path: str(path.relative_to(ROOT)))
def test_a_module_that_starts_a_real_process_says_why(module: Path) -> None:
    tree = ast.parse(module.read_text())
    starters = process_starters(module)
    if not starters:
        return
    docstring = (ast.get_docstring(tree) or "").lower()
    assert any(word in docstring for word in WHY_WORDS), (
        f"{module.relative_to(ROOT)} starts real processes ({', '.join(sorted(starters))}) and its docstring does "
        "not say why: say which processes are the subject (docs/contributing.md, the budget)."
    )


def test_the_rule_sees_the_modules_that_start_processes() -> None:
    """The rule reads the suite as it is: the modules known to start servers, workers and browsers are seen."""
    seen = {path.name for path in TEST_MODULES if process_starters(path)}
    assert {"test_processes.py", "test_scale.py", "test_tasks.py", "test_pages.py", "test_commands.py"} <= seen
