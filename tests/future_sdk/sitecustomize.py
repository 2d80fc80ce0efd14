"""A later SDK, simulated: run at interpreter start when this folder leads PYTHONPATH.

It takes away the SDK names listed in MCP_TEST_REMOVE_SDK_NAMES ("module:name,...", where a name may be
"Class.attribute"), after the SDK's HTTP serving
has imported what it uses itself (as a release that renamed them internally would still work) and before
mcp_expose is imported. It removes names only; it never stands in for the SDK's behaviour.
"""

import importlib
import os

for entry in filter(None, os.environ.get("MCP_TEST_REMOVE_SDK_NAMES", "").split(",")):
    module_name, name = entry.split(":")
    importlib.import_module("mcp.server.streamable_http_manager")
    *owners, last = name.split(".")
    owner = importlib.import_module(module_name)
    for part in owners:
        owner = getattr(owner, part)
    delattr(owner, last)
