"""An exposure row's decisions as plain data: what the catalog compiles a capability with.

Plain data, not a model, so the catalog compiles (and its tests run) without the ORM;
`ExposedTool.exposure_state` makes one from a row."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from mcp_expose.declare.registry import CLIENT_CHANNEL, ConfirmationChannel


@dataclass(frozen=True, slots=True)
class ExposureState:
    """An exposure row's decisions, as plain data (see `ExposedTool.exposure_state`)."""

    key: str
    enabled: bool = True
    wire_name: str = ""
    title: str = ""
    description: str = ""
    extra_scopes: frozenset[str] = frozenset()
    # Client ids of the OAuth applications allowed to use the tool; empty means any caller.
    allowed_clients: frozenset[str] = frozenset()
    requires_confirmation: bool = False
    confirmation_channel: ConfirmationChannel = CLIENT_CHANNEL
    rate_limit: str = ""
    timeout: float | None = None
    max_result_bytes: int | None = None
    log_argument_values: bool = False
    # Off: a tool whose code supports tasks runs every call directly (one that requires a task is not served).
    tasks_allowed: bool = True
    # Off: a tool whose code shows its result as an MCP App is served without it.
    ui_enabled: bool = True
    # Tags the admin added to those declared in code (endpoints offer capabilities by tag).
    tags: frozenset[str] = frozenset()
    # Annotation hints the admin set (read_only, destructive, idempotent, open_world); None keeps the declared one.
    annotations: Mapping[str, bool | None] = field(default_factory=dict)
