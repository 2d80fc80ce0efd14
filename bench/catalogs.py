"""Set which tools our server exposes for a workload, the way an operator would: the admin's *enabled* flag.

Run as `python -m bench.catalogs PROFILE` with DJANGO_SETTINGS_MODULE=bench.settings and DEMO_DATA_DIR
set, before our server starts. Saving the rows moves the catalog revision, exactly like the admin.

Profiles (tool wire names, as served in the portable style):
- two:   library_echo and library_get_book, nothing else (tools/list with 2 tools);
- many:  bench_tool_000 … bench_tool_199, nothing else (tools/list with 200 tools);
- calls: the demo's tools as it ships them, plus bench_read_book (every tools/call workload);
- none:  no local tool (the gateway's listing workload lists only upstream tools).

`python -m bench.catalogs gateway URL` then registers the bare server at URL as the upstream "benchup",
discovers it, approves every tool it lists and enables each for the bench's key, without confirmation:
what an operator does in the admin, done in one go.
"""

from __future__ import annotations

import sys

PROFILES = ("two", "many", "calls", "none")


def wanted(profile: str, name: str, shipped: bool) -> bool:
    from bench.toolspec import BOOK_TOOL, ECHO_TOOL, MANY_TOOLS, READ_TOOL, many_tool_name

    if profile == "two":
        return name in (ECHO_TOOL, BOOK_TOOL)
    if profile == "many":
        return name in {many_tool_name(index) for index in range(MANY_TOOLS)}
    if profile == "none":
        return False
    return shipped or name == READ_TOOL


def apply(profile: str) -> list[str]:
    """Enable exactly the profile's tools; returns the enabled wire names."""
    from django.db import transaction

    from bench.toolspec import GATEWAY
    from mcp_expose.core.conf import get_settings
    from mcp_expose.declare.names import served_name
    from mcp_expose.declare.registry import TOOL_KINDS, registry
    from mcp_expose.models import ExposedTool, UpstreamServer

    enabled: list[str] = []
    with transaction.atomic():
        # A gateway workload registers its upstream after this (`gateway`); every other one serves none.
        UpstreamServer.objects.filter(name=GATEWAY).delete()
        rows = {row.key: row for row in ExposedTool.objects.select_for_update()}
        for capability in registry:
            if capability.kind not in TOOL_KINDS:
                continue
            row = rows[capability.key]
            name = served_name(capability.name, get_settings().WIRE_NAMES)
            on = wanted(profile, name, capability.enabled_by_default)
            if row.enabled != on:
                row.enabled = on
                row.save(update_fields=["enabled"])
            if on:
                enabled.append(name)
    return enabled


def register_gateway(url: str) -> int:
    """The bare server at `url` as the upstream GATEWAY, every tool approved and enabled; how many."""
    from django.contrib.auth import get_user_model

    from bench.toolspec import GATEWAY
    from mcp_expose.models import ExposedTool, UpstreamServer, UpstreamTool
    from mcp_expose.upstream.snapshots import approve, rediscover

    UpstreamServer.objects.filter(name=GATEWAY).delete()
    server = UpstreamServer.objects.create(name=GATEWAY, url=url, call_timeout=10.0)
    discovery, _ = rediscover(server)
    if discovery.error:
        raise SystemExit(f"The bare server at {url} could not be discovered: {discovery.error}")
    admin = get_user_model()._default_manager.get(username="admin")
    tools = list(UpstreamTool.objects.filter(server=server))
    for tool in tools:
        approve(tool, admin, tool.proposed_digest)
    ExposedTool.objects.filter(key__in=[tool.key for tool in tools]).update(enabled=True, requires_confirmation=False)
    from mcp_expose.signals import catalog_changed

    catalog_changed()  # the update() above saved no row one by one
    return len(tools)


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "gateway":
        import django

        django.setup()
        print(f"gateway: {register_gateway(argv[1])} upstream tools approved and enabled")
        return 0
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
