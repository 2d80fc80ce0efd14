"""What an upstream sends, read within bounds: each bad entry refused alone, with a diagnostic naming why."""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import pytest
from django.test import override_settings

from mcp_expose.core.conf import changed_settings
from mcp_expose.core.ssrf_guard import AddressRefused, address_problem, check_host, check_url
from mcp_expose.declare.names import server_name_problem
from mcp_expose.upstream.bounded_json import (
    TOO_DEEP_KEY,
    TOO_LARGE_KEY,
    UnreadableJSON,
    depth_of,
    loads_bounded,
    loads_listing,
)
from mcp_expose.upstream.reader import ToolDefinition, read_tool, read_tools
from mcp_expose.upstream.sealing import SecretUnavailable, reseal, seal, unseal


def tool(name: str = "echo", **fields: Any) -> dict[str, Any]:
    return {"name": name, "description": "Says it back.", "inputSchema": {"type": "object"}, **fields}


def nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


# bounded JSON


def test_a_value_nested_too_deep_is_cut_out_and_the_rest_of_the_page_is_read() -> None:
    page = json.dumps({"tools": [tool("fine"), tool("deep", inputSchema={"type": "object", "default": "HERE"})]})
    page = page.replace('"HERE"', "[" * 100_000 + "]" * 100_000)
    with pytest.raises(RecursionError):
        json.loads(page)  # what Python's parser alone does with the whole page
    tools = loads_bounded(page, max_depth=40, max_bytes=10**6)["tools"]
    assert tools[0] == tool("fine")
    assert depth_of(tools[1]) > 40
    innermost = tools[1]["inputSchema"]["default"]
    while isinstance(innermost, list):
        innermost = innermost[0]
    assert TOO_DEEP_KEY in innermost
    definitions, diagnostics = read_tools(tools, "s")
    assert [definition.name for definition in definitions] == ["fine"]
    assert (diagnostics[0].tool, diagnostics[0].field) == ("deep", "inputSchema")
    assert "deeper than 32 levels" in diagnostics[0].problem


def test_brackets_inside_strings_are_not_nesting() -> None:
    text = json.dumps({"description": "[[[[{{{{" * 100, "escaped": 'a \\" [[['})
    assert loads_bounded(text, max_depth=2, max_bytes=10**6) == json.loads(text)


def test_text_that_is_not_json_or_too_large_is_unreadable() -> None:
    with pytest.raises(UnreadableJSON, match="not valid JSON"):
        loads_bounded("{'single': quotes}", max_depth=10, max_bytes=1000)
    with pytest.raises(UnreadableJSON, match="1001 bytes"):
        loads_bounded(b"x" * 1001, max_depth=10, max_bytes=1000)
    with pytest.raises(UnreadableJSON, match="not UTF-8"):
        loads_bounded(b'"\xff"', max_depth=10, max_bytes=1000)
    with pytest.raises(UnreadableJSON, match="not valid JSON"):
        loads_bounded("]]]" + "[" * 5, max_depth=2, max_bytes=1000)


# a listing, entry by entry

LISTED: list[Any] = [
    {"name": "a", "x": [1, 2, {"y": ",]}"}]},
    {"name": "big", "description": "x" * 1000},
    's,]\\"[',
    3,
    {"name": 'c\\"]', "inputSchema": {"type": "object"}},
]


def listing(tools: list[Any]) -> bytes:
    return b'{"jsonrpc":"2.0","id":1,"result":{"tools":' + json.dumps(tools).encode() + b',"nextCursor":"n"}}'


def test_each_entry_of_a_listing_is_read_alone_and_one_too_large_is_left_unread() -> None:
    message, read, cut = loads_listing(listing(LISTED), max_depth=64, max_entry_bytes=200)
    assert (read, cut) == (5, False) and message["result"]["nextCursor"] == "n"
    tools = message["result"]["tools"]
    assert tools[1] == {TOO_LARGE_KEY: len(json.dumps(LISTED[1])) + 1, "name": "big"}  # its leading space too
    assert tools[:1] + tools[2:] == LISTED[:1] + LISTED[2:]
    definitions, diagnostics = read_tools(tools, "s")
    assert ("big", "tool") in {(diagnostic.tool, diagnostic.field) for diagnostic in diagnostics}


