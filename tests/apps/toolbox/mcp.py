"""Tools that exist to test the invocation machinery: slow, cancellable, chatty, large, chained, confirmed."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from typing import Annotated

import anyio
from django.db import connection
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

import mcp_expose
from mcp_expose import Elicit, InvocationContext
from mcp_expose.outbound import mcp_client
from project.library.models import Author

from . import views
from .api import ShipmentView

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def _wait(seconds: float) -> None:
    """Sleep in small steps, touching the database each time (as real work would)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.05)
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")


@mcp_expose.tool(timeout=1.0)
def slow_write(marker: str, seconds: float) -> str:
    """Write a row, then work for a while: a timeout must undo the write."""
    Author.objects.create(name=marker)
    _wait(seconds)
    return marker


@mcp_expose.tool
def write_then_wait(marker: str, seconds: float, context: InvocationContext) -> str:
    """Write a row, tell the client, then work: a disconnect must undo the write."""
    Author.objects.create(name=marker)
    context.report_progress_sync(1, 2, "written")
    _wait(seconds)
    return marker


@mcp_expose.tool(read_only=True)
async def count_up(steps: Annotated[int, Field(ge=1, le=20)], context: InvocationContext) -> int:
    """Report progress once per step."""
    for step in range(1, steps + 1):
        await context.report_progress(step, steps, f"step {step}")
    return steps


@mcp_expose.tool(read_only=True)
async def chatty(context: InvocationContext) -> str:
    """Logs twice, then answers: on a 2025-11-25 event stream the log messages come before the answer."""
    await context.log("info", "starting")
    await context.log("debug", {"step": 1, "of": 2})
    return "done"


@mcp_expose.tool(read_only=True, max_result_bytes=2000)
def big(count: int) -> list[str]:
    """Return `count` strings of 100 characters: more than the 2000-byte limit allows."""
    return [f"{index:04d}" + "x" * 96 for index in range(count)]


@mcp_expose.tool(read_only=True, rate_limit="3/day")
def limited() -> str:
    """Three calls a day per caller (a day, so that no window ends between a test's calls)."""
    return "ok"


@mcp_expose.tool(read_only=True)
def chain_info(context: InvocationContext) -> dict[str, object]:
    """The conversation and depth this call arrived with."""
    return {"depth": context.chain.depth, "conversation": context.chain.conversation_id}


@mcp_expose.tool(read_only=True)
async def relay(url: str, api_key: str, context: InvocationContext) -> dict[str, object]:
    """Call chain_info on another MCP server, one agent deeper."""
    async with mcp_client(context, url, headers={"Authorization": f"Bearer {api_key}"}) as client:
        result = await client.call_tool("toolbox.chain_info", {})
    return {"downstream": result.structured_content}


@mcp_expose.tool(requires_confirmation=True, destructive=True)
def launch(target: str) -> str:
    """Do something a person must approve first (records the launch as an author row)."""
    Author.objects.create(name=f"launched-{target}")
    return f"launched {target}"


@mcp_expose.tool(read_only=True)
def header_names(context: InvocationContext) -> list[str]:
    """The request headers a tool can see (credentials never among them)."""
    return sorted(context.headers)


@mcp_expose.tool(requires_confirmation="approval_page", destructive=True)
def launch_on_page(target: str) -> str:
    """Needs the user's own yes on the site's approval page: an answer from the client never does."""
    Author.objects.create(name=f"launched-on-page-{target}")
    return f"launched {target}"


@mcp_expose.tool(requires_confirmation=True, rate_limit="1/day")
def launch_once(target: str) -> str:
    """Needs a person's yes, and runs at most once a day per caller (a day, so that no window ends between a test's calls)."""
    Author.objects.create(name=f"launched-once-{target}")
    return f"launched {target}"


@mcp_expose.tool(requires_confirmation=True, destructive=False)
async def launch_named(target: str, context: InvocationContext) -> str:
    """Needs a person's yes, then asks the user to name the launch before it writes anything."""
    form = {"type": "object", "properties": {"codename": {"type": "string"}}, "required": ["codename"]}
    answer = (await context.ask({"codename": Elicit("Name this launch", form)}))["codename"]
    codename = (answer.content or {}).get("codename", "") if answer.action == "accept" else ""
    await Author.objects.acreate(name=f"launched-{target}-{codename}")
    return f"launched {target} as {codename}"


@mcp_expose.tool(read_only=True)
async def ask_twice(context: InvocationContext) -> str:
    """Asks two different questions under the same key, one after the other."""
    first = (
        await context.ask({"v": Elicit("First?", {"type": "object", "properties": {"first": {"type": "string"}}})})
    )["v"]
    second = (
        await context.ask({"v": Elicit("Second?", {"type": "object", "properties": {"second": {"type": "string"}}})})
    )["v"]
    return f"{(first.content or {}).get('first')} {(second.content or {}).get('second')}"


@mcp_expose.tool(read_only=True)
async def greet(context: InvocationContext) -> str:
    """Asks the user's name (a question to the client), then greets them."""
    form = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    answer = (await context.ask({"who": Elicit("What is your name?", form)}))["who"]
    return f"Hello, {(answer.content or {}).get('name', 'stranger')}!"


