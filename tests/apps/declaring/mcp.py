import mcp_expose


@mcp_expose.tool
def ping() -> str:
    """Answer pong."""
    return "pong"
