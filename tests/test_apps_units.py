"""MCP Apps without a server: declaring (function, view and model tools) and its errors, the row's switch, the
pages and their rendering, the template tags, the admin's column and preview, and the system check."""

from __future__ import annotations

from typing import Any

import pytest
from django.template import Context, Template, TemplateSyntaxError
from django.test import override_settings
from django.urls import reverse

import mcp_expose
from mcp_expose.calls.app_pages import PageFailed, UnknownPage, find_page, pages_for, render_app, render_page
from mcp_expose.catalog.compiled import compile_catalog
from mcp_expose.core.conf import changed_settings
from mcp_expose.core.errors import DeclarationError
from mcp_expose.core.principal import principal_for_user
from mcp_expose.declare.apps import App, apps_negotiated, served_to
from mcp_expose.declare.exposure_state import ExposureState
from mcp_expose.declare.model_tools import ModelTools
from mcp_expose.declare.registry import CapabilityRegistry
from mcp_expose.declare.view_tools import expose_view

APPS_CAPABILITIES = type(
    "Caps", (), {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}}
)()


def toolbox_templates() -> Any:
    """The toolbox app's templates, without installing the app (its views need the live tests' URLconf)."""
    from django.conf import settings

    from .live import ROOT

    engine = {**settings.TEMPLATES[0], "DIRS": [*settings.TEMPLATES[0]["DIRS"], ROOT / "tests/apps/toolbox/templates"]}
    return override_settings(TEMPLATES=[engine])


def declare_card(registry: CapabilityRegistry, app: Any = "toolbox/panel.html", **kwargs: Any) -> None:
    @mcp_expose.tool(key="toolbox.card", registry=registry, app=app, **kwargs)
    def card(count: int = 1) -> dict[str, int]:
        return {"count": count}


