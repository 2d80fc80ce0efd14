"""Assertions about what a caller sees and gets, each failing with what was expected and what came back.

A tool error arrives as a `CallToolResult` with `isError`, its structured content `{"error": {"code", "message",
"details"}}` and the same JSON as its text. A tool the caller may not use is answered as an unknown one
(JSON-RPC -32602), or, for an OAuth token short of only scopes, with the edge's 403 step-up challenge.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from mcp_expose.core.conf import get_settings
from mcp_expose.declare.names import served_name
from mcp_expose.testing.caller import HttpRefusal

# How much of a result a failure message shows.
SHOWN_CHARACTERS = 600


def assert_visible(listing: Any, *names: str) -> None:
    """Each of `names` is in the caller's `tools/list` (a client, a `ListToolsResult`, tools or names)."""
    seen = tool_names(listing)
    missing = [name for name in names if name not in seen]
    if missing:
        raise AssertionError(f"Expected {_names(missing)} to be visible; the caller sees {_names(seen)}.")


def assert_hidden(listing: Any, *names: str) -> None:
    """None of `names` is in the caller's `tools/list`. Given a client, each must be a name some tool goes by: one
    that no tool has (a typo, the other WIRE_NAMES style) would be "hidden" whatever the rules."""
    _known(listing, names)
    seen = tool_names(listing)
    shown = [name for name in names if name in seen]
    if shown:
        raise AssertionError(f"Expected {_names(shown)} to be hidden; the caller sees {_names(seen)}.")


def assert_cannot_call(client: Any, name: str, arguments: dict[str, Any] | None = None) -> None:
    """Calling `name` as this client's caller is refused: answered as an unknown tool, or with a 403 step-up.
    A sync test's assertion (it calls the tool); an async test checks `acall_tool` the same way. `name` must be a
    name some tool goes by, as for `assert_hidden`."""
    _known(client, [name])
    try:
        result = client.call_tool(name, arguments)
    except MCPError as exc:
        if exc.code == types.INVALID_PARAMS:
            return
        raise AssertionError(
            f"Expected {name!r} to be refused as an unknown tool (-32602); got error {exc.code}: {exc}"
        ) from exc
    except HttpRefusal as refusal:
        if refusal.status == 403:
            return
        raise AssertionError(
            f"Expected {name!r} to be refused; the edge refused the caller itself: {refusal}"
        ) from None
    raise AssertionError(f"Expected {name!r} to be refused; it was called and returned {describe(result)}")


def assert_tool_error(result: Any, code: str | None = None, *, message: str | None = None) -> dict[str, Any]:
    """The call failed as a tool error (with `code`, and `message` in its text, when given); returns the error."""
    error = tool_error(result)
    if error is None:
        raise AssertionError(f"Expected a tool error{_with(code)}; got {describe(result)}")
    if code is not None and error.get("code") != code:
        raise AssertionError(f"Expected a tool error{_with(code)}; got {_error_text(error)}")
    if message is not None and message not in str(error.get("message", "")):
        raise AssertionError(f"Expected a tool error saying {message!r}; got {_error_text(error)}")
    return error


def assert_tool_result(result: Any, expected: Any) -> None:
    """The call succeeded with this structured content (a value that is not an object is `{"result": ...}`)."""
    if not isinstance(result, types.CallToolResult) or result.is_error:
        raise AssertionError(f"Expected the result {_shown(expected)}; got {describe(result)}")
    if result.structured_content != expected:
        raise AssertionError(f"Expected the result {_shown(expected)}; got {_shown(result.structured_content)}")


def assert_input_required(result: Any, *keys: str) -> types.InputRequiredResult:
    """The call asked the client first (a 2026-07-28 `input_required` result), with these questions when given
    (`"confirm"` is a confirmation's); returns it. Only a client that declares forms is asked a form."""
    if not isinstance(result, types.InputRequiredResult):
        raise AssertionError(f"Expected the call to ask the client{_keys(keys)}; got {describe(result)}")
    asked = sorted(result.input_requests or {})
    if keys and sorted(keys) != asked:
        raise AssertionError(f"Expected the call to ask{_keys(keys)}; it asked {asked}: {describe(result)}")
    return result


def _known(target: Any, names: Iterable[str]) -> None:
    """Fail on a name no tool goes by, when the target can say (an `McpTestClient`): such a name is "hidden" and
    "refused" whatever the rules, so the assertion would pass without testing anything."""
    if not hasattr(target, "known_tool_names"):
        return
    known = target.known_tool_names()
    unknown = [name for name in names if name not in known]
    if unknown:
        style = get_settings().WIRE_NAMES
        hints = [
            f"{name!r} goes by {served_name(name, style)!r}" for name in unknown if served_name(name, style) in known
        ]
        raise AssertionError(
            f"No tool goes by {_names(unknown)}, so it would pass as hidden or refused whatever the rules say"
            + (f" ({'; '.join(hints)}: WIRE_NAMES is {style!r})." if hints else ".")
        )


def tool_names(listing: Any) -> list[str]:
    """The tool names in a listing: a client (its `tool_names()`), a `ListToolsResult`, tools, or names."""
    if hasattr(listing, "tool_names"):
        return list(listing.tool_names())
    if isinstance(listing, types.ListToolsResult):
        listing = listing.tools
    return [item if isinstance(item, str) else item.name for item in listing]


def tool_error(result: Any) -> dict[str, Any] | None:
    """A tool error's `{"code", "message", ...}`; None when `result` is not one."""
    if not isinstance(result, types.CallToolResult) or not result.is_error:
        return None
    error = (result.structured_content or {}).get("error")
    if isinstance(error, Mapping):
        return dict(error)
    text = " ".join(block.text for block in result.content if isinstance(block, types.TextContent))
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, Mapping) and isinstance(parsed.get("error"), Mapping):
        return dict(parsed["error"])
    return {"code": None, "message": text}


def describe(result: Any) -> str:
    """What came back, in a line: an error's code and message, a value, the questions asked."""
    error = tool_error(result)
    if error is not None:
        return _error_text(error)
    if isinstance(result, types.InputRequiredResult):
        questions = (
            {key: getattr(request.params, "message", request.method) for key, request in result.input_requests.items()}
            if result.input_requests
            else {}
        )
        return f"an input_required result asking {_shown(questions)}"
    if isinstance(result, types.CallToolResult):
        if result.structured_content is not None:
            return f"the result {_shown(result.structured_content)}"
        kinds = [block.type for block in result.content]
        return f"a result of content {kinds}: {_shown([getattr(b, 'text', '') for b in result.content])}"
    return _shown(result)


def _error_text(error: Mapping[str, Any]) -> str:
    details = f" (details: {_shown(error['details'])})" if error.get("details") is not None else ""
    return f"tool error {error.get('code')!r}: {error.get('message')}{details}"


def _with(code: str | None) -> str:
    return f" with code {code!r}" if code is not None else ""


def _keys(keys: Iterable[str]) -> str:
    keys = sorted(keys)
    return f" {keys}" if keys else ""


def _names(names: Iterable[str]) -> str:
    return ", ".join(sorted(names)) or "no tools"


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= SHOWN_CHARACTERS else text[:SHOWN_CHARACTERS] + "…"