@mcp_expose.tool(read_only=True)
async def sdk_caller() -> dict[str, object]:
    """Who the MCP SDK says the caller is (its get_access_token()), as code written for the SDK would ask."""
    from mcp.server.auth.middleware.auth_context import get_access_token

    token = get_access_token()
    return {"client_id": token.client_id if token else None, "scopes": token.scopes if token else None}


@mcp_expose.tool(read_only=True)
def colliding_keys() -> dict[object, str]:
    """Two keys that become the same JSON key: refused as an internal failure, whoever answers the call."""
    return {1: "one", "1": "also one"}


class Tag(BaseModel):
    name: str


class Window(TypedDict):
    start: int
    end: int


@dataclass
class Point:
    x: int
    y: int


class Order(BaseModel):
    item: str
    window: Window
    tags: list[Tag] = []


@mcp_expose.tool(read_only=True)
def shapes(order: Order, where: Point, labels: dict[str, Tag] | None = None) -> dict[str, object]:
    """Nested shapes of every kind (a model holding a TypedDict and a list of models, a dataclass, a mapping)."""
    return {
        "item": order.item,
        "window": order.window,
        "tags": len(order.tags),
        "x": where.x,
        "labels": sorted(labels or {}),
    }


mcp_expose.expose_view(ShipmentView)


@mcp_expose.tool(read_only=True, scopes=["library:write"])
def routed(
    region: Annotated[
        str, Field(description="Also sent as Mcp-Param-Region.", json_schema_extra={"x-mcp-header": "Region"})
    ],
) -> str:
    """A parameter mirrored into a header the SDK checks, behind a scope: hidden, it must answer like an unknown tool."""
    return region


# Views that read what VIEW_MIDDLEWARE sets on the request (tests/urls.py routes them).
mcp_expose.expose_view(views.TenantView, read_only=True)
mcp_expose.expose_view(views.tenant_page, methods=["get"], read_only=True)


# MCP tasks: tools that run in a worker of Django's Tasks framework for clients that support tasks.


@mcp_expose.tool(read_only=True, task="optional", timeout=60)
async def slow_task(seconds: Annotated[float, Field(ge=0, le=60)], context: InvocationContext) -> dict:
    """Works for `seconds` seconds, reporting progress, then says who it ran as and where."""
    await context.report_progress(0, 1, "starting")
    await anyio.sleep(seconds)
    return {"slept": seconds, "user": context.user.get_username(), "in_task": context.in_task}


@mcp_expose.tool(task="required", scopes=["library:write"])
def author_task(name: str) -> dict:
    """Runs only as a task, and writes: creates an author (in the call's transaction)."""
    author = Author.objects.create(name=name)
    return {"author": author.pk, "name": author.name}


@mcp_expose.tool(read_only=True, task="optional")
async def asking_task(context: InvocationContext) -> dict:
    """Asks the user's name (a task waits as input_required), then greets them."""
    answer = (await context.ask({"name": Elicit("What is your name?", NAME_FORM)}))["name"]
    return {"hello": (answer.content or {}).get("name") if answer.action == "accept" else None}


@mcp_expose.tool(read_only=True, task="required", timeout=600)
def stuck_task() -> dict:
    """Runs only as a task and never finishes in time: its worker is killed under it."""
    _wait(600)
    return {}


@mcp_expose.tool(requires_confirmation=True, destructive=True, task="optional")
def confirmed_task(label: str) -> dict:
    """Needs a person's yes in the call, before its task is made."""
    return {"confirmed": label}


# MCP Apps: a page with what a host must be told (CSP, permissions, border), a tool only that page may call, and
# one that needs a scope most keys do not have.
PANEL = mcp_expose.App(
    "toolbox/panel.html",
    connect_domains=["https://api.example.com"],
    resource_domains=["https://cdn.example.com"],
    permissions=["clipboard-write"],
    prefers_border=True,
    title="Toolbox panel",
)


@mcp_expose.tool(read_only=True, app=PANEL)
def panel_count(count: int = 3) -> dict[str, int]:
    """A count, shown on the toolbox panel."""
    return {"count": count}


@mcp_expose.tool(read_only=True, app=replace(PANEL, visibility=("app",)))
def panel_refresh(count: int = 0) -> dict[str, int]:
    """What the panel calls to refresh itself: apps only."""
    return {"count": count + 1}


@mcp_expose.tool(read_only=True, scopes=["toolbox:secret"], app="toolbox/secret_panel.html")
def secret_panel() -> dict[str, str]:
    """Needs a scope few keys hold; so does its page."""
    return {"secret": "kept"}


# Only in the server that shows what a host gets for a page that does not render: everywhere else its E019 would
# stop every management command (db_worker, migrate's checks), as it should.
if os.environ.get("MCP_TEST_BROKEN_APP") == "1":

    @mcp_expose.tool(read_only=True, app="toolbox/broken.html")
    def broken_panel() -> dict[str, str]:
        """Its page's template names a static file that does not exist."""
        return {"ok": "yes"}
