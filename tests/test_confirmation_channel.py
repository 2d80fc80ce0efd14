"""Confirmation on the approval page only: a client that answers every form by itself is not a person.

Live servers and the official SDK client in both eras. The auto-accepting client says yes to every form;
the approval page is answered by a signed-in browser, with its cookies and CSRF token.
"""

from __future__ import annotations

from pathlib import Path

import mcp_types as types
import pytest

from .live import LIVE_SETTINGS, LiveServer, run_snippet
from .oauth_client import Browser
from .test_asking import ScriptedClient
from .test_invocation import answer_on_page, approval_url, authors_named, shell

pytestmark = [pytest.mark.anyio, pytest.mark.live]

ACCEPT = types.ElicitResult(action="accept", content={"confirm": True})


def set_channel(data: Path, key: str, channel: str) -> None:
    """What the admin's form does: save the row, which moves the catalog revision for every process."""
    run_snippet(
        data,
        "from mcp_expose.models import ExposedTool\n"
        f"ExposedTool.objects.update_or_create(key={key!r}, defaults={{'confirmation_channel': {channel!r}}})",
        env=LIVE_SETTINGS,
    )


def post_as(browser: Browser, url: str, **fields: str) -> int:
    """POST to the page with the browser's CSRF cookie as the token (what its forms send)."""
    token = browser.http.cookies["csrftoken"]
    return browser.http.post(url, data={"csrfmiddlewaretoken": token, **fields}, headers={"Referer": url}).status_code


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_auto_accepting_client_cannot_confirm_and_only_the_signed_in_caller_can(
    server: LiveServer, key: str, data: Path, mode: str
) -> None:
    target = f"page-{mode}"
    tool, arguments = "toolbox.launch_on_page", {"target": target}
    auto = ScriptedClient(confirm=True)
    http, client = auto.client(server.mcp_url, mode, key=key)
    async with http, client:
        url = approval_url(await client.call_tool(tool, arguments))
        if mode == "auto":
            # A yes the client offers unasked with the call is not read either.
            offered = await client.session.call_tool(
                tool, arguments, input_responses={"confirm": ACCEPT}, allow_input_required=True
            )
            assert approval_url(offered) == url
        assert auto.asked == []  # never asked in the client at all

        with Browser.logged_in(server.base_url, "reader", "reader") as stranger:
            # Past CSRF (the token is good), refused as not theirs: someone else's call is invisible.
            assert stranger.http.get(url).status_code == 404
            assert post_as(stranger, url, approve="1") == 404
        with Browser.logged_in(server.base_url, "admin", "admin") as owner:
            assert owner.http.post(url, data={"approve": "1"}, headers={"Referer": url}).status_code == 403  # no CSRF
            assert approval_url(await client.call_tool(tool, arguments)) == url  # still waiting
            assert authors_named(data, f"launched-on-page-{target}") == 0
            assert "Approved." in answer_on_page(owner, url, "approve")

        ran = await client.call_tool(tool, arguments)
        assert ran.structured_content == {"result": f"launched {target}"}
        assert approval_url(await client.call_tool(tool, arguments)) != url  # used up: the next call asks anew
    assert auto.asked == []
    assert authors_named(data, f"launched-on-page-{target}") == 1


async def test_the_admin_moves_a_tool_to_the_approval_page_and_its_later_rounds_follow(
    server: LiveServer, key: str, data: Path
) -> None:
    auto = ScriptedClient(confirm=True, codename="heron")
    http, client = auto.client(server.mcp_url, "auto", key=key)
    set_channel(data, "toolbox.launch_named", "approval_page")
    try:
        async with http, client:
            # Other tools keep confirming in the client, as before.
            asked_in_client = await client.call_tool("toolbox.launch", {"target": "in-client"})
            assert asked_in_client.structured_content == {"result": "launched in-client"}
            assert [question.split("\n")[0] for question in auto.asked] == ["elicit:Run the tool toolbox.launch?"]
            auto.asked.clear()

            url = approval_url(await client.call_tool("toolbox.launch_named", {"target": "mars"}))
            assert auto.asked == []
            with Browser.logged_in(server.base_url, "admin", "admin") as owner:
                assert "Approved." in answer_on_page(owner, url, "approve")
            # Approved once on the page; the tool then asks its own question, and the next round needs no
            # second approval.
            done = await client.call_tool("toolbox.launch_named", {"target": "mars"})
    finally:
        set_channel(data, "toolbox.launch_named", "client")
    assert done.structured_content == {"result": "launched mars as heron"}
    assert auto.asked == ["elicit:Name this launch"]
    assert authors_named(data, "launched-mars-heron") == 1
    statuses = shell(
        data,
        "from mcp_expose.models import Confirmation;"
        "print(sorted(Confirmation.objects.filter(tool_key='toolbox.launch_named')"
        ".values_list('channel', 'status')))",
    )
    assert statuses == "[('approval_page', 'consumed')]"
