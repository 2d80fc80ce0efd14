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


# What the clients people use accept as a tool name: Claude Desktop `^[a-zA-Z0-9_-]{1,64}$`, the OpenAI API (so
# Codex and the Agents SDK), Copilot CLI and Augment `^[a-zA-Z0-9_-]+$`. The specification (SEP-986) also allows
# '.', which those clients refuse, and with it the whole tool list.
PORTABLE_NAME_PATTERN = re.compile(rf"[A-Za-z0-9_-]{{1,{MAX_NAME_LENGTH}}}")
# Any other value of WIRE_NAMES is refused by a system check (E022) and served as "portable", the safe default.
WIRE_NAME_STYLES = ("portable", "dotted")
# Between an upstream server's name and its tool's name, per style. A server name never contains its style's
# separator, nor ends with '_' (so `a_` + `__` + `b` cannot pass for `a` + `__` + `_b`): the first separator in a
# served name ends the server's name, and two (server, tool) pairs never share one name (tests/test_names.py).
UPSTREAM_SEPARATORS = {"portable": "__", "dotted": "."}


def portable_problem(name: str) -> str | None:
    """Why Claude Desktop, Codex or the OpenAI API would refuse `name` (and with it the whole tool list), or None."""
    if PORTABLE_NAME_PATTERN.fullmatch(name):
        return None
    bad = sorted({c for c in name if not re.fullmatch(r"[A-Za-z0-9_-]", c)})
    if bad:
        return (
            f"{name!r} contains {''.join(bad)!r}, which Claude Desktop, Codex and the OpenAI API refuse (they accept "
            "letters, digits, '_' and '-')"
        )
    return f"{name!r} is {len(name)} characters long; Claude Desktop accepts at most {MAX_NAME_LENGTH}"


def wire_name_problem(name: str, style: str) -> str | None:
    """Why `name` cannot be served in `style` (an admin's override, a prompt written in the admin), or None."""
    return name_problem(name) or (portable_problem(name) if style != "dotted" else None)


def served_name(name: str, style: str) -> str:
    """How a name the code declared (or its key, or an admin's override) is served: with '_' for each '.' in the
    portable style. Not injective on its own (`a.b_c` and `a_b.c` meet): the registry (E003), the catalog and
    `manage.py check` refuse a clash, naming both."""
    return name if style == "dotted" else name.replace(".", "_")


def upstream_wire_name(server: str, tool: str, style: str) -> str:
    """An upstream tool's served name: `{server}__{tool}`, or `{server}.{tool}` in the dotted style."""
    return f"{server}{UPSTREAM_SEPARATORS.get(style, '__')}{tool}"


# Upstream servers: the name is the first part of each of its tools' names, `{server}__{tool}` (`{server}.{tool}`
# when dotted). The deployment chooses it (never the upstream), and it is never an installed app's label, since
# local tools are `{app}_{name}` (`{app}.{name}`).
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
    if "__" in name or name.endswith("_"):
        return (
            "Do not use '__', nor end the name with '_': in served names '__' separates the server's name from its "
            "tools' names (helpdesk__lookup_ticket)."
        )
    taken = {label.casefold() for label in app_labels} | RESERVED
    if name.casefold() in taken:
        return (
            f"{name!r} is the label of an installed app, whose tools are named {name}.<tool>: choose another "
            "name, so that a tool name always says whose it is."
        )
    return None
