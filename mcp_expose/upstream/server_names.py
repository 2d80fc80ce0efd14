"""The name an upstream server is known by here: the first part of each of its tools' names, `{server}.{tool}`.

The deployment chooses it; it is never taken from the upstream. It may not be an installed app's label, since
local tools are named `{app_label}.{name}` and the two namespaces must never meet.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_SERVER_NAME_LENGTH = 32
SERVER_NAME = re.compile(rf"[a-z0-9_-]{{1,{MAX_SERVER_NAME_LENGTH}}}")
# Namespaces of our own besides app labels: the admin's prompts are keyed `admin_prompts.{name}`.
RESERVED = frozenset({"admin_prompts"})


def server_name_problem(name: object, app_labels: Iterable[str]) -> str | None:
    """Why `name` cannot name an upstream server, or None."""
    if not isinstance(name, str) or not name:
        return "Enter a name."
    if len(name) > MAX_SERVER_NAME_LENGTH:
        return f"The name is {len(name)} characters long; at most {MAX_SERVER_NAME_LENGTH} are allowed."
    if not SERVER_NAME.fullmatch(name):
        return (
            "Use only lowercase letters, digits, '_' and '-' (no '.': it separates the server's name from its "
            "tools' names)."
        )
    taken = {label.casefold() for label in app_labels} | RESERVED
    if name.casefold() in taken:
        return (
            f"{name!r} is the label of an installed app, whose tools are named {name}.<tool>: choose another "
            "name, so that a tool name always says whose it is."
        )
    return None
