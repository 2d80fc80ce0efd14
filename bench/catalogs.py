"""Set which tools our server exposes for a workload, the way an operator would: the admin's *enabled* flag.

Run as `python -m bench.catalogs PROFILE` with DJANGO_SETTINGS_MODULE=bench.settings and DEMO_DATA_DIR
set, before our server starts. Saving the rows moves the catalog revision, exactly like the admin.

Profiles (tool wire names):
- two:   library.echo and library.get_book, nothing else (tools/list with 2 tools);
- many:  bench.tool_000 … bench.tool_199, nothing else (tools/list with 200 tools);
- calls: the demo's tools as it ships them, plus bench.read_book (every tools/call workload).
"""

from __future__ import annotations

import sys

PROFILES = ("two", "many", "calls")


def wanted(profile: str, name: str, shipped: bool) -> bool:
    from bench.toolspec import BOOK_TOOL, ECHO_TOOL, MANY_TOOLS, READ_TOOL, many_tool_name

    if profile == "two":
        return name in (ECHO_TOOL, BOOK_TOOL)
    if profile == "many":
        return name in {many_tool_name(index) for index in range(MANY_TOOLS)}
    return shipped or name == READ_TOOL


def apply(profile: str) -> list[str]:
    """Enable exactly the profile's tools; returns the enabled wire names."""
    from django.db import transaction

    from mcp_expose.declare.registry import TOOL_KINDS, registry
    from mcp_expose.models import ExposedTool

    enabled: list[str] = []
    with transaction.atomic():
        rows = {row.key: row for row in ExposedTool.objects.select_for_update()}
        for capability in registry:
            if capability.kind not in TOOL_KINDS:
                continue
            row = rows[capability.key]
            on = wanted(profile, capability.name, capability.enabled_by_default)
            if row.enabled != on:
                row.enabled = on
                row.save(update_fields=["enabled"])
            if on:
                enabled.append(capability.name)
    return enabled


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in PROFILES:
        print(f"usage: python -m bench.catalogs {{{','.join(PROFILES)}}}", file=sys.stderr)
        return 2
    import django

    django.setup()
    names = apply(argv[0])
    print(f"{argv[0]}: {len(names)} tools enabled")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
