"""Every exception class the package defines derives from `McpExposeError`, so a project can catch all of ours in
one clause, and nothing we raise on purpose passes for a bug of someone else's."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import mcp_expose
from mcp_expose.core.errors import McpExposeError


def package_modules() -> list[str]:
    return [
        module.name
        for module in pkgutil.walk_packages(mcp_expose.__path__, "mcp_expose.")
        if ".migrations" not in module.name
    ]


def test_every_exception_class_of_the_package_derives_from_mcp_expose_error() -> None:
    defined = {
        f"{name}.{cls.__qualname__}": cls
        for name in package_modules()
        for cls in vars(importlib.import_module(name)).values()
        if inspect.isclass(cls) and issubclass(cls, BaseException) and cls.__module__ == name
    }
    assert len(defined) > 40  # the walk found the package's exceptions, not an empty list
    assert sorted(name for name, cls in defined.items() if not issubclass(cls, McpExposeError)) == []