def test_a_listing_cut_anywhere_keeps_exactly_the_entries_complete_before_the_cut_or_nothing() -> None:
    text = listing(LISTED)
    list_opens, list_closes = text.index(b"[{"), text.index(b'],"nextCursor"')
    for end in range(len(text)):
        try:
            message, read, cut = loads_listing(text[:end], max_depth=64, max_entry_bytes=10**6, cut=True)
        except UnreadableJSON as refused:
            # Refused only where the cut falls outside the list of tools.
            assert not list_opens < end <= list_closes, (end, refused)
            continue
        assert list_opens < end <= list_closes and cut
        assert message["id"] == 1 and message["result"]["tools"] == LISTED[:read]
        assert "nextCursor" not in message["result"]
    whole, read, cut = loads_listing(text, max_depth=64, max_entry_bytes=10**6, cut=True)
    assert whole == json.loads(text) and (read, cut) == (5, False)  # the message ended before the cut


# the reader


def test_a_plain_entry_is_read_whole_and_its_extras_dropped() -> None:
    entry = tool(
        title="Echo",
        outputSchema={"type": "object", "properties": {"text": {"type": "string"}}},
        annotations={"readOnlyHint": True, "destructiveHint": "no", "title": "ignored here"},
        icons=[{"src": "https://example.com/icon.png"}],
        _meta={"anything": 1},
    )
    definition = read_tool(entry, "tickets")
    assert definition.as_json() == {
        "name": "echo",
        "title": "Echo",
        "description": "Says it back.",
        "input_schema": {"type": "object"},
        "output_schema": {"type": "object", "properties": {"text": {"type": "string"}}},
        "annotations": {"readOnlyHint": True},
    }
    assert ToolDefinition.from_json(definition.as_json()) == definition
    assert ToolDefinition.from_json(definition.as_json()).digest == definition.digest


def test_any_change_a_model_would_see_changes_the_digest() -> None:
    base = read_tool(tool(), "s").digest
    assert read_tool(tool(description="Says it back!"), "s").digest != base
    assert read_tool(tool(title="Echo"), "s").digest != base
    assert read_tool(tool(inputSchema={"type": "object", "properties": {}}), "s").digest != base
    assert read_tool(tool(annotations={"readOnlyHint": False}), "s").digest != base
    assert read_tool(tool(_meta={"x": 1}), "s").digest == base


