"""The call chain: which conversation a call belongs to and how many agents deep it is.

Read from `X-Conversation-Id` and `X-Agent-Depth` on every request; forwarded,
one deeper, on calls our code makes to other MCP servers. A chain deeper than
`MAX_AGENT_DEPTH` is refused before anything runs, so agents calling agents
cannot loop forever.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from mcp_expose.core.conf import get_settings
from mcp_expose.core.errors import McpExposeError, ToolError

CONVERSATION_HEADER = "x-conversation-id"
# Sent on every request to an upstream: this deployment's mark, so that a request that comes back to it (an
# upstream registered as ourselves, or a chain that returns here) is recognised and refused as a loop.
INSTANCE_HEADER = "x-mcp-expose-instance"
DEPTH_HEADER = "x-agent-depth"
CONVERSATION_PATTERN = re.compile(r"[A-Za-z0-9._:-]{1,128}")


class InvalidChain(McpExposeError, ValueError):
    """A malformed or too-deep chain header; the message says which and why."""


class DepthExceeded(ToolError):
    code = "depth_exceeded"
    default_message = "This call would exceed the maximum agent depth."


@dataclass(frozen=True, slots=True)
class CallChain:
    conversation_id: str | None = None
    depth: int = 0

    def forward(self) -> dict[str, str]:
        """Headers for a call to another MCP server: same conversation, one level deeper.

        Raises `DepthExceeded` before anything leaves the process when that level is over the cap.
        """
        depth = self.depth + 1
        limit = get_settings().MAX_AGENT_DEPTH
        if depth > limit:
            raise DepthExceeded(f"Calling another server would make the agent depth {depth}; the limit is {limit}.")
        return {
            "X-Conversation-Id": self.conversation_id or uuid.uuid4().hex,
            "X-Agent-Depth": str(depth),
        }


def read_chain(headers: Mapping[str, str]) -> CallChain:
    """The chain a request declares (lower-case header names). Raises `InvalidChain`."""
    conversation = headers.get(CONVERSATION_HEADER)
    if conversation is not None and not CONVERSATION_PATTERN.fullmatch(conversation):
        raise InvalidChain("X-Conversation-Id must be 1-128 characters of letters, digits, '.', '_', ':' or '-'.")
    raw_depth = headers.get(DEPTH_HEADER)
    depth = 0
    if raw_depth is not None:
        # isascii: "¹" is a digit to str.isdigit() but not to int().
        if not (raw_depth.isascii() and raw_depth.isdigit()) or len(raw_depth) > 4:
            raise InvalidChain("X-Agent-Depth must be a non-negative whole number.")
        depth = int(raw_depth)
        limit = get_settings().MAX_AGENT_DEPTH
        if depth > limit:
            raise InvalidChain(f"X-Agent-Depth is {depth}; calls deeper than {limit} agents are refused.")
    return CallChain(conversation_id=conversation, depth=depth)


@lru_cache(maxsize=4)
def _instance_mark(secret: str, database: str) -> str:
    return hmac.new(secret.encode(), b"mcp_expose.instance " + database.encode(), hashlib.sha256).hexdigest()[:32]


def instance_mark() -> str:
    """This deployment's mark: the same in all its processes (one SECRET_KEY, one database), different for
    another deployment even with the same key (a copy, a second demo), and telling nothing of either."""
    from django.conf import settings

    database = settings.DATABASES.get("default", {})
    where = " ".join(str(database.get(key, "")) for key in ("ENGINE", "HOST", "PORT", "NAME"))
    return _instance_mark(str(settings.SECRET_KEY), where)
