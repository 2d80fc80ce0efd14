"""What users import keeps working: every `mcp_expose` name the README and docs/ show, and the package API.

The names are read from the documents themselves, so a page that shows a path the code no longer has fails here.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import mcp_expose
from mcp_expose.core import telemetry

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
# `from mcp_expose.x import a, b` (also wrapped in parentheses over several lines), and any dotted `mcp_expose.x.y`.
IMPORT = re.compile(r"^\s*from (mcp_expose[\w.]*) import \(?([\w, \n]+?)\)?\s*$", re.M)
DOTTED = re.compile(r"(?<![\w.])(mcp_expose(?:\.\w+)+)")
CHECK_ID = re.compile(r"mcp_expose\.[EW]\d{3}$")
LOGGER = re.compile(r"""getLogger\(["'](mcp_expose[\w.]*)["']\)""")


def logger_names() -> set[str]:
    """The loggers the code writes to: the docs name them as dotted paths, which need not be modules."""
    package = Path(mcp_expose.__file__).parent
    return {name for path in package.rglob("*.py") for name in LOGGER.findall(path.read_text())}


def shown_names() -> set[str]:
    names: set[str] = set()
    for document in DOCUMENTS:
        text = document.read_text()
        for module, imported in IMPORT.findall(text):
            names.update(f"{module}:{name}" for name in re.split(r"[\s,]+", imported) if name)
        names.update(DOTTED.findall(text))
    # Check ids, logger names and the names of spans, metrics and attributes are dotted too, and no import path.
    return {
        name
        for name in names
        if not CHECK_ID.match(name) and name not in logger_names() and name not in telemetry.NAMES
    }


def resolve(name: str) -> object:
    """`module:attribute`, or a dotted path: its longest importable prefix, then attributes."""
    if ":" in name:
        module, attribute = name.split(":")
        return getattr(importlib.import_module(module), attribute)
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            value = getattr(value, attribute)
        return value
    raise ModuleNotFoundError(name)


def test_the_documents_show_the_public_paths() -> None:
    names = shown_names()
    # What the README's setup shows: were the scan to stop finding these, the test below would prove nothing.
    assert {
        "mcp_expose.asgi:get_asgi_application",
        "mcp_expose.oauth.settings:oauth2_provider_settings",
        "mcp_expose.oauth.urls",
        "mcp_expose.access_log.StripQueryStrings",
        "mcp_expose.outbound.mcp_client",
        "mcp_expose.usage_writer.status",
        "mcp_expose.tool",
        "mcp_expose.expose_view",
        "mcp_expose.ModelTools",
    } <= names


@pytest.mark.parametrize("name", sorted(shown_names()))
def test_every_name_the_documents_show_imports(name: str) -> None:
    assert resolve(name) is not None


@pytest.mark.parametrize("name", mcp_expose.__all__)
def test_every_name_of_the_package_api_resolves(name: str) -> None:
    value = getattr(mcp_expose, name)
    assert value is not None
    if name != "__version__" and name != "PROTOCOL_VERSIONS":
        # The package hands out the object its layer defines, not a copy.
        assert getattr(importlib.import_module(value.__module__), name) is value


def test_a_name_the_package_does_not_have_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        mcp_expose.nothing_here  # noqa: B018