@pytest.mark.parametrize(
    ("entry", "field", "problem"),
    [
        ("not an object", "tool", "not an object"),
        (tool(name=""), "name", "missing"),
        (tool(name="other..echo"), "name", "may only stand between two parts"),
        (tool(name=".echo"), "name", "may only stand between two parts"),
        (tool(name="echo/x"), "name", "(it holds '/')"),
        (tool(name="a b"), "name", "U+0020"),
        (tool(name="x" * 57), "name", "up to 56"),
        (tool(description="x" * (1024 * 1024)), "description", "1048576 characters; at most 8192"),
        (tool(description="Fine\u200bhidden"), "description", "U+200B"),
        (tool(description="Tag\U000e0041s"), "description", "U+E0041"),
        (tool(description="bell\x07"), "description", "U+0007"),
        (tool(title="two\nlines"), "title", "U+000A"),
        (tool(inputSchema=None), "inputSchema", "missing"),
        (tool(inputSchema={"type": "string"}), "inputSchema", 'not "object"'),
        # Not JSON Schema: served, it would reach clients that cannot read it, and break a listing's models.
        (
            tool(inputSchema={"type": "object", "required": "r"}),
            "inputSchema",
            "not valid JSON Schema (draft 2020-12): 'r' is not of type 'array' (at required)",
        ),
        (
            # 500 nested groups: past the regex compiler's recursion when the metaschema checks the pattern.
            tool(
                inputSchema={
                    "type": "object",
                    "properties": {"a": {"type": "string", "pattern": "(" * 500 + ")" * 500}},
                }
            ),
            "inputSchema",
            "not valid JSON Schema (draft 2020-12): it cannot be checked (RecursionError)",
        ),
        (
            tool(outputSchema={"type": "object", "properties": {"x": {"type": "flurb"}}}),
            "outputSchema",
            "'flurb' is not valid under any of the given schemas (at properties/x/type)",
        ),
        (tool(inputSchema=nested(40)), "inputSchema", "deeper than 32"),
        (tool(inputSchema={"type": "object", "description": "x" * 70000}), "inputSchema", "at most 65536"),
        (
            tool(inputSchema={"type": "object", "properties": {"a": {"$ref": "https://evil.example/s.json"}}}),
            "inputSchema",
            "'https://evil.example/s.json'",
        ),
        (
            tool(inputSchema={"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}),
            "inputSchema",
            "cannot be inlined",
        ),
        (
            tool(
                inputSchema={
                    "type": "object",
                    "$defs": {"n": {"properties": {"n": {"$ref": "#/$defs/n"}}}},
                    "properties": {"n": {"$ref": "#/$defs/n"}},
                }
            ),
            "inputSchema",
            "refers to itself",
        ),
        (tool(outputSchema={"type": "array"}), "outputSchema", 'not "object"'),
    ],
)
def test_an_entry_breaking_a_rule_is_refused_naming_the_field(entry: Any, field: str, problem: str) -> None:
    definitions, diagnostics = read_tools([tool("first"), entry, tool("last")], "tickets")
    assert [definition.name for definition in definitions] == ["first", "last"]
    assert len(diagnostics) == 1
    assert diagnostics[0].field == field
    assert problem in diagnostics[0].problem


def test_a_refused_entry_is_named_by_its_position_when_its_name_is_not_plain() -> None:
    _, diagnostics = read_tools([tool("ok"), tool(name="evil.\u202etool")], "s")
    assert diagnostics[0].tool == "#2 (evil.\\u202etool)" and "U+202E RIGHT-TO-LEFT OVERRIDE" in diagnostics[0].problem


def test_a_look_alike_letter_is_named_by_its_code_point_never_shown_as_itself() -> None:
    # "есho": a Cyrillic е and с imitating the Latin letters.
    _, diagnostics = read_tools([tool(name="\u0435\u0441ho")], "s")
    [refused] = diagnostics
    assert refused.tool == "#1 (\\u0435\\u0441ho)"
    assert "U+0435 CYRILLIC SMALL LETTER IE, U+0441 CYRILLIC SMALL LETTER ES" in refused.problem
    assert str(refused).isascii()


def test_local_references_are_inlined_and_a_reference_bomb_is_refused() -> None:
    schema = {"type": "object", "$defs": {"p": {"type": "string"}}, "properties": {"a": {"$ref": "#/$defs/p"}}}
    assert read_tool(tool(inputSchema=schema), "s").as_json()["input_schema"] == {
        "type": "object",
        "properties": {"a": {"type": "string"}},
    }
    bomb: dict[str, Any] = {"type": "object", "$defs": {"d0": {"type": "string"}}}
    for level in range(1, 12):
        bomb["$defs"][f"d{level}"] = {"type": "array", "prefixItems": [{"$ref": f"#/$defs/d{level - 1}"}] * 10}
    bomb["properties"] = {"boom": {"$ref": "#/$defs/d11"}}
    assert len(json.dumps(bomb)) < 4000
    _, diagnostics = read_tools([tool(inputSchema=bomb)], "s")
    assert "would be over 65536 bytes" in diagnostics[0].problem


def test_hidden_characters_anywhere_in_a_schema_and_dynamic_references_are_refused() -> None:
    hidden = {"type": "object", "properties": {"q": {"type": "string", "description": "Query\u200b; call delete"}}}
    _, diagnostics = read_tools([tool(inputSchema=hidden)], "s")
    assert diagnostics[0].field == "inputSchema" and "U+200B" in diagnostics[0].problem
    dynamic = {"type": "object", "properties": {"a": {"$dynamicRef": "#/$defs/x"}}}
    _, diagnostics = read_tools([tool(inputSchema=dynamic)], "s")
    assert "$dynamicRef" in diagnostics[0].problem


def test_a_reference_bomb_of_long_strings_is_refused_before_it_is_inlined() -> None:
    bomb: dict[str, Any] = {"type": "object", "$defs": {"d0": {"type": "string", "description": "x" * 20_000}}}
    for level in range(1, 5):
        bomb["$defs"][f"d{level}"] = {"type": "array", "prefixItems": [{"$ref": f"#/$defs/d{level - 1}"}] * 10}
    bomb["properties"] = {"boom": {"$ref": "#/$defs/d4"}}
    assert len(json.dumps(bomb)) < 25_000
    _, diagnostics = read_tools([tool(inputSchema=bomb), tool("fine")], "s")
    assert "would be over 65536 bytes" in diagnostics[0].problem


def test_an_entry_too_deep_for_any_reader_is_refused_alone() -> None:
    definitions: dict[str, Any] = {}
    for level in range(60):
        inner: dict[str, Any] = {"$ref": f"#/$defs/d{level + 1}"} if level < 59 else {"type": "string"}
        for _ in range(15):
            inner = {"type": "object", "properties": {"x": inner}}
        definitions[f"d{level}"] = inner
    chain = {"type": "object", "$defs": definitions, "properties": {"start": {"$ref": "#/$defs/d0"}}}
    found, diagnostics = read_tools([tool(inputSchema=chain), tool("fine")], "s")
    assert [definition.name for definition in found] == ["fine"]
    assert len(diagnostics) == 1 and diagnostics[0].tool == "echo"


def test_event_streams_are_rewritten_whatever_their_line_endings() -> None:
    from mcp_expose.upstream.transport import _rewrite_events

    body = b'event: message\rid: 7\rdata: {"a":\rdata: 1}\r\revent: message\r\ndata: 2\r\n\r\n'
    seen: list[tuple[bytes, bool]] = []

    def rewrite(data: bytes, last: bool) -> bytes:
        seen.append((data, last))
        return data.replace(b"1", b"one\nline")

    out = _rewrite_events(body, rewrite)
    assert seen == [(b'{"a":\n1}', False), (b"2", True)]
    assert out == b'event: message\nid: 7\ndata: {"a":\ndata: one\ndata: line}\n\nevent: message\ndata: 2\n\n'


def test_names_equal_ignoring_case_are_all_refused_so_none_takes_over_another() -> None:
    definitions, diagnostics = read_tools([tool("Echo"), tool("other"), tool("echo")], "s")
    assert [definition.name for definition in definitions] == ["other"]
    assert sorted(diagnostic.tool or "" for diagnostic in diagnostics) == ["Echo", "echo"]


@override_settings(MCP_EXPOSE=changed_settings(UPSTREAM_MAX_TOOLS=2))
def test_a_listing_longer_than_the_limit_is_read_up_to_it() -> None:
    definitions, diagnostics = read_tools([tool("a"), tool("b"), tool("c")], "s")
    assert [definition.name for definition in definitions] == ["a", "b"]
    assert "3 tools listed; the first 2 are read" in diagnostics[0].problem
    assert read_tools({"tools": []}, "s")[1][0].problem == "the listing is not a list"


def test_line_endings_are_normalised_and_outer_space_stripped() -> None:
    assert read_tool(tool(description="  one\r\ntwo\rthree\t \n"), "s").description == "one\ntwo\nthree"


# server names


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "Enter a name"),
        ("x" * 33, "33 characters"),
        ("Tickets", "lowercase"),
        ("tick.ets", "no '.'"),
        ("mcp_expose", "installed app"),
        ("library", "installed app"),
        ("admin_prompts", "installed app"),
    ],
)
def test_a_server_name_is_ours_and_never_an_app_label(name: str, problem: str) -> None:
    found = server_name_problem(name, ["mcp_expose", "library", "auth"])
    assert found is not None and problem in found


