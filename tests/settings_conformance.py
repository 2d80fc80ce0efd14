"""The conformance fixtures, served to anonymous callers: what the official MCP conformance suite runs against.

Auth is off (the suite brings no credentials), 2025-11-25 clients get stateful sessions (the suite tests
sessions, server-to-client requests, logging and resumable streams), and the demo's own tools stay hidden
from anonymous callers by their scopes. Used by scripts/conformance only.
"""

import os

from project.settings import *  # noqa: F403
from project.settings import MCP_EXPOSE

INSTALLED_APPS = [*INSTALLED_APPS, "tests.apps.conformance"]  # noqa: F405
DEBUG = True

MCP_EXPOSE = {
    **MCP_EXPOSE,
    "SERVER_NAME": "mcp-expose-conformance",
    "ALLOW_ANONYMOUS": True,
    "ANONYMOUS_SCOPES": [],
    "LEGACY_SESSIONS": os.environ.get("MCP_TEST_LEGACY_SESSIONS", "1") == "1",
}
