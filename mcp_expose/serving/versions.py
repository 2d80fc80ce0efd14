"""The protocol revisions this server serves, as the SDK's engine negotiates them.

Read from the SDK rather than written down again, so the list follows the SDK it runs on: the revisions of the
per-request envelope (2026-07-28), which `server/discover` offers, and those the `initialize` handshake agrees to.
"""

from __future__ import annotations

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, KNOWN_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

# Newest first, in the SDK's order of revisions (revisions are named, not numbered: never sort the strings).
PROTOCOL_VERSIONS: tuple[str, ...] = tuple(
    version
    for version in reversed(KNOWN_PROTOCOL_VERSIONS)
    if version in MODERN_PROTOCOL_VERSIONS or version in HANDSHAKE_PROTOCOL_VERSIONS
)