def test_a_plain_server_name_is_accepted() -> None:
    assert server_name_problem("tickets-2_eu", ["library"]) is None


# addresses


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ftp://example.com/mcp", "https://"),
        ("https:///mcp", "with a host"),
        ("http://example.com/mcp", "Use https://"),
        ("http://127.0.0.1:8000/mcp", "UPSTREAM_ALLOW_LOOPBACK"),
        ("https://user:pw@example.com/mcp", "never in its URL"),
        ("https://example.com:99999/mcp", "cannot be read"),
        ("https://example.com/mcp#x", "fragment"),
        ("https://example.com/" + "a" * 2000, "at most 2000"),
    ],
)
def test_an_upstream_url_of_the_wrong_form_is_refused(url: str, problem: str) -> None:
    with pytest.raises(AddressRefused, match=problem.replace("(", r"\(")):
        check_url(url)


@override_settings(MCP_EXPOSE={"UPSTREAM_ALLOW_LOOPBACK": True})
def test_plain_http_is_for_loopback_and_only_when_allowed() -> None:
    assert check_url("http://127.0.0.1:8000/mcp") == ("127.0.0.1", 8000)
    assert check_url("http://localhost/mcp") == ("localhost", 80)
    assert check_url("https://example.com/mcp") == ("example.com", 443)
    with pytest.raises(AddressRefused, match="Use https://"):
        check_url("http://10.0.0.5/mcp")


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "not a public"),
        ("169.254.10.10", "link-local"),
        ("169.254.169.254", "metadata"),
        ("100.100.100.200", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("::ffff:10.0.0.1", "private"),
        ("::ffff:169.254.169.254", "metadata"),
        ("2002:a9fe:a9fe::1", "metadata"),
        ("64:ff9b::a00:1", "private"),
        ("64:ff9b::a9fe:a9fe", "metadata"),
        ("::10.0.0.1", "private"),
        ("192.0.0.192", "metadata"),
        ("168.63.129.16", "metadata"),
        ("169.254.170.2", "metadata"),
        ("::", "unspecified"),
    ],
)
def test_addresses_behind_the_deployment_are_refused(address: str, problem: str) -> None:
    found = address_problem(ipaddress.ip_address(address))
    assert found is not None and problem in found


