"""The pytest plugin, registered by the `pytest11` entry point: inactive until a project enables it.

pytest loads this module in every project that has the package installed, so it only adds the switches;
the fixtures (`mcp_expose.testing.fixtures`) are registered once a project turns them on, with
`mcp_expose = true` in its pytest configuration or `--mcp-expose` on the command line. Nothing here imports
Django: pytest-django sets it up later.
"""

from __future__ import annotations

import pytest

INI_OPTION = "mcp_expose"
FIXTURES = "mcp_expose.testing.fixtures"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        INI_OPTION, type="bool", default=False, help="Provide mcp_expose's MCP test fixtures (mcp_client, mcp_live)."
    )
    parser.getgroup("mcp_expose").addoption(
        "--mcp-expose",
        action="store_true",
        dest="mcp_expose",
        default=False,
        help="Provide mcp_expose's MCP test fixtures for this run.",
    )


def pytest_configure(config: pytest.Config) -> None:
    if (config.getoption("mcp_expose") or config.getini(INI_OPTION)) and not config.pluginmanager.has_plugin(FIXTURES):
        from mcp_expose.testing import fixtures

        config.pluginmanager.register(fixtures, FIXTURES)
