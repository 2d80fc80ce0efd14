"""Tools that ask their client (a form, a completion, the roots): the same code in both protocol eras.

Live uvicorn servers with the conformance fixtures, driven by the official SDK client: 2026-07-28
answers arrive as repeated calls carrying sealed state; 2025-11-25 stateful sessions answer real
server-to-client requests mid-call; the default stateless legacy path says plainly that it cannot ask.
"""

from __future__ import annotations

import base64
import json
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPDeprecationWarning

from mcp_expose.testing.live import mcp_http_client

from .live import LiveServer, jsonrpc_body, modern_headers, prepare_demo, run_server
from .test_invocation import authors_named

pytestmark = pytest.mark.anyio
CONFORMANCE = {"DJANGO_SETTINGS_MODULE": "tests.settings_conformance"}


@pytest.fixture(scope="module")
def fixtures_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("asking")
    prepare_demo(data_dir, **CONFORMANCE)
    return data_dir


@pytest.fixture(scope="module")
def stateful(fixtures_data: Path) -> Iterator[LiveServer]:
    with run_server(fixtures_data, **CONFORMANCE) as live:
        yield live


@pytest.fixture(scope="module")
def stateless(fixtures_data: Path) -> Iterator[LiveServer]:
    with run_server(fixtures_data, **CONFORMANCE, MCP_TEST_LEGACY_SESSIONS="0") as live:
        yield live


class ScriptedClient:
    """Answers every question from a script and remembers what it was asked."""

    def __init__(self, **elicit_answers: Any) -> None:
        self.elicit_answers = elicit_answers
        self.asked: list[str] = []

    async def elicit(self, ctx: Any, params: Any) -> types.ElicitResult:
        self.asked.append(f"elicit:{params.message}")
        field = next(iter(params.requested_schema["properties"]))
        return types.ElicitResult(action="accept", content={field: self.elicit_answers[field]})

    async def sample(self, ctx: Any, params: Any) -> types.CreateMessageResult:
        self.asked.append(f"sample:{params.messages[0].content.text}")
        return types.CreateMessageResult(role="assistant", content=types.TextContent(text="Paris."), model="scripted")

    async def roots(self, ctx: Any) -> types.ListRootsResult:
        self.asked.append("roots")
        return types.ListRootsResult(roots=[types.Root(uri="file:///work/library", name="library")])

    def client(self, url: str, mode: str, *, sampling: bool = True, key: str | None = None) -> tuple[Any, Client]:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        http = mcp_http_client(headers=headers)
        client = Client(
            streamable_http_client(url, http_client=http),  # type: ignore[arg-type]
            mode=mode,
            elicitation_callback=self.elicit,
            sampling_callback=self.sample if sampling else None,
            list_roots_callback=self.roots,
        )
        return http, client