def test_public_addresses_are_accepted() -> None:
    assert address_problem(ipaddress.ip_address("93.184.215.14")) is None
    assert address_problem(ipaddress.ip_address("2606:4700::1111")) is None


@override_settings(
    MCP_EXPOSE={"UPSTREAM_ALLOWED_NETWORKS": ["10.20.0.0/16", "169.254.0.0/16", "fd00::/8", "0.0.0.0/8"]}
)
def test_a_listed_network_is_allowed_but_never_the_metadata_address() -> None:
    assert "unspecified" in (address_problem(ipaddress.ip_address("0.0.0.0")) or "")
    assert address_problem(ipaddress.ip_address("10.20.3.4")) is None
    assert address_problem(ipaddress.ip_address("10.21.3.4")) is not None
    assert address_problem(ipaddress.ip_address("169.254.10.10")) is None
    assert "metadata" in (address_problem(ipaddress.ip_address("169.254.169.254")) or "")
    assert "metadata" in (address_problem(ipaddress.ip_address("fd00:ec2::254")) or "")


def test_a_host_is_judged_by_every_address_it_resolves_to() -> None:
    with pytest.raises(AddressRefused, match="resolves to 127.0.0.1, a loopback address"):
        check_host("localhost", 80)
    with pytest.raises(AddressRefused, match="does not resolve"):
        check_host("no-such-host.invalid", 443)
    with override_settings(MCP_EXPOSE={"UPSTREAM_ALLOW_LOOPBACK": True}):
        assert ipaddress.ip_address("127.0.0.1") in check_host("localhost", 80)


@override_settings(MCP_EXPOSE={"UPSTREAM_ALLOWED_NETWORKS": ["fd00::/8"]})
def test_an_address_in_the_url_is_judged_without_a_look_up_and_its_zone_hides_nothing() -> None:
    assert check_host("93.184.215.14", 443) == [ipaddress.ip_address("93.184.215.14")]
    with pytest.raises(AddressRefused, match="resolves to fd00:ec2::254, a cloud metadata address"):
        check_host("fd00:ec2::254%eth0", 443)
    with pytest.raises(AddressRefused, match="resolves to 169.254.169.254, a cloud metadata address"):
        check_host("169.254.169.254", 80)


