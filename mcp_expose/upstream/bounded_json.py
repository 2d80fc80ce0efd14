"""JSON from an upstream, parsed within limits that refuse a part of it, never all of it.

Python's own parser recurses: a value nested deep enough anywhere in a page fails the whole page, and with it
every other tool on it. Here, before the page is parsed, each object or array nested deeper than
the limit is replaced by a marker; the reader then refuses only the entry that held it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mcp_expose.core.errors import McpExposeError

# What a too-deep value is replaced with. An upstream that sends this object itself is refused as too deep,
# which is what it asked for.
TOO_DEEP_KEY = "\u0000mcp_expose.too_deep"
TOO_DEEP = {TOO_DEEP_KEY: True}
_TOO_DEEP_TEXT = json.dumps(TOO_DEEP)

# What the scan looks at: quotes and backslashes (strings), and brackets (nesting). Everything else is skipped.
_SPECIAL = re.compile(r'["\\\[\]{}]')

# What an entry too large to read is replaced with: its size, and its name when the entry begins with it (as
# the SDKs write entries), so the diagnostic can say which tool it was.
TOO_LARGE_KEY = "\u0000mcp_expose.too_large"
# The listing's scan also looks at commas, which separate the entries of a list.
_SPECIAL_OR_COMMA = re.compile(rb'["\\\[\]{},]')
_LEADING_NAME = re.compile(rb'\s*\{\s*"name"\s*:\s*"([A-Za-z0-9_.-]{1,128})"')
# The depth of the lists whose items are read one by one: a tools/list answer's `result.tools` (the message
# is level 1, its result level 2).
ENTRY_LIST_DEPTH = 3


class UnreadableJSON(McpExposeError, ValueError):
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


def loads_listing(data: bytes, *, max_depth: int, max_entry_bytes: int, cut: bool = False) -> tuple[Any, int, bool]:
    """A listing message parsed entry by entry: each item of a list at `ENTRY_LIST_DEPTH` (the tools of a
    `tools/list` answer) is parsed alone, and one longer than `max_entry_bytes` is replaced by a `TOO_LARGE_KEY`
    marker unread, so one oversized entry costs only itself.

    `cut` says `data` is the first part of a longer answer: the entries complete before the cut are kept, when the
    cut falls inside the list. Returns the message, how many entries were read, and whether entries were lost to
    the cut (none are when the message ends before it); raises `UnreadableJSON` when it is not JSON, or is cut
    anywhere else."""
    skeleton, entries, state = _split_entries(data, cut=cut)
    if state == "unreadable":
        raise UnreadableJSON("it was cut outside its list of tools, so nothing in it can be read")
    try:
        message = json.loads(_flattened(skeleton.decode("utf-8"), max_depth))
    except UnicodeDecodeError:
        raise UnreadableJSON("the answer is not UTF-8") from None
    except (ValueError, RecursionError):
        raise UnreadableJSON("the answer is not valid JSON") from None
    read = [_entry(data, span, max_depth - ENTRY_LIST_DEPTH, max_entry_bytes) for span in entries]
    return _with_entries(message, read), len(read), state == "cut"


_ENTRY_KEY = "\u0000mcp_expose.entry"


def _entry(data: bytes, span: tuple[int, int], max_depth: int, max_bytes: int) -> Any:
    start, end = span
    if end - start > max_bytes:
        marker: dict[str, Any] = {TOO_LARGE_KEY: end - start}
        if found := _LEADING_NAME.match(data, start, min(end, start + 512)):
            marker["name"] = found.group(1).decode("ascii")
        return marker
    return loads_bounded(data[start:end], max_depth=max_depth, max_bytes=max_bytes)


def _with_entries(message: Any, read: list[Any]) -> Any:
    """The skeleton's placeholders (at `ENTRY_LIST_DEPTH`) replaced by the entries read."""
    children = message.values() if isinstance(message, dict) else message if isinstance(message, list) else []
    for child in children:
        lists = child.values() if isinstance(child, dict) else child if isinstance(child, list) else []
        for items in lists:
            if isinstance(items, list):
                items[:] = [
                    read[item[_ENTRY_KEY]] if isinstance(item, dict) and _ENTRY_KEY in item else item for item in items
                ]
    return message


def _split_entries(data: bytes, *, cut: bool) -> tuple[bytes, list[tuple[int, int]], str]:
    """`data` with each item of a list at `ENTRY_LIST_DEPTH` replaced by a placeholder, the items' spans, and
    "whole", "cut" (cut inside such a list: the items before the cut are kept, the list and what holds it
    closed) or "unreadable" (cut elsewhere).

    The same linear scan as `_flattened`, with commas: at the list's own depth a comma ends an item."""
    pieces: list[bytes] = []
    spans: list[tuple[int, int]] = []
    kinds: list[int] = []  # the open brackets, outermost first
    last = 0  # the end of what `pieces` holds of `data`
    item_from: int | None = None  # where the current item of an entry list began
    list_open_at, spans_before_list = -1, 0
    in_string = False
    escaped_at = -1
    for match in _SPECIAL_OR_COMMA.finditer(data):
        position, character = match.start(), data[match.start()]
        if in_string:
            if position == escaped_at:
                continue
            if character == 0x5C:  # backslash
                escaped_at = position + 1
            elif character == 0x22:  # quote
                in_string = False
            continue
        in_entry_list = len(kinds) == ENTRY_LIST_DEPTH and kinds[-1] == 0x5B
        if in_entry_list and character in (0x2C, 0x5D) and item_from is not None:  # the item ends
            if data[item_from:position].strip():
                pieces.extend((data[last:item_from], _placeholder(len(spans))))
                spans.append((item_from, position))
                last = position
            item_from = position + 1 if character == 0x2C else None
            if character == 0x2C:
                continue
        if character == 0x22:
            in_string = True
        elif character in (0x5B, 0x7B):  # [ {
            kinds.append(character)
            if len(kinds) == ENTRY_LIST_DEPTH and character == 0x5B:
                item_from, list_open_at, spans_before_list = position + 1, position, len(spans)
        elif character in (0x5D, 0x7D):  # ] }
            if not kinds:
                return data, [], "whole"  # unbalanced: json.loads says what is wrong
            kinds.pop()
    if cut and (kinds or in_string):
        if not (len(kinds) >= ENTRY_LIST_DEPTH and kinds[ENTRY_LIST_DEPTH - 1] == 0x5B):
            return b"", [], "unreadable"
        # Cut inside an entry list: its complete items are kept, the list and what holds it closed.
        opened = b"" if len(spans) > spans_before_list else data[last : list_open_at + 1]
        closing = bytes(0x5D if kind == 0x5B else 0x7D for kind in reversed(kinds[: ENTRY_LIST_DEPTH - 1]))
        return b"".join(pieces) + opened + b"]" + closing, spans, "cut"
    pieces.append(data[last:])
    return b"".join(pieces), spans, "whole"


def _placeholder(index: int) -> bytes:
    return json.dumps({_ENTRY_KEY: index}).encode()


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