@contextmanager
def legacy_api() -> Iterator[None]:
    """The SDK marks 2025-11-25-only client calls deprecated; those clients still make them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        yield


def text(result: Any) -> str:
    return result.content[0].text


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_every_name_the_conformance_fixtures_serve_is_accepted_by_every_client(
    stateful: LiveServer, mode: str
) -> None:
    """The official conformance suite's fixtures (tests/apps/conformance), as a client lists them: Claude Desktop
    refuses a whole tool list for one name outside its pattern (tests/test_names.py has the demo's)."""
    from .test_names import accepted_everywhere

    http, client = ScriptedClient().client(stateful.mcp_url, mode)
    async with http, client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        names += [prompt.name for prompt in (await client.list_prompts()).prompts]
        names += [resource.name for resource in (await client.list_resources()).resources]
        names += [template.name for template in (await client.list_resource_templates()).resource_templates]
    assert len(names) > 20 and "test_simple_text" in names
    assert [name for name in names if not accepted_everywhere(name)] == []


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_one_tool_asks_in_both_eras(stateful: LiveServer, mode: str) -> None:
    scripted = ScriptedClient(name="Ada", color="green")
    http, client = scripted.client(stateful.mcp_url, mode)
    async with http, client:
        rounds = await client.call_tool("test_input_required_result_multi_round", {})
        several = await client.call_tool("test_input_required_result_multiple_inputs", {})
    assert text(rounds) == "Ada likes green"
    assert text(several) == "Paris. Ada, with 1 roots"
    assert scripted.asked[:2] == ["elicit:Step 1: What is your name?", "elicit:Step 2: What is your favorite color?"]
    assert sorted(scripted.asked[2:]) == ["elicit:What is your name?", "roots", "sample:Generate a greeting"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_sync_tool_asks_with_ask_sync_in_both_eras(stateful: LiveServer, mode: str) -> None:
    """`context.ask_sync`: rounds of sealed state on 2026-07-28, requests to the client mid-call on a 2025-11-25
    session; either way the sync tool gets each answer from the client's own callback."""
    scripted = ScriptedClient(name="Grace", color="blue")
    http, client = scripted.client(stateful.mcp_url, mode)
    async with http, client:
        result = await client.call_tool("test_sync_input_required_result_multi_round", {})
    assert not result.is_error and text(result) == "Grace likes blue, asked in sync"
    assert scripted.asked == ["elicit:Step 1: What is your name?", "elicit:Step 2: What is your favorite color?"]


async def test_2026_rounds_carry_sealed_state_that_grows(stateful: LiveServer) -> None:
    scripted = ScriptedClient()
    http, client = scripted.client(stateful.mcp_url, "auto")
    async with http, client:
        first = await client.session.call_tool("test_input_required_result_multi_round", {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and list(first.input_requests) == ["step1"]
        answer = types.ElicitResult(action="accept", content={"name": SECRET_ANSWER})
        second = await client.session.call_tool(
            "test_input_required_result_multi_round",
            {},
            allow_input_required=True,
            input_responses={"step1": answer},
            request_state=first.request_state,
        )
        assert isinstance(second, types.InputRequiredResult) and list(second.input_requests) == ["step2"]
        assert first.request_state and second.request_state and second.request_state != first.request_state
        # The state carries the first answer (it grows by it), sealed: it cannot be read from the state's bytes...
        assert len(second.request_state) > len(first.request_state) + len(SECRET_ANSWER)
        assert SECRET_ANSWER.encode() not in state_bytes(second.request_state)
        # ...nor changed in it: one bit flipped in the ciphertext and the server refuses the state.
        with pytest.raises(MCPError) as refused:
            await client.session.call_tool(
                "test_input_required_result_multi_round",
                {},
                allow_input_required=True,
                input_responses={"step2": types.ElicitResult(action="accept", content={"color": "red"})},
                request_state=flipped(second.request_state),
            )
    assert refused.value.error.code == types.INVALID_PARAMS


# Twenty-seven letters: as likely in random ciphertext as a guessed 216-bit key, unlike a three-letter name.
SECRET_ANSWER = "Ada Augusta King of Lovelace"


def state_bytes(state: str) -> bytes:
    """Every base64url run in a request state, decoded and joined: the bytes a client can read from it."""
    runs = [run for run in re.findall(r"[A-Za-z0-9_-]{4,}", state) if len(run) % 4 != 1]  # 1 cannot be base64
    return b"".join(base64.urlsafe_b64decode(run + "=" * (-len(run) % 4)) for run in runs)


def flipped(state: str) -> str:
    """The state with one bit of its middle byte flipped, encoded back as the SDK encodes it."""
    prefix, _, encoded = state.rpartition(".")
    raw = bytearray(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    raw[len(raw) // 2] ^= 0x01
    return f"{prefix}.{base64.urlsafe_b64encode(bytes(raw)).decode().rstrip('=')}"


async def test_an_undeclared_capability_is_refused_before_asking(stateful: LiveServer) -> None:
    scripted = ScriptedClient()
    http, client = scripted.client(stateful.mcp_url, "auto", sampling=False)
    async with http, client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("test_missing_capability", {})
        # A tool that checks first asks only what the client can answer.
        checked = await client.session.call_tool(
            "test_input_required_result_capabilities", {}, allow_input_required=True
        )
    assert refused.value.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert refused.value.error.data == {"requiredCapabilities": {"sampling": {}}}
    assert isinstance(checked, types.InputRequiredResult) and list(checked.input_requests) == ["user_name"]
    assert scripted.asked == []


async def test_prompts_ask_too(stateful: LiveServer) -> None:
    scripted = ScriptedClient(context="a rainy day")
    http, client = scripted.client(stateful.mcp_url, "auto")
    async with http, client:
        prompt = await client.get_prompt("test_input_required_result_prompt", {})
    assert prompt.messages[0].content.text == "Write with this context in mind: a rainy day"


async def test_the_stateless_legacy_path_says_it_cannot_ask(stateless: LiveServer) -> None:
    scripted = ScriptedClient(response="yes")
    http, client = scripted.client(stateless.mcp_url, "legacy")
    async with http, client:
        result = await client.call_tool("test_elicitation", {"message": "Sure?"})
    assert result.is_error and result.structured_content["error"]["code"] == "client_input_unavailable"
    assert "2026-07-28" in result.structured_content["error"]["message"] and scripted.asked == []


async def test_log_messages_follow_each_eras_rules(stateful: LiveServer) -> None:
    received: list[str] = []

    async def on_log(params: Any) -> None:
        received.append(f"{params.level}:{params.data}")

    http = mcp_http_client()
    async with (
        http,
        Client(
            streamable_http_client(stateful.mcp_url, http_client=http),
            mode="legacy",  # type: ignore[arg-type]
            logging_callback=on_log,
        ) as client,
    ):
        await client.call_tool("test_tool_with_logging", {})
        assert received == ["info:Tool execution started", "info:Tool processing data", "info:Tool execution completed"]
        with legacy_api():
            await client.session.set_logging_level("warning")
        await client.call_tool("test_tool_with_logging", {})
    assert len(received) == 3  # below the session's level now
    # 2026-07-28: nothing unless the request asked for a level.
    body = jsonrpc_body("tools/call", {"name": "test_logging_tool", "arguments": {}})
    plain = httpx2.post(stateful.mcp_url, content=body, headers=modern_headers("tools/call", name="test_logging_tool"))
    asked = json.loads(body)
    asked["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = "info"
    opted = httpx2.post(
        stateful.mcp_url, content=json.dumps(asked), headers=modern_headers("tools/call", name="test_logging_tool")
    )
    assert plain.status_code == opted.status_code == 200
    assert "notifications/message" not in plain.text and "test_logging_tool ran" not in plain.text
    assert '"method":"notifications/message"' in opted.text.replace(" ", "") and "test_logging_tool ran" in opted.text


async def test_a_confirmed_call_may_ask_more_and_writes_once(server: LiveServer, key: str, data: Path) -> None:
    scripted = ScriptedClient(confirm=True, codename="falcon")
    http, client = scripted.client(server.mcp_url, "auto", key=key)
    async with http, client:
        result = await client.call_tool("toolbox.launch_named", {"target": "moon"})
    assert result.structured_content == {"result": "launched moon as falcon"}
    assert scripted.asked[0].startswith("elicit:Run the tool toolbox.launch_named?")
    assert scripted.asked[1:] == ["elicit:Name this launch"]
    assert authors_named(data, "launched-moon-falcon") == 1


async def test_stateful_legacy_sessions_hear_list_changes(stateful: LiveServer) -> None:
    heard: list[str] = []
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        method = getattr(message, "method", None)
        if method is not None and method.endswith("list_changed"):
            heard.append(method)
            if method == "notifications/tools/list_changed":
                changed.set()

    http = mcp_http_client()
    async with (
        http,
        Client(
            streamable_http_client(stateful.mcp_url, http_client=http),
            mode="legacy",  # type: ignore[arg-type]
            message_handler=on_message,
        ) as client,
    ):
        before = {tool.name for tool in (await client.list_tools()).tools}
        await client.call_tool("test_trigger_tool_change", {})
        with anyio.fail_after(10):
            await changed.wait()
        after = {tool.name for tool in (await client.list_tools()).tools}
    assert "notifications/tools/list_changed" in heard and "notifications/prompts/list_changed" in heard
    assert before ^ after == {"test_toggled_tool"}


async def test_resource_updates_reach_subscribers_in_both_eras(stateful: LiveServer) -> None:
    uri = "test://watched-resource"
    updated = anyio.Event()
    heard: list[str] = []

    async def on_message(message: Any) -> None:
        if getattr(message, "method", None) == "notifications/resources/updated":
            heard.append(message.params.uri)
            updated.set()

    http = mcp_http_client()
    async with (
        http,
        Client(
            streamable_http_client(stateful.mcp_url, http_client=http),
            mode="legacy",  # type: ignore[arg-type]
            message_handler=on_message,
        ) as legacy,
    ):
        await legacy.call_tool("test_touch_watched_resource", {})  # not subscribed yet: nothing
        with legacy_api():
            await legacy.subscribe_resource(uri)
        await legacy.call_tool("test_touch_watched_resource", {})
        with anyio.fail_after(10):
            await updated.wait()
        with legacy_api(), pytest.raises(MCPError) as unknown:
            await legacy.subscribe_resource("test://nothing-here")
    assert heard == [uri] and unknown.value.error.code == types.INVALID_PARAMS

    http = mcp_http_client()
    async with http, Client(streamable_http_client(stateful.mcp_url, http_client=http)) as modern:  # type: ignore[arg-type]
        async with modern.listen(resource_subscriptions=[uri]) as subscription:
            await modern.call_tool("test_touch_watched_resource", {})
            with anyio.fail_after(10):
                event = await subscription.__anext__()
    assert event.uri == uri


async def test_each_round_is_answered_once(stateful: LiveServer) -> None:
    name = types.ElicitResult(action="accept", content={"name": "Ada"})
    color = types.ElicitResult(action="accept", content={"color": "red"})
    http, client = ScriptedClient().client(stateful.mcp_url, "auto")
    async with http, client:
        session = client.session
        tool = "test_input_required_result_multi_round"
        first = await session.call_tool(tool, {}, allow_input_required=True)
        second = await session.call_tool(
            tool, {}, allow_input_required=True, input_responses={"step1": name}, request_state=first.request_state
        )
        with pytest.raises(MCPError) as replayed:
            await session.call_tool(
                tool, {}, allow_input_required=True, input_responses={"step1": name}, request_state=first.request_state
            )
        done = await session.call_tool(tool, {}, input_responses={"step2": color}, request_state=second.request_state)
        with pytest.raises(MCPError) as replayed_last:
            await session.call_tool(tool, {}, input_responses={"step2": color}, request_state=second.request_state)
    assert replayed.value.error.code == replayed_last.value.error.code == types.INVALID_PARAMS
    assert replayed.value.error.data == {"reason": "invalid_request_state"}
    assert text(done) == "Ada likes red"


async def test_a_confirmed_call_that_asks_more_cannot_be_replayed(server: LiveServer, key: str, data: Path) -> None:
    confirm = types.ElicitResult(action="accept", content={"confirm": True})
    codename = types.ElicitResult(action="accept", content={"codename": "kite"})
    http, client = ScriptedClient().client(server.mcp_url, "auto", key=key)
    async with http, client:
        session, arguments = client.session, {"target": "venus"}
        asked = await session.call_tool("toolbox.launch_named", arguments, allow_input_required=True)
        named = await session.call_tool(
            "toolbox.launch_named",
            arguments,
            allow_input_required=True,
            input_responses={"confirm": confirm},
            request_state=asked.request_state,
        )
        done = await session.call_tool(
            "toolbox.launch_named", arguments, input_responses={"codename": codename}, request_state=named.request_state
        )
        with pytest.raises(MCPError) as replayed:
            await session.call_tool(
                "toolbox.launch_named",
                arguments,
                input_responses={"codename": codename},
                request_state=named.request_state,
            )
    assert done.structured_content == {"result": "launched venus as kite"}
    assert replayed.value.error.code == types.INVALID_PARAMS
    assert authors_named(data, "launched-venus-kite") == 1


async def test_a_key_asked_again_with_a_new_question_is_asked_anew(server: LiveServer, key: str) -> None:
    scripted = ScriptedClient(first="one", second="two")
    http, client = scripted.client(server.mcp_url, "auto", key=key)
    async with http, client:
        result = await client.call_tool("toolbox.ask_twice", {})
    assert result.structured_content == {"result": "one two"}
    assert scripted.asked == ["elicit:First?", "elicit:Second?"]


def test_every_legacy_session_keeps_its_own_event_history() -> None:
    from mcp_expose.serving.server import build_server
    from mcp_expose.serving.sessions import RecentEvents, SessionManager

    manager = SessionManager(app=build_server(), event_store=RecentEvents(), stateless=False)
    first, second = manager._admit_session(None), manager._admit_session(None)
    assert first._event_store is not second._event_store
    assert isinstance(first._event_store, RecentEvents) and isinstance(second._event_store, RecentEvents)