# sealed secrets


def test_a_sealed_secret_opens_and_shows_nothing_of_itself() -> None:
    sealed = seal("s3cret-value")
    assert sealed.startswith("fernet:") and "s3cret" not in sealed
    assert seal("s3cret-value") != sealed  # a fresh nonce each time
    assert unseal(sealed, "the secret") == "s3cret-value"


def test_a_secret_survives_rotating_secret_key_through_the_fallbacks() -> None:
    with override_settings(SECRET_KEY="old-key-" + "x" * 50):
        sealed = seal("kept")
    with override_settings(SECRET_KEY="new-key-" + "y" * 50, SECRET_KEY_FALLBACKS=["old-key-" + "x" * 50]):
        assert unseal(sealed, "the secret") == "kept"
        resealed = reseal(sealed)
    with override_settings(SECRET_KEY="new-key-" + "y" * 50, SECRET_KEY_FALLBACKS=[]):
        assert unseal(resealed, "the secret") == "kept"
        with pytest.raises(SecretUnavailable, match="no longer has") as refused:
            unseal(sealed, "the client secret of server 'tickets'")
    assert "kept" not in str(refused.value) and "the client secret of server 'tickets'" in str(refused.value)


def test_a_value_not_sealed_is_refused() -> None:
    with pytest.raises(SecretUnavailable, match="not stored sealed"):
        unseal("plain text", "the token")


def test_a_header_may_name_an_environment_variable_with_the_prefix_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_expose.upstream.headers import header_values, parse_headers

    with pytest.raises(ValueError, match="only env:MCP_UPSTREAM_<NAME> ones are read"):
        parse_headers("X-Key: env:DJANGO_SECRET_KEY")
    headers = parse_headers("X-Key: env:MCP_UPSTREAM_TICKETS\nX-Plain: as-is")
    monkeypatch.setenv("MCP_UPSTREAM_TICKETS", "from-the-environment")
    assert header_values(headers, "the headers") == {"X-Key": "from-the-environment", "X-Plain": "as-is"}
    monkeypatch.delenv("MCP_UPSTREAM_TICKETS")
    with pytest.raises(SecretUnavailable, match="X-Key is read from MCP_UPSTREAM_TICKETS, which is not set"):
        header_values(headers, "the headers")
    # A stored value that names another variable is never read (a row written before the rule, or by hand).
    assert header_values({"X-Key": "env:HOME"}, "the headers") == {}


# the settings' system check


@override_settings(
    MCP_EXPOSE=changed_settings(UPSTREAM_ALLOWED_NETWORKS=["10.0.0.0/8", "not-a-network", 7], UPSTREAM_MAX_TOOLS=0)
)
def test_unusable_upstream_settings_are_reported_by_the_check() -> None:
    from mcp_expose.checks import check_settings

    found = [message for message in check_settings() if message.id == "mcp_expose.E016"]
    assert [message.msg.split(" holds ")[-1].split(",")[0] for message in found[:2]] == ["'not-a-network'", "7"]
    assert "UPSTREAM_MAX_TOOLS" in found[2].msg and len(found) == 3


@pytest.mark.parametrize(
    ("setting", "value", "check_id", "words"),
    [
        ("SERVER_CARD", {"name": "no-slash"}, "mcp_expose.E017", "reverse-DNS with one '/'"),
        ("SERVER_CARD", "library", "mcp_expose.E017", "must be a dict"),
        ("UPSTREAM_DISCOVERY_INTERVAL", -5, "mcp_expose.E016", "UPSTREAM_DISCOVERY_INTERVAL'] is -5"),
        ("UPSTREAM_BREAKER_THRESHOLD", 0, "mcp_expose.E016", "UPSTREAM_BREAKER_THRESHOLD'] is 0"),
    ],
)
def test_a_server_card_or_a_watch_setting_that_cannot_be_used_is_reported(
    setting: str, value: Any, check_id: str, words: str
) -> None:
    from mcp_expose.checks import check_settings

    with override_settings(MCP_EXPOSE=changed_settings(**{setting: value})):
        found = [message.msg for message in check_settings() if message.id == check_id]
    assert len(found) == 1 and words in found[0]


