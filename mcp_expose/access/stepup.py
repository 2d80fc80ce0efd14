"""Which scopes a request is missing, decided before the SDK sees it, so the client can step up.

An OAuth caller that calls a tool it lacks scopes for gets 403 `insufficient_scope`
naming every scope the tool needs; clients then re-authorize with them. API keys
cannot step up, and with `HIDE_FORBIDDEN_TOOLS` the tool answers as unknown instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from mcp_expose.access.policy import decide
from mcp_expose.catalog.compiled import Catalog
from mcp_expose.core.conf import get_settings
from mcp_expose.core.principal import Principal


def tool_call_name(headers: Mapping[str, str], body: bytes) -> str | None:
    """The tool a `tools/call` body names, when the header (if any) agrees with it.

    On disagreement (or anything malformed) None: the SDK then answers the
    request itself, with the protocol's own error.
    """
    try:
        message: Any = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return None
    params = message.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    if not isinstance(name, str):
        return None
    header_name = headers.get("mcp-name")
    if header_name is not None and header_name != name:
        return None
    return name


def may_be_tool_call(headers: Mapping[str, str]) -> bool:
    """Whether the body needs reading: 2026-07-28 requests say their method in a header, legacy ones do not."""
    method = headers.get("mcp-method")
    return method is None or method == "tools/call"


def missing_scopes(principal: Principal, catalog: Catalog, tool_name: str | None) -> frozenset[str]:
    """Scopes to challenge for: the base scope, or all of a known tool's scopes when only scopes are lacking."""
    conf = get_settings()
    if principal.method != "oauth":
        return frozenset()
    base = frozenset({conf.BASE_SCOPE}) if conf.BASE_SCOPE else frozenset()
    if not principal.has_scopes(base):
        return base
    if tool_name is None or conf.HIDE_FORBIDDEN_TOOLS:
        return frozenset()
    entry = catalog.get(tool_name)
    if entry is None:
        return frozenset()
    decision = decide(principal, entry)
    if decision.allowed or not decision.missing_scopes:
        return frozenset()
    # Challenge only when the scopes are all that stand in the way: stepping up could not help otherwise.
    if not decide(replace(principal, scopes=principal.scopes | entry.scopes), entry).allowed:
        return frozenset()
    return base | entry.scopes
