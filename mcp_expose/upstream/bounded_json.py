"""JSON from an upstream, parsed within limits that refuse a part of it, never all of it.

Python's own parser recurses: a value nested deep enough anywhere in a page fails the whole page, and with it
every other tool on it. Here, before the page is parsed, each object or array nested deeper than
the limit is replaced by a marker; the reader then refuses only the entry that held it.
"""

from __future__ import annotations

import json
import re
from typing import Any

# What a too-deep value is replaced with. An upstream that sends this object itself is refused as too deep,
# which is what it asked for.
TOO_DEEP_KEY = "\u0000mcp_expose.too_deep"
TOO_DEEP = {TOO_DEEP_KEY: True}
_TOO_DEEP_TEXT = json.dumps(TOO_DEEP)

# What the scan looks at: quotes and backslashes (strings), and brackets (nesting). Everything else is skipped.
_SPECIAL = re.compile(r'["\\\[\]{}]')


class UnreadableJSON(ValueError):
    """The text is not JSON at all (or larger than allowed): nothing in it can be read."""


def loads_bounded(text: str | bytes, *, max_depth: int, max_bytes: int) -> Any:
    """`text` parsed, with each value nested deeper than `max_depth` replaced by `TOO_DEEP`.

    Raises `UnreadableJSON` for text over `max_bytes`, or that is not JSON."""
    if isinstance(text, bytes):
        if len(text) > max_bytes:
            raise UnreadableJSON(f"the answer is {len(text)} bytes; at most {max_bytes} are read")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise UnreadableJSON("the answer is not UTF-8") from None
    elif len(text.encode("utf-8")) > max_bytes:
        raise UnreadableJSON(f"the answer is over {max_bytes} bytes")
    try:
        return json.loads(_flattened(text, max_depth))
    except (ValueError, RecursionError):
        raise UnreadableJSON("the answer is not valid JSON") from None


def _flattened(text: str, max_depth: int) -> str:
    """`text` with every object or array that opens below `max_depth` cut out and replaced by the marker.

    One pass over the quotes, backslashes and brackets, in order: a bracket inside a string is no bracket, and a
    backslash in a string escapes what follows it. Linear in the text, whatever it holds."""
    cuts: list[tuple[int, int]] = []
    depth = 0
    cut_from: int | None = None
    in_string = False
    escaped_at = -1  # the position a backslash escapes
    for match in _SPECIAL.finditer(text):
        position, character = match.start(), match.group()
        if in_string:
            if position == escaped_at:
                continue
            if character == "\\":
                escaped_at = position + 1
            elif character == '"':
                in_string = False
            continue
        if character == '"':
            in_string = True
        elif character in "[{":
            depth += 1
            if depth > max_depth and cut_from is None:
                cut_from = position
        elif character in "]}":
            if depth == max_depth + 1 and cut_from is not None:
                cuts.append((cut_from, position + 1))
                cut_from = None
            depth -= 1
            if depth < 0:
                return text  # unbalanced: json.loads says what is wrong
    if not cuts:
        return text
    pieces: list[str] = []
    last = 0
    for start, end in cuts:
        pieces.extend((text[last:start], _TOO_DEEP_TEXT))
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def depth_of(value: Any) -> int:
    """How deep `value` nests (a scalar is 0, `[]` is 1), without recursion; a marker counts as too deep."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            if TOO_DEEP_KEY in node:
                return 1 << 30
            deepest = max(deepest, depth + 1)
            stack.extend((child, depth + 1) for child in node.values())
        elif isinstance(node, list):
            deepest = max(deepest, depth + 1)
            stack.extend((child, depth + 1) for child in node)
    return deepest