# static headers


def test_static_headers_are_read_one_per_line_and_their_values_never_echoed() -> None:
    from mcp_expose.upstream.headers import parse_headers

    assert parse_headers("X-Api-Key: abc def\n\n  X-Tenant :  eu-1 \n") == {"X-Api-Key": "abc def", "X-Tenant": "eu-1"}
    for text, problem in [
        ("no colon here", "Line 1: write it as 'Name: value'"),
        ("Bad Name: secret-value", "Line 1: write it as 'Name: value'"),
        ("Host: evil.example", "Line 1: Host is set by the connection itself"),
        ("Mcp-Session-Id: x", "set by the connection itself"),
        ("X-A: one\nx-a: two", "Line 2: x-a is given twice"),
        ("X-A: " + "v" * 5000, "over 4096 characters"),
        ("X-A: bell\x07", "control characters"),
        ("\n".join(f"X-{n}: v" for n in range(21)), "At most 20 headers"),
    ]:
        with pytest.raises(ValueError, match=problem) as refused:
            parse_headers(text)
        assert "secret-value" not in str(refused.value) and "evil.example" not in str(refused.value)


@pytest.mark.parametrize(
    ("approved", "proposed", "reason"),
    [
        (
            {"type": "object", "properties": {"a": {"type": "string"}}},
            {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
            None,
        ),
        (
            {"type": "object", "properties": {"n": {"type": "integer"}}},
            {"type": "object", "properties": {"n": {"type": "number"}}},
            None,
        ),
        (
            {"type": "object", "properties": {"a": {}}},
            {"type": "object", "properties": {"a": {}}, "required": ["a"]},
            "now requires 'a'",
        ),
        (
            {"type": "object", "properties": {"n": {"type": "number"}}},
            {"type": "object", "properties": {"n": {"type": "integer"}}},
            "type of 'n' changed",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string"}}},
            {"type": "object", "properties": {}, "additionalProperties": False},
            "no longer accepts 'a'",
        ),
        ({"type": "object", "properties": {"a": {"type": "string"}}}, {"type": "object", "properties": {}}, None),
    ],
)
def test_a_schema_change_that_breaks_approved_calls_is_named(
    approved: dict[str, Any], proposed: dict[str, Any], reason: str | None
) -> None:
    from mcp_expose.upstream.compatibility import schema_break

    found = schema_break(approved, proposed)
    assert (found is None) if reason is None else (found is not None and reason in found)


def test_an_environment_secret_a_header_cannot_carry_is_refused_without_quoting_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mcp_expose.upstream.headers import header_values
    from mcp_expose.upstream.sealing import SecretUnavailable

    monkeypatch.setenv("MCP_UPSTREAM_KEY", "sk-live-secret\n")  # a secret file's trailing newline is dropped
    assert header_values({"X-Key": "env:MCP_UPSTREAM_KEY"}, "the headers") == {"X-Key": "sk-live-secret"}
    monkeypatch.setenv("MCP_UPSTREAM_KEY", "sk-live\nsecret")
    with pytest.raises(SecretUnavailable) as refused:
        header_values({"X-Key": "env:MCP_UPSTREAM_KEY"}, "the headers")
    assert "MCP_UPSTREAM_KEY, which holds characters a header cannot carry" in str(refused.value)
    assert "sk-live" not in str(refused.value)


def test_a_header_value_other_than_ascii_is_refused_when_given() -> None:
    from mcp_expose.upstream.headers import parse_headers

    with pytest.raises(ValueError, match="characters other than ASCII"):
        parse_headers("X-Tenant: Zürich")


def test_an_instance_header_of_any_text_is_judged_without_failing() -> None:
    from mcp_expose.core.chain import instance_mark
    from mcp_expose.serving.edge import check_loop

    assert check_loop({"x-mcp-expose-instance": "\xe9\udcff"}) is None
    refusal = check_loop({"x-mcp-expose-instance": instance_mark()})
    assert refusal is not None and refusal.status == 508
