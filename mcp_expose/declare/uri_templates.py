"""RFC 6570 URI templates for resources: the SDK's parser and matcher, behind one small interface."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate

__all__ = ["InvalidUriTemplate", "is_template", "match", "variables"]


@lru_cache(maxsize=1024)
def _parse(template: str) -> UriTemplate:
    return UriTemplate.parse(template)


def is_template(uri: str) -> bool:
    return UriTemplate.is_template(uri)


def variables(template: str) -> list[str]:
    """The variable names of `template`; raises `InvalidUriTemplate`."""
    return [variable.name for variable in _parse(template).variables]


def match(template: str, uri: str) -> dict[str, Any] | None:
    result = _parse(template).match(uri)
    return dict(result) if result is not None else None
