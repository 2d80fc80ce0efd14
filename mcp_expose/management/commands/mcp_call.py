from __future__ import annotations

import json
from typing import Any

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand, CommandError

from mcp_expose.calls.dispatch import CallRequest, call_tool
from mcp_expose.catalog.compiled import provider
from mcp_expose.core.asking import TaskRequired
from mcp_expose.core.errors import UnknownTool
from mcp_expose.management.cli import local_principal
from mcp_expose.serving.wire import render_outcome


class Command(BaseCommand):
    help = "Call a tool as a user, through the same dispatcher and policy as MCP clients."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("tool", help="The tool's name, as tools/list shows it.")
        parser.add_argument("arguments", nargs="?", default="{}", help="The arguments as a JSON object.")
        parser.add_argument("--user", required=True, help="Call as this user.")
        parser.add_argument("--scopes", help="Space-separated scopes the caller holds (default: all).")
        parser.add_argument(
            "--base-url",
            default="",
            help="This site's address (e.g. https://shop.example.com), for the links views build; default http://localhost.",
        )

    def handle(
        self, *args: Any, tool: str, arguments: str, user: str, scopes: str | None, base_url: str, **options: Any
    ) -> None:
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise CommandError(f"The arguments are not valid JSON: {exc}.") from None
        if not isinstance(parsed, dict):
            raise CommandError("The arguments must be a JSON object, such as '{\"book_id\": 1}'.")
        catalog = provider.get_sync()
        principal = local_principal(user, scopes, catalog)
        try:
            outcome = async_to_sync(call_tool)(catalog, principal, tool, parsed, CallRequest(base_url=base_url))
        except UnknownTool as exc:
            raise CommandError(f"{exc} (unknown, disabled, or not available to {user!r}).") from None
        except TaskRequired:
            raise CommandError(
                f"The tool {tool!r} runs only as an MCP task, from a client that supports tasks."
            ) from None
        result = render_outcome(outcome).model_dump(mode="json", by_alias=True, exclude_none=True)
        self.stdout.write(printable(result))
        if result.get("isError"):
            raise CommandError(f"The tool {tool!r} reported an error.", returncode=1)


def printable(result: dict[str, Any]) -> str:
    """What a person reads of a tool result: its structured content as JSON when it has some, else each content
    item (a view that answers CSV or HTML has only text; an image or audio item is described, not dumped)."""
    if "structuredContent" in result:
        return json.dumps(result["structuredContent"], indent=2, ensure_ascii=False, sort_keys=True)
    items = []
    for item in result.get("content", []):
        if item.get("type") == "text":
            items.append(item.get("text", ""))
        elif item.get("type") in ("image", "audio"):
            items.append(
                f"[{item['type']}: {item.get('mimeType', 'unknown type')}, {len(item.get('data', ''))} base64 characters]"
            )
        else:
            items.append(json.dumps(item, indent=2, ensure_ascii=False, sort_keys=True))
    return "\n".join(items) if items else "(no content)"
