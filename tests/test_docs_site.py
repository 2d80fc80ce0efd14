"""The README and the docs site keep their promises: a one-screen README whose links lead somewhere, and pictures
that the browser tests take.

tests/browser/test_pages.py saves the screenshots into docs/images/ with `Tab.picture(name)` on every run, so a page
that changes changes its picture; a picture no test takes would go stale unnoticed, and one no page shows is dead
weight. The site itself is checked by `mkdocs build --strict` (scripts/test): links, anchors and API references.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
IMAGES = DOCS / "images"
SHOWN = re.compile(r"!\[[^\]]*\]\(((?:\.\./)*images/([\w-]+)\.png)\)")
TAKEN = re.compile(r"""\.picture\(\s*["']([\w-]+)["']""")
README = ROOT / "README.md"
# [text](target): the README's links, relative ones to files in the repository.
LINK = re.compile(r"\]\(([^)\s]+)\)")


def shown_pictures() -> dict[str, list[str]]:
    """Each picture's name, and the pages that show it."""
    shown: dict[str, list[str]] = {}
    for page in sorted(DOCS.glob("**/*.md")):
        for _link, name in SHOWN.findall(page.read_text()):
            shown.setdefault(name, []).append(str(page.relative_to(DOCS)))
    return shown


def taken_pictures() -> set[str]:
    return {name for test in (ROOT / "tests" / "browser").glob("test_*.py") for name in TAKEN.findall(test.read_text())}


def test_every_picture_the_docs_show_is_taken_by_a_browser_test() -> None:
    shown = shown_pictures()
    assert len(shown) >= 9, shown  # the pages the docs promise pictures of; fewer means the scan broke
    not_taken = {name: pages for name, pages in shown.items() if name not in taken_pictures()}
    assert not_taken == {}, f"pictures no browser test takes: {not_taken}"


def test_every_picture_a_browser_test_takes_is_shown_and_committed() -> None:
    shown = shown_pictures()
    for name in taken_pictures():
        assert name in shown, f"docs/images/{name}.png is taken by a browser test but no page shows it"
        assert (IMAGES / f"{name}.png").is_file(), f"docs/images/{name}.png is missing: run the browser tests"
    stray = {path.stem for path in IMAGES.glob("*.png")} - taken_pictures()
    assert stray == set(), f"pictures in docs/images/ that no test takes: {stray}"


def test_the_readme_fits_on_a_screen_and_opens_with_the_two_commands() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 150, f"the README has {len(lines)} lines: move the detail into docs/"
    opening = "\n".join(lines[:12])
    assert "manage.py demo" in opening and "bash scripts/test" in opening
    assert "exec bash scripts/test" in (ROOT / ".ci" / "run").read_text()  # CI runs the README's command


def test_every_link_in_the_readme_leads_to_a_file_that_exists() -> None:
    targets = [target for target in LINK.findall(README.read_text()) if "://" not in target]
    assert len(targets) >= 20, targets  # the feature list links into the docs
    missing = [target for target in targets if not (ROOT / target.split("#")[0]).exists()]
    assert missing == [], f"README links to files that do not exist: {missing}"
