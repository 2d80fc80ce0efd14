"""A call is decided by the policy once, on every path: the fast path decides before it chooses to answer, and hands
its decision to the dispatcher instead of the dispatcher deciding again."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from mcp_expose.access import policy
from mcp_expose.testing.client import ERA_MODES


@pytest.fixture
def decisions(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often the policy decided each tool: its first rule is asked on every decision."""
    counted: Counter[str] = Counter()
    first = type(policy.RULES[0])
    check = first.check

    def counting(self: Any, principal: Any, entry: Any) -> Any:
        counted[entry.name] += 1
        return check(self, principal, entry)

    monkeypatch.setattr(first, "check", counting)
    return counted


@pytest.mark.anyio
@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "sdk-path"])
@pytest.mark.parametrize("era", sorted(ERA_MODES))
async def test_a_call_is_decided_once(
    mcp_live: Any, settings: Any, decisions: Counter[str], era: str, fast_path: bool
) -> None:
    settings.MCP_EXPOSE = {**settings.MCP_EXPOSE, "FAST_PATH": fast_path}
    reader = await sync_to_async(User.objects.create_user)("reader")
    async with mcp_live.connect(reader, ["library:read"], era=era) as client:
        await client.list_tools()
        decisions.clear()
        echoed = await client.call_tool("library.echo", {"message": "once"})
        assert echoed.structured_content["message"] == "once"
        assert decisions == Counter({"library.echo": 1})
