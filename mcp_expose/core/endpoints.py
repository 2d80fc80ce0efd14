"""The MCP endpoints a project serves: the default one at `PATH`, and the named ones of `ENDPOINTS`.

Each endpoint has its own path, OAuth resource, server name and instructions, and a toolset: which of the
catalog's tools, resources and prompts it offers at all (the usual policy narrows that further, per caller).
The settings give each endpoint's toolset until an administrator chooses one in the admin.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from mcp_expose.core.conf import ExposeSettings, get_settings

DEFAULT_ENDPOINT = "default"
ENDPOINT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
ENDPOINT_KEYS = frozenset(
    {"PATH", "RESOURCE", "RESOURCE_NAME", "SERVER_NAME", "SERVER_TITLE", "INSTRUCTIONS", "TOOLSET"}
)
TOOLSET_KEYS = frozenset({"ALL", "TAGS", "TOOLS", "READ_ONLY"})
TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,49}")


@dataclass(frozen=True, slots=True)
class Toolset:
    """Which capabilities an endpoint offers before the policy looks at the caller.

    Offered: everything (`everything`), or those listed by key (`keys`) or carrying one of `tags`. With
    `read_only`, tools must also be hinted read-only (resources and prompts are reads already).
    """

    everything: bool = False
    tags: frozenset[str] = frozenset()
    keys: frozenset[str] = frozenset()
    read_only: bool = False

    @property
    def narrows(self) -> bool:
        return not self.everything or self.read_only

    def offers(self, key: str, tags: Iterable[str], *, is_tool: bool, read_only_hint: bool | None) -> bool:
        chosen = self.everything or key in self.keys or not self.tags.isdisjoint(tags)
        return chosen and (not self.read_only or not is_tool or read_only_hint is True)

    def describe(self) -> str:
        """In words, for the admin, the connect page and the doctor."""
        if self.everything:
            chosen = "everything"
        else:
            parts = []
            if self.tags:
                parts.append("tagged " + ", ".join(sorted(self.tags)))
            if self.keys:
                parts.append(f"{len(self.keys)} chosen")
            chosen = " or ".join(parts) if parts else "nothing"
        return chosen + (" (read-only tools only)" if self.read_only else "")


EVERYTHING = Toolset(everything=True)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One MCP endpoint, as the settings declare it."""

    name: str
    # Without a trailing slash; served with and without one.
    path: str
    # The canonical resource URI OAuth tokens must be issued for; None: derived from each request (development).
    resource: str | None
    resource_name: str | None
    server_name: str
    server_title: str | None
    instructions: str | None
    # What it offers until the admin chooses (an `EndpointToolset` row replaces it).
    toolset: Toolset

    @property
    def is_default(self) -> bool:
        return self.name == DEFAULT_ENDPOINT


def endpoints() -> tuple[Endpoint, ...]:
    """Every endpoint, the default first. Raises `ImproperlyConfigured` naming what is wrong."""
    return _endpoints(get_settings())


def endpoint_named(name: str) -> Endpoint | None:
    return next((endpoint for endpoint in endpoints() if endpoint.name == name), None)


def default_endpoint() -> Endpoint:
    return endpoints()[0]


def endpoint_problems() -> list[str]:
    """What is wrong with `ENDPOINTS`, for the system checks (empty when all is well)."""
    try:
        endpoints()
    except ImproperlyConfigured as exc:
        return [str(exc)]
    return []


@cache
def _endpoints(conf: ExposeSettings) -> tuple[Endpoint, ...]:
    # Cached per settings object: `override_settings(MCP_EXPOSE=...)` makes a new one.
    default = Endpoint(
        name=DEFAULT_ENDPOINT,
        path=conf.PATH.rstrip("/"),
        resource=conf.RESOURCE,
        resource_name=conf.RESOURCE_NAME,
        server_name=conf.SERVER_NAME,
        server_title=conf.SERVER_TITLE,
        instructions=conf.INSTRUCTIONS,
        toolset=EVERYTHING,
    )
    found = [default]
    configured = conf.ENDPOINTS
    if not isinstance(configured, Mapping):
        raise ImproperlyConfigured("MCP_EXPOSE['ENDPOINTS'] must be a dict of endpoint name to its options.")
    for name, options in configured.items():
        found.append(_endpoint(conf, name, options))
    paths: dict[str, str] = {}
    for endpoint in found:
        if endpoint.path in paths:
            raise ImproperlyConfigured(
                f"MCP_EXPOSE['ENDPOINTS']: the endpoints {paths[endpoint.path]!r} and {endpoint.name!r} "
                f"share the path {endpoint.path!r}; each needs its own."
            )
        paths[endpoint.path] = endpoint.name
    resources: dict[str, str] = {}
    for endpoint in found:
        if not endpoint.resource:
            continue
        # (The canonical form's essentials: OAuth compares resources by scheme, host, port and path.)
        same = endpoint.resource.strip().lower().rstrip("/")
        if same in resources:
            raise ImproperlyConfigured(
                f"MCP_EXPOSE['ENDPOINTS']: the endpoints {resources[same]!r} and {endpoint.name!r} share the OAuth "
                f"resource {endpoint.resource!r}, so each would accept the other's tokens; give each its own."
            )
        resources[same] = endpoint.name
    return tuple(found)


