"""Bounded strings and closed objects over the live server, with the SDK client in both eras (the 2026-07-28
call goes by the fast path, the 2025-11-25 one through the SDK): the same refusal, nothing reaching the database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .live import LIVE_SETTINGS, LiveServer, run_server
from .mcp_client import MODES, connect

pytestmark = [pytest.mark.anyio, pytest.mark.live]

mode = pytest.mark.parametrize("mode", list(MODES))

LONG = "x" * 60_000
OVER_THE_CAP = "x" * 5_000  # a parameter's cap is 1,000; a body field has none, as over HTTP


@pytest.fixture(scope="module")
def server(data: Path) -> Iterator[LiveServer]:
    """The test settings, logging at DEBUG: the fast path then logs each call it answers itself."""
    with run_server(data, **LIVE_SETTINGS, MCP_EXPOSE_LOG_LEVEL="DEBUG") as live:
        yield live


def fast_answers(server: LiveServer) -> int:
    return server.log().count("on the fast path")


async def call(server: LiveServer, key: str, mode: str, tool: str, arguments: dict[str, Any]) -> Any:
    async with connect(server.mcp_url, key, mode) as client:
        return await client.call_tool(tool, arguments)


def refusal(result: Any) -> list[tuple[str, str]]:
    assert result.is_error, result
    error = result.structured_content["error"]
    assert error["code"] == "invalid_input"
    return [(problem["path"], problem["message"]) for problem in error["details"]]


@mode
@pytest.mark.parametrize(
    ("tool", "arguments", "path"),
    [
        ("library.authors.list", {"filters": {"name__icontains": LONG}}, "$.filters.name__icontains"),
        ("library.books.list", {"search": LONG}, "$.search"),
        ("library.catalogue_page", {"q": LONG}, "$.q"),
        ("library.search_books", {"query": LONG}, "$.query"),
    ],
)
async def test_a_long_string_is_refused_before_the_database(
    server: LiveServer, key: str, mode: str, tool: str, arguments: dict[str, Any], path: str
) -> None:
    answered_fast = fast_answers(server)
    assert refusal(await call(server, key, mode, tool, arguments)) == [(path, "At most 1000 characters.")]
    assert fast_answers(server) - answered_fast == 1  # a plain call, in either era: the fast path's refusal
    log = server.log()
    assert "Traceback" not in log and "OperationalError" not in log


@mode
async def test_nested_objects_are_closed_in_the_listing_and_on_call(server: LiveServer, key: str, mode: str) -> None:
    async with connect(server.mcp_url, key, mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        good = {
            "order": {"item": "pen", "window": {"start": 1, "end": 2}, "tags": [{"name": "red"}]},
            "where": {"x": 1, "y": 2},
            "labels": {"any": {"name": "n"}},
        }
        accepted = await client.call_tool("toolbox.shapes", good)
        refused = await client.call_tool(
            "toolbox.shapes",
            {
                "order": {
                    "item": "pen",
                    "window": {"start": 1, "end": 2, "zzz": 1},
                    "tags": [{"name": "red", "zzz": 1}],
                },
                "where": {"x": 1, "y": 2, "zzz": 1},
                "labels": {"any": {"name": "n", "zzz": 1}},
            },
        )
    order = tools["toolbox.shapes"].input_schema["properties"]["order"]
    assert order["additionalProperties"] is False
    assert order["properties"]["window"]["additionalProperties"] is False
    assert order["properties"]["tags"]["items"]["additionalProperties"] is False
    assert tools["toolbox.shapes"].input_schema["properties"]["where"]["additionalProperties"] is False
    assert not accepted.is_error and accepted.structured_content["labels"] == ["any"]
    assert [path for path, _ in refusal(refused)] == [
        "$.labels.any.zzz",
        "$.order.tags[0].zzz",
        "$.order.window.zzz",
        "$.where.zzz",
    ]


@mode
async def test_a_nested_serializer_is_closed_and_its_mappings_stay_open(
    server: LiveServer, key: str, mode: str
) -> None:
    async with connect(server.mcp_url, key, mode) as client:
        tool = next(t for t in (await client.list_tools()).tools if t.name == "toolbox.shipments")
        accepted = await client.call_tool(
            "toolbox.shipments",
            {
                "recipient": OVER_THE_CAP,
                "address": {"street": "1 Main St", "city": "Leeds"},
                "labels": {"gift": OVER_THE_CAP},
                "extra": {"free": ["form"]},
            },
        )
        refused = await client.call_tool(
            "toolbox.shipments",
            {
                "recipient": "Ada",
                "address": {"street": "1 Main St" * 20, "city": "Leeds", "zzz": 1},
            },
        )
    properties = tool.input_schema["properties"]
    assert properties["address"]["additionalProperties"] is False
    # Body fields take over MCP what they take over HTTP: no cap where the serializer declares no max_length.
    assert properties["labels"]["additionalProperties"] == {"type": "string"}
    assert "maxLength" not in properties["recipient"]
    assert not accepted.is_error and accepted.structured_content["extra"] == {"free": ["form"]}
    assert accepted.structured_content["recipient"] == OVER_THE_CAP
    assert accepted.structured_content["labels"] == {"gift": OVER_THE_CAP}
    assert refusal(refused) == [
        ("$.address.street", "At most 100 characters."),
        ("$.address.zzz", "Unexpected argument; allowed here: city, street."),
    ]
