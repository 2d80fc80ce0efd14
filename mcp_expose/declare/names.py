"""Wire-name and scope-token rules, shared by declarations, admin rows and checks."""

from __future__ import annotations

import re
from collections.abc import Iterable

# MCP allows 128 characters; 64 is what OpenAI-backed clients accept.
MAX_NAME_LENGTH = 64
NAME_PATTERN = re.compile(rf"[A-Za-z0-9_.-]{{1,{MAX_NAME_LENGTH}}}")
# RFC 6749 §3.3 scope-token: printable ASCII except space, '"' and '\'.
SCOPE_PATTERN = re.compile(r"[\x21\x23-\x5B\x5D-\x7E]+")


def name_problem(name: object) -> str | None:
    """Why `name` cannot be a wire name, or None when it can."""
    if not isinstance(name, str) or not name:
        return "a name must be a non-empty string"
    if len(name) > MAX_NAME_LENGTH:
        return f"{name!r} is {len(name)} characters long; at most {MAX_NAME_LENGTH} are allowed"
    if not NAME_PATTERN.fullmatch(name):
        bad = sorted({c for c in name if not re.fullmatch(r"[A-Za-z0-9_.-]", c)})
        return f"{name!r} contains {''.join(bad)!r}; only letters, digits, '_', '.' and '-' are allowed"
    return None


def scope_problem(scope: object) -> str | None:
    """Why `scope` is not a valid OAuth scope token, or None."""
    if not isinstance(scope, str) or not SCOPE_PATTERN.fullmatch(scope):
        return f"{scope!r} is not a valid scope (printable ASCII without spaces, quotes or backslashes)"
    return None


def split_scopes(text: str) -> frozenset[str]:
    """Scopes from a space-separated string, as stored in rows and keys."""
    return frozenset(text.split())


# Upstream servers: the name is the first part of each of its tools' names, `{server}.{tool}`. The deployment
# chooses it (never the upstream), and it is never an installed app's label, since local tools are `{app}.{name}`.
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
