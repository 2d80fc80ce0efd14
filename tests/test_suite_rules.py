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


def test_a_modules_tests_share_a_worker_and_the_services_tests_share_one_group() -> None:
    """What `SuiteScheduling` sends to a worker as one unit, read from node ids (tests/scheduling.py): a module,
    or the `services` group, which a module-level `pytestmark` or a decorator puts a test in."""
    from .scheduling import SERVICES_GROUP, SuiteScheduling, suite_group

    gateway = (
        "tests/test_upstream_gateway.py::test_an_upstream_behind_oauth_client_credentials_is_called_with_its_own_token"
    )
    assert suite_group(f"{gateway}[auto]") == suite_group(f"{gateway}[legacy]") == "tests/test_upstream_gateway.py"
    assert suite_group("tests/test_faults.py::test_redis_frozen_and_thawed") == SERVICES_GROUP  # by pytestmark
    postgres = "tests/test_migrations.py::test_postgresql_drops_and_restores_the_index_and_its_like_twin"
    assert suite_group(postgres) == SERVICES_GROUP  # by its decorator
    assert suite_group("tests/test_migrations.py::test_migrating_back_syncs_no_rows_into_an_older_schema") == (
        "tests/test_migrations.py"
    )
    assert SuiteScheduling._split_scope(object.__new__(SuiteScheduling), f"{gateway}[legacy]") == suite_group(gateway)