def _endpoint(conf: ExposeSettings, name: Any, options: Any) -> Endpoint:
    where = f"MCP_EXPOSE['ENDPOINTS'][{name!r}]"
    if not isinstance(name, str) or not ENDPOINT_NAME.fullmatch(name) or name == DEFAULT_ENDPOINT:
        raise ImproperlyConfigured(
            f"{where}: an endpoint's name is 1 to 40 lower-case letters, digits, '-' or '_', and not "
            f"{DEFAULT_ENDPOINT!r} (the endpoint at PATH)."
        )
    if not isinstance(options, Mapping):
        raise ImproperlyConfigured(f"{where} must be a dict with at least 'PATH'.")
    unknown = sorted(set(options) - ENDPOINT_KEYS)
    if unknown:
        raise ImproperlyConfigured(f"{where}: unknown keys {unknown}; the keys are {sorted(ENDPOINT_KEYS)}.")
    path = options.get("PATH")
    if not isinstance(path, str) or not path.startswith("/") or path.rstrip("/") == "" or "?" in path:
        raise ImproperlyConfigured(f"{where}['PATH'] must be a path starting with '/', e.g. '/mcp/{name}'.")
    for key in ("RESOURCE", "RESOURCE_NAME", "SERVER_NAME", "SERVER_TITLE", "INSTRUCTIONS"):
        value = options.get(key)
        if value is not None and not isinstance(value, str):
            raise ImproperlyConfigured(f"{where}[{key!r}] must be a string or None.")
    resource = options.get("RESOURCE")
    if resource is not None and not resource.startswith(("https://", "http://")):
        raise ImproperlyConfigured(f"{where}['RESOURCE'] must be an absolute http(s) URI, or None.")
    if conf.RESOURCE and not resource:
        # Tokens for the default endpoint's resource must not pass at this one's derived resource by accident.
        raise ImproperlyConfigured(
            f"{where}['RESOURCE'] is required when RESOURCE is set: each endpoint is its own OAuth resource."
        )
    return Endpoint(
        name=name,
        path=path.rstrip("/"),
        resource=resource,
        resource_name=options.get("RESOURCE_NAME"),
        server_name=options.get("SERVER_NAME") or f"{conf.SERVER_NAME}-{name}",
        server_title=options.get("SERVER_TITLE"),
        instructions=options.get("INSTRUCTIONS", conf.INSTRUCTIONS),
        toolset=toolset_from_settings(options.get("TOOLSET", {}), f"{where}['TOOLSET']"),
    )


def toolset_from_settings(options: Any, where: str) -> Toolset:
    """`{"ALL": bool, "TAGS": [...], "TOOLS": [capability keys], "READ_ONLY": bool}`; empty offers nothing."""
    if not isinstance(options, Mapping):
        raise ImproperlyConfigured(f"{where} must be a dict with the keys {sorted(TOOLSET_KEYS)}.")
    unknown = sorted(set(options) - TOOLSET_KEYS)
    if unknown:
        raise ImproperlyConfigured(f"{where}: unknown keys {unknown}; the keys are {sorted(TOOLSET_KEYS)}.")
    tags = _strings(options.get("TAGS", ()), f"{where}['TAGS']")
    bad = sorted(tag for tag in tags if not TAG.fullmatch(tag))
    if bad:
        raise ImproperlyConfigured(f"{where}['TAGS']: {bad} are not tags (letters, digits, '_', '.', ':', '-').")
    return Toolset(
        everything=bool(options.get("ALL", False)),
        tags=tags,
        keys=_strings(options.get("TOOLS", ()), f"{where}['TOOLS']"),
        read_only=bool(options.get("READ_ONLY", False)),
    )


def parse_tags(text: str) -> frozenset[str]:
    """Tags written in the admin: separated by spaces or commas."""
    return frozenset(part for part in re.split(r"[\s,]+", text) if part)


def _strings(values: Any, where: str) -> frozenset[str]:
    if isinstance(values, str) or not isinstance(values, Iterable) or not all(isinstance(v, str) for v in values):
        raise ImproperlyConfigured(f"{where} must be a list of strings.")
    return frozenset(values)
