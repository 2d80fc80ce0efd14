"""The demo's upstream: a small, bare official-SDK MCP server that the demo registers as the upstream "helpdesk".

`manage.py demo` starts it on loopback beside the library (`uvicorn project.helpdesk:app`). Its `lookup_ticket`
tool reads its description from `helpdesk-description.txt` in the demo's data directory when that file exists:
write something there, press "Discover now" in the admin, and the change waits for approval while clients keep
the approved text.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from starlette.responses import PlainTextResponse

server = MCPServer("helpdesk", log_level="WARNING")

TICKETS = {
    1: {"id": 1, "title": "Projector in room 2 flickers", "status": "open"},
    2: {"id": 2, "title": "Return box jammed", "status": "in progress"},
    3: {"id": 3, "title": "Wi-Fi password card missing", "status": "closed"},
}
DESCRIPTION = "Look up a helpdesk ticket by its number: its title and status."


@server.tool()
async def lookup_ticket(ticket_id: int) -> dict[str, Any]:
    """Look up a helpdesk ticket by its number: its title and status."""
    ticket = TICKETS.get(ticket_id)
    if ticket is None:
        raise ValueError(f"There is no ticket {ticket_id}.")
    return ticket


@server.tool()
async def open_tickets() -> list[dict[str, Any]]:
    """The tickets still open or in progress."""
    return [ticket for ticket in TICKETS.values() if ticket["status"] != "closed"]


@server.tool()
async def close_ticket(ticket_id: int) -> str:
    """Close a ticket."""
    if ticket_id not in TICKETS:
        raise ValueError(f"There is no ticket {ticket_id}.")
    TICKETS[ticket_id]["status"] = "closed"
    return f"Ticket {ticket_id} is closed."


def _description_file() -> Path:
    return Path(os.environ.get("DEMO_DATA_DIR", Path(__file__).resolve().parent.parent / "var")) / (
        "helpdesk-description.txt"
    )


_list_tools = server.list_tools


async def list_tools() -> list[Any]:
    tools = await _list_tools()
    path = _description_file()
    if path.exists():
        for tool in tools:
            if tool.name == "lookup_ticket":
                tool.description = path.read_text().strip() or DESCRIPTION
    return tools


server.list_tools = list_tools  # type: ignore[method-assign]

_mcp = server.streamable_http_app(stateless_http=True)


async def app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] == "http" and scope["path"] == "/":
        await PlainTextResponse("helpdesk upstream")(scope, receive, send)
        return
    await _mcp(scope, receive, send)
