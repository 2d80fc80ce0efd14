"""`App`: a tool's result shown by one of the project's templates, as an MCP App (`io.modelcontextprotocol/ui`).

A tool names a template; the template is served as a `ui://` resource with the MIME type
`text/html;profile=mcp-app`, and a host that negotiated the extension renders it in a sandboxed iframe
beside the conversation, handing it the tool's input and result through the Apps bridge
(`{% mcp_app_bridge %}`). Everything here is declaration: plain data, checked when it is declared, so a
mistake is a `DeclarationError` at import and not a page a host refuses to show.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from mcp_expose.core.conf import get_settings
from mcp_expose.core.errors import DeclarationError

EXTENSION_ID = "io.modelcontextprotocol/ui"
"""The MCP Apps extension, as clients and servers name it under `capabilities.extensions`."""

APP_MIME_TYPE = "text/html;profile=mcp-app"
"""The only MIME type a host renders a `ui://` resource with."""

URI_PREFIX = "ui://templates/"
"""Where a template's page lives: `ui://templates/<template name>`."""

Visibility = Literal["model", "app"]
VISIBILITIES: tuple[Visibility, ...] = ("model", "app")

# What the page may ask the host's iframe for (`_meta.ui.permissions`), by the names the spec gives them.
PERMISSIONS = {"camera": "camera", "microphone": "microphone", "geolocation": "geolocation"}
PERMISSIONS["clipboard-write"] = "clipboardWrite"

# A template name as a URI path: what Django's loaders accept, minus anything a URI would need to escape.
_TEMPLATE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./-]*$")


@dataclass(frozen=True, slots=True)
class App:
    """How a tool's result is shown as an MCP App.

    `template` is a Django template name; it is rendered once per catalog revision (not per call: the page
    gets the call's data through the bridge), with `app`, `tools` and `server_name` in its context.
    `visibility` says who may call the tool: the model ("model"), the page ("app"), or both (the default);
    a tool only the page may call is hidden from clients without Apps. The CSP domains are the origins the
    page loads from or talks to (none by default: inline everything, `{% mcp_app_static %}` does); the
    host enforces them. `permissions` are the iframe features the page needs ("camera", "microphone",
    "geolocation", "clipboard-write"). `prefers_border` and `domain` are passed to the host as declared.
    """

    template: str
    visibility: tuple[Visibility, ...] = VISIBILITIES
    connect_domains: tuple[str, ...] = ()
    resource_domains: tuple[str, ...] = ()
    frame_domains: tuple[str, ...] = ()
    base_uri_domains: tuple[str, ...] = ()
    permissions: tuple[str, ...] = ()
    prefers_border: bool | None = None
    domain: str | None = None
    title: str | None = None

    def __post_init__(self) -> None:
        origin = f"App({self.template!r})"
        if not isinstance(self.template, str) or not _TEMPLATE_NAME.match(self.template) or ".." in self.template:
            raise DeclarationError(
                f"{origin}: template= takes a Django template name such as 'library/book_card.html' "
                "(letters, digits, '_', '-', '.', '/'; no '..')."
            )
        object.__setattr__(self, "visibility", _visibility(self.visibility, origin))
        for name in ("connect_domains", "resource_domains", "frame_domains", "base_uri_domains"):
            object.__setattr__(self, name, _origins(getattr(self, name), f"{origin}: {name}="))
        object.__setattr__(self, "permissions", _permissions(self.permissions, origin))
        if self.prefers_border is not None and not isinstance(self.prefers_border, bool):
            raise DeclarationError(f"{origin}: prefers_border= takes True, False or None.")
        if self.domain is not None and (not isinstance(self.domain, str) or not self.domain.strip()):
            raise DeclarationError(f"{origin}: domain= takes a non-empty string or None.")

    @property
    def resource_uri(self) -> str:
        return URI_PREFIX + self.template

    @property
    def model_visible(self) -> bool:
        """Whether the model may call the tool (so a client without Apps may, too)."""
        return "model" in self.visibility

    def tool_meta(self) -> dict[str, Any]:
        """The tool definition's `_meta.ui`, for clients that negotiated Apps."""
        return {"resourceUri": self.resource_uri, "visibility": list(self.visibility)}

    def resource_meta(self) -> dict[str, Any]:
        """The `ui://` resource's `_meta.ui`: its CSP, permissions and presentation, as declared."""
        csp = {
            key: list(domains)
            for key, domains in (
                ("connectDomains", self.connect_domains),
                ("resourceDomains", self.resource_domains),
                ("frameDomains", self.frame_domains),
                ("baseUriDomains", self.base_uri_domains),
            )
            if domains
        }
        meta: dict[str, Any] = {}
        if csp:
            meta["csp"] = csp
        if self.permissions:
            meta["permissions"] = {PERMISSIONS[name]: {} for name in self.permissions}
        if self.domain is not None:
            meta["domain"] = self.domain
        if self.prefers_border is not None:
            meta["prefersBorder"] = self.prefers_border
        return meta


