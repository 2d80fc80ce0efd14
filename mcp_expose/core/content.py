"""Rich tool results: images, audio, embedded resources and resource links, beside text.

Return one of these from a tool, or a list mixing them with strings, and the
client receives them as content blocks instead of a JSON value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Image:
    data: bytes
    mime_type: str = "image/png"


@dataclass(frozen=True, slots=True)
class Audio:
    data: bytes
    mime_type: str = "audio/wav"


@dataclass(frozen=True, slots=True)
class EmbeddedResource:
    """A resource's contents carried in the result: `text` or `blob` (bytes)."""

    uri: str
    text: str | None = None
    blob: bytes | None = None
    mime_type: str | None = None

    def __post_init__(self) -> None:
        if (self.text is None) == (self.blob is None):
            raise ValueError("An embedded resource carries exactly one of text= or blob=.")


@dataclass(frozen=True, slots=True)
class ResourceLink:
    uri: str
    name: str
    description: str | None = None
    mime_type: str | None = None


CONTENT_TYPES = (Text, Image, Audio, EmbeddedResource, ResourceLink)


@dataclass(frozen=True, slots=True)
class ContentBundle:
    """What a tool returned as content blocks (and, optionally, structured data beside them)."""

    items: tuple[Any, ...]
    structured: Any = None

    @property
    def size(self) -> int:
        total = 0
        for item in self.items:
            for attribute in ("text", "data", "blob"):
                value = getattr(item, attribute, None)
                total += len(value) if value else 0
        return total


def as_bundle(value: Any) -> ContentBundle | None:
    """The value as content blocks, if it is content (or a list holding any); else None."""
    if isinstance(value, ContentBundle):
        return value
    if isinstance(value, CONTENT_TYPES):
        return ContentBundle((value,))
    if isinstance(value, list) and value and any(isinstance(item, CONTENT_TYPES) for item in value):
        items = tuple(Text(item) if isinstance(item, str) else item for item in value)
        bad = [type(item).__name__ for item in items if not isinstance(item, CONTENT_TYPES)]
        if bad:
            raise TypeError(f"a content list may hold strings and content items only, not {', '.join(bad)}")
        return ContentBundle(items)
    return None
