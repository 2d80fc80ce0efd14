"""Static headers sent to an upstream (an API key, a tenant id): written one per line as `Name: value`.

Names are HTTP tokens; values carry no control characters; the headers the transport sets itself, and those that
say who is calling here, may not be set. The values are secrets: stored sealed, never shown back. A value written
`env:MCP_UPSTREAM_<NAME>` is read from that environment variable when it is sent; only that prefix is read, so an
admin form can never send the deployment's other environment (its SECRET_KEY, its database password) away.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

MAX_HEADERS = 20
ENV_REFERENCE = re.compile(r"env:(MCP_UPSTREAM_[A-Z0-9_]{1,100})")
MAX_VALUE_LENGTH = 4096
TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}")
RESERVED = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "content-encoding",
        "accept",
        "accept-encoding",
        "connection",
        "transfer-encoding",
        "upgrade",
        "te",
        "trailer",
        "keep-alive",
        "proxy-authorization",
        "cookie",
        "mcp-protocol-version",
        "mcp-session-id",
        "mcp-method",
        "mcp-name",
        "last-event-id",
        "x-agent-depth",
        "x-mcp-expose-instance",
        "x-conversation-id",
    }
)


def parse_headers(text: str) -> dict[str, str]:
    """The headers written in `text`; `ValueError` saying which line is wrong, without its value."""
    headers: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, colon, value = line.partition(":")
        name, value = name.strip(), value.strip()
        if not colon or not TOKEN.fullmatch(name):
            raise ValueError(f"Line {number}: write it as 'Name: value', the name an HTTP header name.")
        problem = header_problem(name, value)
        if problem:
            raise ValueError(f"Line {number}: {problem}")
        if name.lower() in {existing.lower() for existing in headers}:
            raise ValueError(f"Line {number}: {name} is given twice.")
        headers[name] = value
    if len(headers) > MAX_HEADERS:
        raise ValueError(f"At most {MAX_HEADERS} headers can be set.")
    return headers


def header_problem(name: str, value: str) -> str | None:
    if not TOKEN.fullmatch(name):
        return f"{name[:40]!r} is not an HTTP header name."
    if name.lower() in RESERVED:
        return f"{name} is set by the connection itself and cannot be given."
    if len(value) > MAX_VALUE_LENGTH:
        return f"the value of {name} is over {MAX_VALUE_LENGTH} characters."
    if any(ord(character) < 32 or ord(character) == 127 for character in value):
        return f"the value of {name} holds control characters."
    if not value.isascii():
        return f"the value of {name} holds characters other than ASCII, which a header cannot carry as written."
    if value.startswith("env:") and not ENV_REFERENCE.fullmatch(value):
        return f"the value of {name} names an environment variable; only env:MCP_UPSTREAM_<NAME> ones are read."
    return None


def header_values(headers: Mapping[str, str], what: str) -> dict[str, str]:
    """The headers to send: each `env:MCP_UPSTREAM_…` value read from the environment now. Raises
    `SecretUnavailable` naming the variable (never a value) when one is not set."""
    return {name: secret_value(value, f"{what}: {name}") for name, value in usable_headers(headers).items()}


def secret_value(value: str, what: str) -> str:
    """`value`, or the environment variable an `env:MCP_UPSTREAM_…` value names, read now. Raises
    `SecretUnavailable` naming the variable (never a value) when it is not set."""
    from mcp_expose.upstream.sealing import SecretUnavailable

    reference = ENV_REFERENCE.fullmatch(value)
    if reference is None:
        return value
    found = os.environ.get(reference.group(1))
    if found is None:
        raise SecretUnavailable(f"{what} is read from {reference.group(1)}, which is not set.")
    found = found.strip()  # a secret mounted from a file often ends in a newline
    if not found or not found.isascii() or any(ord(character) < 32 or ord(character) == 127 for character in found):
        # Never sent, and never quoted: an HTTP library's error would otherwise show it.
        raise SecretUnavailable(
            f"{what} is read from {reference.group(1)}, which holds characters a header cannot carry (or nothing)."
        )
    return found


def usable_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Of stored headers, those that may be sent (a row written before a rule existed keeps no reserved one)."""
    return {name: value for name, value in headers.items() if header_problem(name, value) is None}
