import mcp_expose


@mcp_expose.tool(key="broken.first")
def first() -> str:
    return "registered before the failure"


import this_module_does_not_exist  # noqa: E402,F401
