"""The reference pages list exactly what the code has: every setting, system check, management command and tool
error code, each under a heading of its own (which is also the anchor other pages link to).

The lists are read from the code itself: the keys of `DEFAULTS`, the check ids written anywhere in the package,
the command modules, and the error codes in the source (class attributes `code = "..."`, and the literal codes
the dispatcher and its helpers answer with), so a new one without its entry fails here, and so does an entry whose
code is gone.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from mcp_expose.core.conf import ADVANCED_DEFAULTS, DEFAULTS

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "mcp_expose"
REFERENCE = ROOT / "docs" / "reference"
CHECK_ID = re.compile(r"\bmcp_expose\.[EW]\d{3}\b")
# Calls whose argument is an error code the client (or the usage log) receives: (callable name, its position).
# Another module's `_refused` takes a reason there instead; an error code is always one snake_case word.
CODE_ARGUMENTS = {"ToolFailure": 0, "TaskRefused": 0, "_refused": 1}
CODE = re.compile(r"[a-z]+(?:_[a-z]+)*")


def headings(page: str, level: int) -> set[str]:
    """The names of a reference page's headings of `level` that are exactly one name in backticks."""
    pattern = re.compile(rf"^{'#' * level} `([^`]+)`[ \t]*$", re.M)
    return set(pattern.findall((REFERENCE / page).read_text()))


def package_sources() -> dict[Path, str]:
    return {path: path.read_text() for path in sorted(PACKAGE.rglob("*.py")) if "migrations" not in path.parts}


def check_ids() -> set[str]:
    return {check_id for source in package_sources().values() for check_id in CHECK_ID.findall(source)}


def command_names() -> set[str]:
    folders = [PACKAGE / "management" / "commands", *sorted(ROOT.glob("project/*/management/commands"))]
    return {path.stem for folder in folders for path in folder.glob("*.py") if not path.stem.startswith("_")}


