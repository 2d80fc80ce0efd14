"""An upstream's answer to a call, read as untrusted input: the content types we accept, within bounds, and
structured content checked against the output schema a person approved (never the one the upstream lists now).

What passes becomes the same value a local tool returns: structured content as a JSON value (its text block is
made here, from it), or content blocks. What does not pass is an `UpstreamError` saying what was wrong, never
what the upstream sent beyond its own bounded error text.
"""

from __future__ import annotations

import base64
import binascii
import threading
import unicodedata
from collections.abc import Mapping
from typing import Any

import mcp_types as types

from mcp_expose.core.content import Audio, ContentBundle, EmbeddedResource, Image, ResourceLink, Text
from mcp_expose.core.errors import UpstreamError
from mcp_expose.declare.json_schemas import thaw

# Characters of an upstream's error text passed on to the client.
MAX_ERROR_TEXT = 2000
# Content blocks of one answer.
MAX_BLOCKS = 100
MAX_URI = 2048
MAX_NAME = 256


class OutputCheck:
    """An approved output schema, compiled on first use."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema
        self._validator: Any = None
        self._lock = threading.Lock()

    def first_problem(self, value: Any) -> str | None:
        if self._validator is None:
            with self._lock:
                if self._validator is None:
                    from jsonschema import Draft202012Validator

                    self._validator = Draft202012Validator(thaw(self.schema))
        from jsonschema.exceptions import best_match

        error = best_match(self._validator.iter_errors(value))
        if error is None:
            return None
        path = "$" + "".join(f"[{part!r}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path)
        return f"{path}: fails the {error.validator!r} rule of the approved output schema"


def read_result(result: types.CallToolResult, server: str, output: OutputCheck | None) -> Any:
    """The value a call to an upstream tool returns here, or `UpstreamError`."""
    if result.is_error:
        raise UpstreamError(
            f"The upstream server {server!r} reported an error: {error_text(result.content)}",
            details={"source": "upstream", "upstream": server},
        )
    structured = result.structured_content
    if structured is not None and not isinstance(structured, dict):
        # MCP's structured content is a JSON object; the SDK's model lets any value through.
        raise _refused(server, f"its structured content is {type(structured).__name__}, not a JSON object")
    if output is not None:
        if structured is None:
            raise _refused(server, "it returned no structured content, which its approved output schema requires")
        problem = output.first_problem(structured)
        if problem is not None:
            raise _refused(server, f"its structured content does not match: {problem}")
        return dict(structured)
    if structured is not None:
        return dict(structured)  # structured content without a schema: served as the JSON it is
    if len(result.content) > MAX_BLOCKS:
        raise _refused(server, f"it returned {len(result.content)} content blocks; at most {MAX_BLOCKS} are read")
    return ContentBundle(tuple(_block(block, server) for block in result.content))


def error_text(content: list[Any]) -> str:
    """The text blocks of an upstream's error, as one bounded line without hidden characters."""
    text = " ".join(block.text for block in content if isinstance(block, types.TextContent))
    text = "".join(ch if unicodedata.category(ch)[0] != "C" else " " for ch in text)
    text = " ".join(text.split()) or "(no text)"
    return text if len(text) <= MAX_ERROR_TEXT else text[: MAX_ERROR_TEXT - 1] + "…"


def _block(block: Any, server: str) -> Any:
    if isinstance(block, types.TextContent):
        return Text(block.text)
    if isinstance(block, types.ImageContent):
        return Image(_decoded(block.data, server), _media_type(block.mime_type, "image/", server))
    if isinstance(block, types.AudioContent):
        return Audio(_decoded(block.data, server), _media_type(block.mime_type, "audio/", server))
    if isinstance(block, types.ResourceLink):
        return ResourceLink(
            _bounded(str(block.uri), MAX_URI, "a resource link's URI", server),
            _bounded(block.name, MAX_NAME, "a resource link's name", server),
            block.description[:MAX_ERROR_TEXT] if block.description else None,
            block.mime_type[:MAX_NAME] if block.mime_type else None,
        )
    if isinstance(block, types.EmbeddedResource):
        contents = block.resource
        uri = _bounded(str(contents.uri), MAX_URI, "an embedded resource's URI", server)
        mime = contents.mime_type[:MAX_NAME] if contents.mime_type else None
        if isinstance(contents, types.TextResourceContents):
            return EmbeddedResource(uri, text=contents.text, mime_type=mime)
        return EmbeddedResource(uri, blob=_decoded(contents.blob, server), mime_type=mime)
    raise _refused(server, f"it returned a content block of a type that is not read ({type(block).__name__})")


def _decoded(data: str, server: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise _refused(server, "it returned binary content that is not base64") from None


def _media_type(value: str, family: str, server: str) -> str:
    if not value.startswith(family) or len(value) > MAX_NAME or not value.isascii():
        raise _refused(server, f"it returned {family.rstrip('/')} content labelled {value[:40]!r}")
    return value


def _bounded(value: str, limit: int, what: str, server: str) -> str:
    if len(value) > limit:
        raise _refused(server, f"{what} is over {limit} characters")
    return value


def _refused(server: str, why: str) -> UpstreamError:
    return UpstreamError(
        f"The upstream server {server!r} answered with a result that is not accepted: {why}.",
        details={"source": "upstream", "upstream": server},
    )