AppDeclaration = App | str | None


def app_field(app: AppDeclaration, origin: str) -> dict[str, Any]:
    """`Capability` fields for a declaration's `app=`: an `App`, a template name, or None."""
    if app is None or isinstance(app, App):
        return {"app": app}
    if isinstance(app, str):
        return {"app": App(template=app)}
    raise DeclarationError(f"{origin}: app= takes mcp_expose.App(...), a template name, or None; got {app!r}.")


def app_for_action(apps: AppDeclaration | Mapping[str, AppDeclaration], action: str) -> AppDeclaration:
    """The app one action of a view or model declaration takes (`app=` is one value, or action → value)."""
    return apps.get(action) if isinstance(apps, Mapping) else apps


def _visibility(value: Iterable[str], origin: str) -> tuple[Visibility, ...]:
    given = (value,) if isinstance(value, str) else tuple(value)
    if not given or any(item not in VISIBILITIES for item in given):
        raise DeclarationError(f"{origin}: visibility= takes one or both of 'model' and 'app', not {value!r}.")
    return tuple(item for item in VISIBILITIES if item in given)


def _origins(value: Iterable[str], what: str) -> tuple[str, ...]:
    if isinstance(value, str):
        raise DeclarationError(f"{what} takes a list of origins, not the single string {value!r}.")
    origins = tuple(value)
    for item in origins:
        parts = urlsplit(item) if isinstance(item, str) else None
        if (
            parts is None
            or parts.scheme not in ("https", "http", "wss", "ws")
            or not parts.hostname
            or parts.path not in ("", "/")
            or parts.query
            or parts.fragment
            or parts.username
        ):
            raise DeclarationError(f"{what} takes origins such as 'https://cdn.example.com', not {item!r}.")
    return origins


def _permissions(value: Iterable[str], origin: str) -> tuple[str, ...]:
    if isinstance(value, str):
        raise DeclarationError(f"{origin}: permissions= takes a list, not the single string {value!r}.")
    given = tuple(value)
    unknown = sorted(set(given) - set(PERMISSIONS))
    if unknown:
        raise DeclarationError(f"{origin}: unknown permissions {unknown}; choose from {sorted(PERMISSIONS)}.")
    return given


def apps_negotiated(capabilities: Any) -> bool:
    """Whether this server serves MCP Apps (the `APPS` setting) and a client's declared capabilities negotiate
    them: the extension, with our MIME type among its `mimeTypes` (as the SDK's
    `mcp.server.apps.client_supports_apps` decides). `capabilities` is the SDK's `ClientCapabilities`, or None
    when the client declared none (a stateless 2025-11-25 connection)."""
    if not get_settings().APPS:
        return False
    extensions = getattr(capabilities, "extensions", None) or {}
    settings = extensions.get(EXTENSION_ID) if isinstance(extensions, Mapping) else None
    mime_types = settings.get("mimeTypes") if isinstance(settings, Mapping) else None
    return isinstance(mime_types, list | tuple) and APP_MIME_TYPE in mime_types


def served_to(declared: App | None, shown: App | None, apps: bool) -> bool:
    """Whether a tool is offered to a client that did (`apps`) or did not negotiate Apps, given the app its code
    declares and the one it is `shown` with (None when its row switched the page off). A tool only a page may
    call is offered only to a host that can show that page: never to other clients, nor once its page is off."""
    if declared is None or declared.model_visible:
        return True
    return apps and shown is not None