def _string(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _called_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _codes_in(tree: ast.AST) -> set[str]:
    found: set[str | None] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for statement in node.body:
                if isinstance(statement, ast.Assign) and any(
                    isinstance(target, ast.Name) and target.id == "code" for target in statement.targets
                ):
                    found.add(_string(statement.value))
                elif (
                    isinstance(statement, ast.AnnAssign)
                    and isinstance(statement.target, ast.Name)
                    and statement.target.id == "code"
                ):
                    found.add(_string(statement.value))
        elif isinstance(node, ast.Call) and (position := CODE_ARGUMENTS.get(_called_name(node) or "")) is not None:
            keyword = next((k.value for k in node.keywords if k.arg == "code"), None)
            code = _string(keyword) if keyword is not None else _string(_at(node.args, position))
            found.add(code if code is not None and CODE.fullmatch(code) else None)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            found.update(_assigned_codes(node))
    return {code for code in found if code}


def _at(values: list[ast.expr], position: int) -> ast.expr | None:
    return values[position] if len(values) > position else None


def _assigned_codes(node: ast.Assign | ast.AnnAssign) -> set[str | None]:
    """`STATUS_CODES = {405: "method_not_allowed", ...}`, and `record.error_code = "..."` (alone or in a tuple)."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    found: set[str | None] = set()
    for target in targets:
        if isinstance(target, ast.Name) and target.id == "STATUS_CODES" and isinstance(node.value, ast.Dict):
            found.update(_string(value) for value in node.value.values)
        elif isinstance(target, ast.Attribute) and target.attr == "error_code":
            found.add(_string(node.value))
        elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
            found.update(
                _string(value)
                for element, value in zip(target.elts, node.value.elts, strict=False)
                if isinstance(element, ast.Attribute) and element.attr == "error_code"
            )
    return found


def error_codes() -> set[str]:
    return {code for source in package_sources().values() for code in _codes_in(ast.parse(source))}


def test_every_setting_has_its_heading_and_every_heading_is_a_setting() -> None:
    documented = headings("settings.md", 3)
    every = set(DEFAULTS) | set(ADVANCED_DEFAULTS)
    assert sorted(every - documented) == [], "settings missing from docs/reference/settings.md"
    assert sorted(documented - every) == [], "headings in docs/reference/settings.md that are no setting"


def test_a_deployment_chooses_among_at_most_48_settings_and_the_tuning_knobs_are_documented_apart() -> None:
    """What a deployment sets is the top level of MCP_EXPOSE; the tuning knobs are one of its keys, ADVANCED."""
    assert len(DEFAULTS) <= 48 and "ADVANCED" in DEFAULTS
    assert not set(DEFAULTS) & set(ADVANCED_DEFAULTS)
    page = (REFERENCE / "settings.md").read_text()
    advanced = page[page.index("## Advanced: `ADVANCED`") : page.index("## Other Django settings")]
    assert {name for name in ADVANCED_DEFAULTS if f"### `{name}`" in advanced} == set(ADVANCED_DEFAULTS)
    assert not [name for name in DEFAULTS if name != "ADVANCED" and f"### `{name}`" in advanced]


def test_every_check_id_has_its_heading_and_every_heading_is_a_check() -> None:
    ids = check_ids()
    assert {"mcp_expose.E001", "mcp_expose.W015"} <= ids, ids  # the scan found the checks at all
    documented = headings("checks.md", 3)
    assert sorted(ids - documented) == [], "check ids missing from docs/reference/checks.md"
    assert sorted(documented - ids) == [], "headings in docs/reference/checks.md that are no check id"


def test_every_command_has_its_section_and_every_section_is_a_command() -> None:
    commands = command_names()
    assert {"mcp_sync", "mcp_stdio", "demo"} <= commands, commands
    documented = headings("commands.md", 2)
    assert sorted(commands - documented) == [], "commands missing from docs/reference/commands.md"
    assert sorted(documented - commands) == [], "sections in docs/reference/commands.md that are no command"


def test_every_error_code_has_its_heading_and_every_heading_is_a_code() -> None:
    codes = error_codes()
    # One of each way a code is written: a class attribute, a literal answer, the view statuses, the usage log.
    assert {"tool_error", "view_refused", "internal", "method_not_allowed", "stale_confirmation"} <= codes, codes
    documented = headings("errors.md", 3)
    assert sorted(codes - documented) == [], "error codes missing from docs/reference/errors.md"
    assert sorted(documented - codes) == [], "headings in docs/reference/errors.md that are no error code"


def table_rows_with_other_cell_counts(text: str) -> list[tuple[int, int, int]]:
    """Each table row whose cell count differs from its header's, as the docs site's Markdown engine splits cells
    (`|` inside a code span is text; a bare one between code spans is a column break): (line, header, row)."""
    import markdown

    splitter = markdown.Markdown(extensions=["tables"]).parser.blockprocessors["table"]
    splitter.border = True  # every table in the docs starts its rows with `|`
    found, header, in_fence = [], None, False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        if in_fence or not line.lstrip().startswith("|"):
            header = None
            continue
        cells = len(splitter._split_row(line.strip()))
        if header is None:
            header = cells
        elif cells != header:
            found.append((number, header, cells))
    return found


def test_every_table_row_has_as_many_cells_as_its_header() -> None:
    wrong = {
        f"{path.relative_to(ROOT)}:{line}": f"{cells} cells under a header of {header}"
        for path in sorted((ROOT / "docs").rglob("*.md"))
        for line, header, cells in table_rows_with_other_cell_counts(path.read_text())
    }
    assert wrong == {}, "Write 'or' in prose, or keep `|` inside one code span: " + repr(wrong)


def test_the_row_check_sees_a_bare_bar_between_code_spans() -> None:
    table = "| Name | Type |\n|---|---|\n| `a` | `str | None` |\n| `b` | list of `str` | `None` |\n"
    assert table_rows_with_other_cell_counts(table) == [(4, 2, 3)]


def test_every_inspector_command_in_the_docs_pins_the_version_the_tests_run() -> None:
    """An unpinned `npx` runs whatever its cache holds (an old Inspector refuses the arguments), and without
    `--yes` it asks before installing, which fails without a terminal."""
    import json

    pinned = json.loads((ROOT / "tests" / "clients" / "package.json").read_text())["dependencies"]
    expected = f"npx --yes @modelcontextprotocol/inspector@{pinned['@modelcontextprotocol/inspector']}"
    commands = [
        f"{path.relative_to(ROOT)}: {line.strip()}"
        for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
        for line in path.read_text().splitlines()
        if re.search(r"\bnpx\b.*@modelcontextprotocol/inspector", line)
    ]
    assert commands, "the docs show how to run the Inspector"
    assert [command for command in commands if expected not in command] == []