def test_an_app_is_declared_with_its_options(registry: CapabilityRegistry) -> None:
    app = App(
        "library/apps/book_card.html",
        visibility=["app"],
        connect_domains=["https://api.example.com"],
        frame_domains=["https://*.example.com"],
        permissions=["camera", "clipboard-write"],
        prefers_border=False,
        domain="a1b2.example-host.com",
    )
    declare_card(registry, app)
    capability = registry.get("toolbox.card")
    assert capability is not None and capability.app == app
    assert app.resource_uri == "ui://templates/library/apps/book_card.html"
    assert app.tool_meta() == {"resourceUri": app.resource_uri, "visibility": ["app"]}
    assert app.resource_meta() == {
        "csp": {"connectDomains": ["https://api.example.com"], "frameDomains": ["https://*.example.com"]},
        "permissions": {"camera": {}, "clipboardWrite": {}},
        "domain": "a1b2.example-host.com",
        "prefersBorder": False,
    }
    # A template name alone is an app with the defaults: both may call it, nothing to load from elsewhere.
    assert App("x.html").visibility == ("model", "app") and App("x.html").resource_meta() == {}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"template": "../secrets.html"}, "no '..'"),
        ({"template": "with space.html"}, "template= takes a Django template name"),
        ({"template": "x.html", "visibility": []}, "visibility= takes one or both"),
        ({"template": "x.html", "visibility": ["human"]}, "visibility= takes one or both"),
        ({"template": "x.html", "connect_domains": "https://a.example"}, "not the single string"),
        ({"template": "x.html", "resource_domains": ["cdn.example.com"]}, "takes origins such as"),
        ({"template": "x.html", "resource_domains": ["https://cdn.example.com/path"]}, "takes origins such as"),
        ({"template": "x.html", "permissions": ["telepathy"]}, "unknown permissions ['telepathy']"),
        ({"template": "x.html", "prefers_border": "yes"}, "prefers_border= takes"),
    ],
)
def test_a_bad_app_is_a_declaration_error(options: dict[str, Any], message: str) -> None:
    with pytest.raises(DeclarationError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
        App(**options)


def test_app_takes_an_app_a_name_or_nothing(registry: CapabilityRegistry) -> None:
    with pytest.raises(DeclarationError, match="app= takes mcp_expose.App"):
        declare_card(registry, app=42)


def test_view_and_model_tools_take_an_app_per_action(registry: CapabilityRegistry) -> None:
    from project.library import api
    from project.library.models import Author

    expose_view(
        api.BookViewSet,
        actions=["list", "retrieve"],
        app={"retrieve": "library/apps/book_card.html"},
        registry=registry,
    )
    with pytest.raises(DeclarationError, match=r"app= names actions not exposed: \['retreive'\]"):
        expose_view(api.BookViewSet, actions=["retrieve"], app={"retreive": "x.html"}, registry=CapabilityRegistry())
    apps = {capability.key: capability.app for capability in registry}
    assert apps["library.books.retrieve"] == App("library/apps/book_card.html")
    assert apps["library.books.list"] is None
    ModelTools(Author, actions=["list", "get"], apps={"get": App("toolbox/panel.html")}, registry=registry)
    assert registry.get("library.authors.get").app == App("toolbox/panel.html")  # type: ignore[union-attr]
    assert registry.get("library.authors.list").app is None  # type: ignore[union-attr]
    with pytest.raises(DeclarationError, match=r"apps= names actions not declared: \['delete'\]"):
        ModelTools(Author, actions=["list"], apps={"delete": "x.html"}, registry=CapabilityRegistry())


def test_the_row_switches_the_ui_off_and_keeps_the_tool(registry: CapabilityRegistry) -> None:
    declare_card(registry)
    on = compile_catalog(list(registry), {}, "r1")
    off = compile_catalog(list(registry), {"toolbox.card": ExposureState(key="toolbox.card", ui_enabled=False)}, "r2")
    assert on.get("toolbox.card").app == App("toolbox/panel.html")  # type: ignore[union-attr]
    assert off.get("toolbox.card") is not None and off.get("toolbox.card").app is None  # type: ignore[union-attr]
    assert list(on.app_pages()) == ["ui://templates/toolbox/panel.html"]
    assert off.app_pages() == {}


def test_tools_sharing_a_page_must_declare_it_alike(registry: CapabilityRegistry) -> None:
    declare_card(registry, App("toolbox/panel.html", connect_domains=["https://api.example.com"]))

    @mcp_expose.tool(key="toolbox.other", registry=registry, app=App("toolbox/panel.html", visibility=["app"]))
    def other() -> str:
        return "x"

    @mcp_expose.tool(
        key="toolbox.same",
        registry=registry,
        app=App("toolbox/panel.html", visibility=["app"], connect_domains=["https://api.example.com"]),
    )
    def same() -> str:
        return "x"

    catalog = compile_catalog(list(registry), {}, "r1")
    assert catalog.problems == (
        "toolbox.other: its MCP App page 'toolbox/panel.html' is declared with other CSP, permissions or title by "
        "toolbox.card; the page is served as toolbox.card declares it.",
    )
    assert [entry.name for entry in catalog.app_pages()["ui://templates/toolbox/panel.html"][1]] == [
        "toolbox.card",
        "toolbox.other",
        "toolbox.same",
    ]


def test_a_tool_only_apps_may_call_is_not_offered_without_apps() -> None:
    only_app = App("x.html", visibility=["app"])
    assert served_to(only_app, only_app, apps=True) and not served_to(only_app, only_app, apps=False)
    assert served_to(App("x.html"), App("x.html"), apps=False) and served_to(None, None, apps=False)
    # Its page switched off, no host can show it, so no client is offered a tool only a page may call.
    assert not served_to(only_app, None, apps=True)
    assert served_to(App("x.html"), None, apps=False)


def test_the_extension_is_advertised_unless_apps_are_off() -> None:
    from mcp_expose.serving.server import build_server

    assert build_server().extensions["io.modelcontextprotocol/ui"] == {}
    with override_settings(MCP_EXPOSE={"APPS": False}):
        assert "io.modelcontextprotocol/ui" not in build_server().extensions


def test_apps_are_negotiated_by_the_extension_and_our_mime_type() -> None:
    assert apps_negotiated(APPS_CAPABILITIES)
    assert not apps_negotiated(None)
    other = type("Caps", (), {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html"]}}})()
    assert not apps_negotiated(other)
    assert not apps_negotiated(type("Caps", (), {"extensions": {"io.modelcontextprotocol/ui": {}}})())
    with override_settings(MCP_EXPOSE={"APPS": False}):
        assert not apps_negotiated(APPS_CAPABILITIES)


@pytest.mark.django_db
def test_a_page_is_read_by_who_may_use_its_tools(registry: CapabilityRegistry, django_user_model: Any) -> None:
    declare_card(registry, scopes=["toolbox:panel"])
    catalog = compile_catalog(list(registry), {}, "r1")
    user = django_user_model.objects.create_user("reader")
    holder = principal_for_user(user, frozenset({"toolbox:panel"}), "api_key")
    stranger = principal_for_user(user, frozenset(), "api_key")
    page = find_page(catalog, holder, "ui://templates/toolbox/panel.html")
    assert [entry.name for entry in page.tools] == ["toolbox.card"]
    assert pages_for(catalog, stranger) == ()
    with pytest.raises(UnknownPage):
        find_page(catalog, stranger, "ui://templates/toolbox/panel.html")


@pytest.mark.django_db
@toolbox_templates()
def test_a_kept_page_names_only_the_tools_its_reader_may_use(
    registry: CapabilityRegistry, django_user_model: Any
) -> None:
    declare_card(registry)

    @mcp_expose.tool(key="toolbox.hidden", registry=registry, scopes=["toolbox:secret"], app="toolbox/panel.html")
    def hidden() -> str:
        return "x"

    catalog = compile_catalog(list(registry), {}, "r1")
    user = django_user_model.objects.create_user("reader")
    insider = principal_for_user(user, frozenset({"toolbox:secret"}), "api_key")
    outsider = principal_for_user(user, frozenset(), "api_key")
    uri = "ui://templates/toolbox/panel.html"
    assert "Shown for toolbox.card, toolbox.hidden on" in render_page(catalog, find_page(catalog, insider, uri))
    # Rendered once per set of tools, so the insider's page (kept first) is not the outsider's.
    assert "Shown for toolbox.card on" in render_page(catalog, find_page(catalog, outsider, uri))


def test_a_page_switched_off_takes_its_app_only_tools_with_it(registry: CapabilityRegistry) -> None:
    @mcp_expose.tool(key="toolbox.refresh", registry=registry, app=App("toolbox/panel.html", visibility=["app"]))
    def refresh() -> str:
        return "x"

    on = compile_catalog(list(registry), {}, "r1").get("toolbox.refresh")
    rows = {"toolbox.refresh": ExposureState(key="toolbox.refresh", ui_enabled=False)}
    off = compile_catalog(list(registry), rows, "r2").get("toolbox.refresh")
    assert on is not None and on.offered(apps=True) and not on.offered(apps=False)
    assert off is not None and not off.offered(apps=True) and not off.offered(apps=False)


@toolbox_templates()
def test_a_page_renders_with_its_context_and_refuses_what_is_wrong() -> None:
    html = render_app(App("toolbox/panel.html"), ["toolbox.panel_count"])
    assert "Shown for toolbox.panel_count on" in html and "window.mcpApp" in html
    with pytest.raises(PageFailed, match="'toolbox/missing_page.html' does not exist"):
        render_app(App("toolbox/missing_page.html"), [])
    with pytest.raises(PageFailed, match="has an error"):
        render_app(App("toolbox/broken.html"), [])  # it inlines a static file that does not exist
    with (
        override_settings(MCP_EXPOSE=changed_settings(APP_MAX_PAGE_BYTES=1000)),
        pytest.raises(PageFailed, match="larger than"),
    ):
        render_app(App("toolbox/panel.html"), [])


def test_inlined_static_files_cannot_close_their_element(tmp_path: Any) -> None:
    (tmp_path / "evil.js").write_text('var s = "</script><script>alert(1)</SCRIPT>"; var t = "<!--<script>";')
    (tmp_path / "latin1.js").write_bytes("var s = 'caf\xe9';".encode("latin-1"))
    (tmp_path / "big.css").write_text("a{}" * 200_000)
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    with override_settings(STATICFILES_DIRS=[str(tmp_path)]):
        out = Template('{% load mcp_expose %}{% mcp_app_static "evil.js" %}').render(Context())
        assert out.count("</script>") == 1 and out.endswith("</script>")
        assert "<\\/script><script>alert(1)<\\/SCRIPT>" in out
        assert 'var t = "<\\!--<script>"' in out
        for name, message in (
            ("big.css", "is over"),
            ("image.png", ".css and .js files only"),
            ("no.js", "no static"),
            ("../settings.js", "no static"),
            ("latin1.js", "is not UTF-8 text"),
        ):
            with pytest.raises(TemplateSyntaxError, match=message):
                Template(f'{{% load mcp_expose %}}{{% mcp_app_static "{name}" %}}').render(Context())


@toolbox_templates()
def test_the_check_names_a_page_that_does_not_render(
    registry: CapabilityRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_expose import checks

    declare_card(registry, app="toolbox/nowhere.html")

    @mcp_expose.tool(key="toolbox.broken", registry=registry, app="toolbox/broken.html")
    def broken() -> str:
        return "x"

    @mcp_expose.tool(key="toolbox.fine", registry=registry, app="toolbox/panel.html")
    def fine() -> str:
        return "x"

    monkeypatch.setattr(checks, "default_registry", registry)
    messages = checks.check_app_templates()
    assert [message.id for message in messages] == ["mcp_expose.E019", "mcp_expose.E019"]
    assert messages[1].msg == (
        "toolbox.broken: its MCP App page does not render. The page's template 'toolbox/broken.html' has an error."
    )
    assert messages[0].msg == (
        "toolbox.card: its MCP App page does not render. The page's template 'toolbox/nowhere.html' does not exist."
    )


@pytest.mark.django_db
def test_the_admin_shows_the_ui_and_previews_its_page(admin_client: Any, django_user_model: Any, client: Any) -> None:
    from mcp_expose.catalog.sync import sync_exposures
    from mcp_expose.models import ExposedTool

    sync_exposures()
    row = ExposedTool.objects.get(key="library.get_book")
    listing = admin_client.get(reverse("admin:mcp_expose_exposedtool_changelist") + "?q=get_book")
    assert "library/apps/book_card.html" in listing.content.decode()
    change = admin_client.get(reverse("admin:mcp_expose_exposedtool_change", args=[row.pk])).content.decode()
    preview_url = reverse("admin:mcp_expose_exposedtool_ui_preview", args=[row.pk])
    assert preview_url in change and 'name="ui_enabled"' in change
    preview = admin_client.get(preview_url).content.decode()
    assert 'sandbox="allow-scripts"' in preview and 'srcdoc="&lt;!doctype html&gt;' in preview
    assert "window.mcpApp" in preview  # the page, escaped whole into the frame's srcdoc: it runs only in there
    assert '<html lang="en">' not in preview and "<style>" not in preview and "<script>" not in preview
    # Switching the UI off keeps the tool; the preview says so.
    row.ui_enabled = False
    row.save()
    assert "Its UI is switched off" in admin_client.get(preview_url).content.decode()
    no_ui = ExposedTool.objects.get(key="library.search_books")
    assert admin_client.get(reverse("admin:mcp_expose_exposedtool_ui_preview", args=[no_ui.pk])).status_code == 404
    # Only staff with the view permission may look.
    nobody = django_user_model.objects.create_user("nobody", password="pw", is_staff=True)
    client.force_login(nobody)
    assert client.get(preview_url).status_code == 403


BOOK_PAGE = "ui://templates/library/apps/book_card.html"


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
def test_in_process_a_host_gets_the_page_and_others_an_unchanged_tool(
    mcp_client: Any, django_user_model: Any, era: str
) -> None:
    """Through the plugin's in-process client (the real server, on the test's transaction), both eras: the tool
    sees a book this test made."""
    from mcp_expose.testing import assert_tool_result

    user = django_user_model.objects.create_user("member")
    host = mcp_client(user=user, scopes=["library:read"], era=era, apps=True)
    plain = mcp_client(user=user, scopes=["library:read"], era=era)
    shown = {tool.name: tool for tool in host.list_tools().tools}["library.get_book"]
    bare = {tool.name: tool for tool in plain.list_tools().tools}["library.get_book"]
    assert shown.meta == {"ui": {"resourceUri": BOOK_PAGE, "visibility": ["model", "app"]}}
    assert bare.meta is None and bare.model_dump(exclude={"meta"}) == shown.model_dump(exclude={"meta"})
    page = host.read_resource(BOOK_PAGE).contents[0]  # type: ignore[union-attr]
    assert page.mime_type == "text/html;profile=mcp-app" and "window.mcpApp" in page.text
    assert BOOK_PAGE in {str(resource.uri) for resource in host.list_resources().resources}
    assert BOOK_PAGE not in {str(resource.uri) for resource in plain.list_resources().resources}
    from project.library.models import Author, Book

    author = Author.objects.create(name="T. Est", slug="t-est")
    book = Book.objects.create(title="Made in this test", author=author, isbn="978-0-00-000000-1", copies=2)
    result = host.call_tool("library.get_book", {"book_id": book.pk})
    assert_tool_result(result, {**result.structured_content, "title": "Made in this test", "copies": 2})  # type: ignore[union-attr]
