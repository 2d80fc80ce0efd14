"""Named endpoints: the demo's `/mcp` and its read-only `/mcp/public`, each with its own toolset, OAuth resource,
server name and metadata, served by one live server to the official SDK client in both eras."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from mcp import MCPError

from mcp_expose.catalog.compiled import compile_catalog
from mcp_expose.core.endpoints import Endpoint, Toolset, endpoint_problems, endpoints
from mcp_expose.declare.registry import Annotations, Capability
from mcp_expose.declare.schema import generated_signature

from .live import LIVE_SETTINGS, LiveServer, manage, run_server, run_snippet
from .mcp_client import connect

ERAS = ["auto", "legacy"]
WRITES = {"library.borrow_book", "library.return_book", "library.withdraw_book"}


# The settings, and the catalog's view of each endpoint: no server needed.


def _endpoints_with(**options: Any) -> tuple[Endpoint, ...]:
    with override_settings(MCP_EXPOSE={"ENDPOINTS": options}):
        return endpoints()


def test_the_default_endpoint_comes_first_and_named_ones_take_their_settings() -> None:
    default, partners = _endpoints_with(
        partners={"PATH": "/mcp/partners/", "SERVER_NAME": "partners", "TOOLSET": {"TAGS": ["partner"]}}
    )
    assert (default.name, default.path, default.toolset.everything) == ("default", "/mcp", True)
    assert (partners.path, partners.server_name, partners.toolset.tags) == ("/mcp/partners", "partners", {"partner"})
    assert not partners.toolset.everything and partners.resource is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"Partners": {"PATH": "/p"}}, "lower-case"),
        ({"default": {"PATH": "/p"}}, "'default'"),
        ({"p": {"PATH": "p"}}, "must be a path starting with '/'"),
        ({"p": {"PATH": "/mcp"}}, "share the path '/mcp'"),
        ({"p": {"PATH": "/p", "COLOR": "red"}}, "unknown keys ['COLOR']"),
        ({"p": {"PATH": "/p", "TOOLSET": {"TAGS": "ops"}}}, "must be a list of strings"),
        ({"p": {"PATH": "/p", "TOOLSET": {"TAGS": ["no spaces"]}}}, "are not tags"),
        ({"p": {"PATH": "/p", "TOOLSET": {"EVERYTHING": True}}}, "unknown keys ['EVERYTHING']"),
        ({"p": {"PATH": "/p", "RESOURCE": "mcp.example.com/p"}}, "absolute http(s) URI"),
    ],
)
def test_a_misconfigured_endpoint_is_a_clear_error_and_a_system_check(options: Any, message: str) -> None:
    with override_settings(MCP_EXPOSE={"ENDPOINTS": options}):
        with pytest.raises(ImproperlyConfigured, match="ENDPOINTS") as raised:
            endpoints()
        assert message in str(raised.value)
        assert endpoint_problems() == [str(raised.value)]
        from mcp_expose.checks import check_settings

        assert "mcp_expose.E020" in {message.id for message in check_settings()}


def test_an_endpoint_at_a_health_path_is_a_system_check() -> None:
    from mcp_expose.checks import check_settings

    with override_settings(MCP_EXPOSE={"ENDPOINTS": {"health": {"PATH": "/mcp/health"}}}):
        found = [message for message in check_settings() if message.id == "mcp_expose.E020"]
    assert len(found) == 1 and "is a health path" in found[0].msg


def test_two_endpoints_may_not_share_an_oauth_resource() -> None:
    shared = "https://mcp.example.com/mcp"
    options = {"RESOURCE": shared, "ENDPOINTS": {"p": {"PATH": "/p", "RESOURCE": "https://MCP.example.com/mcp/"}}}
    with override_settings(MCP_EXPOSE=options):
        with pytest.raises(ImproperlyConfigured, match="share the OAuth resource"):
            endpoints()


def test_with_resource_set_each_endpoint_needs_its_own() -> None:
    with override_settings(MCP_EXPOSE={"RESOURCE": "https://mcp.example.com/mcp", "ENDPOINTS": {"p": {"PATH": "/p"}}}):
        with pytest.raises(ImproperlyConfigured, match="RESOURCE'] is required"):
            endpoints()


def _capability(key: str, kind: str = "function", *, tags: frozenset[str] = frozenset(), read_only: bool | None = None):
    return Capability(
        key=key,
        name=key,
        kind=kind,  # type: ignore[arg-type]
        target=lambda: None,
        source=generated_signature({"type": "object", "properties": {}}),
        origin="test",
        annotations=Annotations(read_only=read_only),
        tags=tags,
        uri=f"app://{key}" if kind == "resource" else "",
    )


def _endpoint(toolset: Toolset) -> Endpoint:
    return Endpoint("p", "/p", None, None, "p", None, None, toolset)


def test_an_endpoint_offers_its_toolset_of_the_catalog_once_per_revision() -> None:
    capabilities = [
        _capability("a.read", tags=frozenset({"ops"}), read_only=True),
        _capability("a.write", tags=frozenset({"ops"}), read_only=False),
        _capability("a.other", read_only=True),
        _capability("a.doc", "resource"),
    ]
    whole = compile_catalog(capabilities, {}, "r1")
    by_tag = _endpoint(Toolset(tags=frozenset({"ops"})))
    assert [entry.key for entry in whole.for_endpoint(by_tag).tools] == ["a.read", "a.write"]
    assert whole.for_endpoint(by_tag).resources == ()
    listed = _endpoint(Toolset(keys=frozenset({"a.other", "a.doc"})))
    assert [entry.key for entry in whole.for_endpoint(listed).tools] == ["a.other"]
    assert [entry.key for entry in whole.for_endpoint(listed).resources] == ["a.doc"]
    read_only = _endpoint(Toolset(everything=True, read_only=True))
    view = whole.for_endpoint(read_only)
    assert [entry.key for entry in view.tools] == ["a.read", "a.other"] and view.get("a.write") is None
    assert [entry.key for entry in view.resources] == ["a.doc"]  # resources are reads
    assert whole.for_endpoint(_endpoint(Toolset())).tools == ()  # nothing chosen: nothing offered
    # Made once per revision, with its own memo (its own encoded listings); everything is the catalog itself.
    assert whole.for_endpoint(read_only) is view and view.memo is not whole.memo
    # A named endpoint offering everything still has its own view: its answers carry its own server name.
    everything = whole.for_endpoint(_endpoint(Toolset(everything=True)))
    assert everything is not whole and everything.tools == whole.tools and everything.memo is not whole.memo
    assert whole.for_endpoint(endpoints()[0]) is whole
    # The admin's row replaces the settings' toolset.
    chosen = compile_catalog(capabilities, {}, "r2", toolsets={"p": Toolset(keys=frozenset({"a.write"}))})
    assert [entry.key for entry in chosen.for_endpoint(read_only).tools] == ["a.write"]


def test_a_rows_read_only_hint_does_not_put_a_writing_tool_on_a_read_only_endpoint() -> None:
    from mcp_expose.declare.exposure_state import ExposureState

    hinted = {
        "a.write": ExposureState("a.write", annotations={"read_only": True}),  # what clients are told
        "a.read": ExposureState("a.read", annotations={"read_only": False}),
    }
    whole = compile_catalog(
        [_capability("a.write", read_only=False), _capability("a.read", read_only=True)], hinted, "r1"
    )
    assert whole.get("a.write").annotations.read_only is False  # a row cannot make a writing tool read-only
    assert whole.get("a.read").annotations.read_only is False  # but can take a read-only hint away
    view = whole.for_endpoint(_endpoint(Toolset(everything=True, read_only=True)))
    assert [entry.key for entry in view.tools] == []  # code says a.write writes; the row took a.read's away


def test_a_row_makes_a_declared_tools_hints_more_careful_never_less_and_an_upstream_rows_as_it_likes() -> None:
    from mcp_expose.catalog.compiled import effective_annotations

    declared = Annotations(read_only=True, destructive=False, idempotent=True, open_world=False)
    careful = {"read_only": False, "destructive": True, "idempotent": False, "open_world": True}
    assert effective_annotations(declared, careful) == Annotations(False, True, False, True)
    unsaid = Annotations()
    loose = {"read_only": True, "destructive": False, "idempotent": True, "open_world": False}
    assert effective_annotations(unsaid, loose) == unsaid  # nothing declared reads as careful: kept so
    assert effective_annotations(Annotations(False, True, False, True), loose) == Annotations(False, True, False, True)
    assert effective_annotations(unsaid, loose, upstream=True) == Annotations(True, False, True, False)


@pytest.mark.django_db
def test_the_admin_form_refuses_a_hint_that_loosens_what_code_declared_saying_why() -> None:
    from django.core.exceptions import ValidationError

    from mcp_expose.models import ExposedTool

    row = ExposedTool.objects.get(key="library.borrow_book")  # declared destructive=False, not read-only
    row.read_only_hint = True
    row.destructive_hint = True  # more careful than declared: accepted
    with pytest.raises(ValidationError) as refused:
        row.full_clean()
    assert set(refused.value.message_dict) == {"read_only_hint"}
    assert "a row can only make a hint more careful (false)" in refused.value.message_dict["read_only_hint"][0]
    row.read_only_hint = None
    row.full_clean()


def test_row_tags_add_to_the_code_tags() -> None:
    from mcp_expose.declare.exposure_state import ExposureState

    whole = compile_catalog(
        [_capability("a.x", tags=frozenset({"code"}))], {"a.x": ExposureState("a.x", tags=frozenset({"row"}))}
    )
    assert whole.get("a.x").tags == {"code", "row"}


# One live server, the demo's two endpoints.


@pytest.fixture(scope="module")
def live(data: Path) -> Iterator[LiveServer]:
    with run_server(data, **LIVE_SETTINGS) as server:
        yield server


def _shell(data: Path, code: str) -> str:
    return run_snippet(data, code, env=LIVE_SETTINGS).stdout.strip().splitlines()[-1]


def _token(data: Path, resource: str) -> str:
    """A DOT access token of the demo admin for `resource`, with every library scope."""
    code = (
        "import secrets; from datetime import timedelta; from django.utils import timezone;"
        "from django.contrib.auth import get_user_model; from oauth2_provider.models import AccessToken, Application;"
        "user = get_user_model().objects.get(username='admin');"
        "app, _ = Application.objects.get_or_create(client_id='endpoints-test', defaults=dict(name='t', user=user,"
        " client_type='public', authorization_grant_type='authorization-code'));"
        "token = secrets.token_urlsafe(32);"
        "AccessToken.objects.create(user=user, application=app, token=token, scope='mcp library:read library:write',"
        f" resource=[{resource!r}], expires=timezone.now() + timedelta(hours=1));"
        "print(token)"
    )
    return _shell(data, code)


def _public(server: LiveServer) -> str:
    return server.base_url + "/mcp/public"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_the_public_endpoint_offers_only_the_read_only_tools(live: LiveServer, key: str, mode: str) -> None:
    async with connect(live.mcp_url, key, mode) as client:
        everything = {tool.name for tool in (await client.list_tools()).tools}
        assert client.server_info is not None and client.server_info.name == "library-demo"
    async with connect(_public(live), key, mode) as client:
        assert client.server_info is not None and client.server_info.name == "library-public"
        assert client.instructions is not None and client.instructions.startswith("Read-only tools")
        public = {tool.name for tool in (await client.list_tools()).tools}
        assert WRITES <= everything and not WRITES & public
        assert "library.search_books" in public and public < everything
        found = await client.call_tool("library.search_books", {"query": "the"})
        assert not found.is_error
        # A tool this endpoint does not offer is unknown here, whatever the credential may do elsewhere.
        with pytest.raises(MCPError) as refused:
            await client.call_tool("library.borrow_book", {"book_id": 1})
        assert refused.value.error.code == -32602
        assert {str(resource.uri) for resource in (await client.list_resources()).resources}  # resources are reads


def test_each_endpoint_is_its_own_oauth_resource(live: LiveServer) -> None:
    for path, name in (("/mcp", "Library demo"), ("/mcp/public", "Library demo, read-only")):
        document = httpx2.get(live.base_url + "/.well-known/oauth-protected-resource" + path).json()
        assert document["resource"] == live.base_url + path and document["resource_name"] == name
        challenge = httpx2.post(live.base_url + path, json={}).headers["www-authenticate"]
        assert f'resource_metadata="{live.base_url}/.well-known/oauth-protected-resource{path}"' in challenge


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_a_token_for_one_endpoint_is_refused_at_the_other(live: LiveServer, data: Path, mode: str) -> None:
    for mine, other in ((live.mcp_url, _public(live)), (_public(live), live.mcp_url)):
        token = _token(data, mine)
        async with connect(mine, token, mode) as client:
            assert (await client.list_tools()).tools
        refused = httpx2.post(other, headers={"Authorization": f"Bearer {token}"}, json={})
        assert refused.status_code == 401
        assert 'error="invalid_token"' in refused.headers["www-authenticate"]


async def _name_asked(ctx: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Ada"})


@pytest.mark.anyio
async def test_a_request_state_sealed_at_one_endpoint_is_refused_at_the_other(live: LiveServer, key: str) -> None:
    """The sealed state of a later round is bound to the endpoint's server name: the same caller, tool, arguments
    and answer are refused at the other endpoint, and still taken where the state was issued."""
    name = types.ElicitResult(action="accept", content={"name": "Ada"})
    for mine, other in ((live.mcp_url, _public(live)), (_public(live), live.mcp_url)):
        async with connect(mine, key, "auto", elicitation_callback=_name_asked) as issuing:
            asked = await issuing.session.call_tool("toolbox.greet", {}, allow_input_required=True)
        assert isinstance(asked, types.InputRequiredResult) and asked.request_state
        async with connect(other, key, "auto", elicitation_callback=_name_asked) as elsewhere:
            with pytest.raises(MCPError) as refused:
                await elsewhere.session.call_tool(
                    "toolbox.greet", {}, input_responses={"who": name}, request_state=asked.request_state
                )
        assert refused.value.error.code == types.INVALID_PARAMS
        assert refused.value.error.data == {"reason": "invalid_request_state"}
        # Refused for where it was sent, not for what it is: the endpoint that sealed it takes it (once).
        async with connect(mine, key, "auto", elicitation_callback=_name_asked) as issuing:
            done = await issuing.session.call_tool(
                "toolbox.greet", {}, input_responses={"who": name}, request_state=asked.request_state
            )
        assert not done.is_error and done.structured_content == {"result": "Hello, Ada!"}


@pytest.mark.anyio
async def test_the_admin_chooses_what_an_endpoint_offers(live: LiveServer, data: Path, key: str) -> None:
    choose = (
        "from mcp_expose.models import EndpointToolset, ExposedTool;"
        "row = EndpointToolset.objects.get(endpoint='public');"
        "row.offer_everything = False; row.read_only = False; row.tags = 'partner'; row.save();"
        "row.capabilities.set(ExposedTool.objects.filter(key='library.popular_authors'));"
        "tool = ExposedTool.objects.get(key='library.borrow_book'); tool.tags = 'partner'; tool.save();"
        "print('ok')"
    )
    _shell(data, choose)
    try:
        async with connect(_public(live), key, "auto") as client:
            offered = {tool.name for tool in (await client.list_tools()).tools}
        assert offered == {"library.popular_authors", "library.borrow_book"}
        async with connect(live.mcp_url, key, "auto") as client:
            assert "library.search_books" in {tool.name for tool in (await client.list_tools()).tools}
    finally:
        _shell(
            data,
            "from mcp_expose.models import EndpointToolset, ExposedTool;"
            "EndpointToolset.objects.filter(endpoint='public').update(offer_everything=True, read_only=True, tags='');"
            "row = EndpointToolset.objects.get(endpoint='public'); row.capabilities.clear(); row.save();"
            "ExposedTool.objects.filter(key='library.borrow_book').update(tags='');"
            "row.save(); print('ok')",
        )


def test_the_connect_page_lists_every_endpoint(live: LiveServer, data: Path) -> None:
    with httpx2.Client(base_url=live.base_url, follow_redirects=True) as browser:
        page = browser.get("/admin/login/")
        token = browser.cookies["csrftoken"]
        browser.post(
            "/admin/login/?next=/mcp/connect/",
            data={"username": "admin", "password": "admin", "csrfmiddlewaretoken": token},
            headers={"Referer": live.base_url + "/admin/login/"},
        )
        page = browser.get("/mcp/connect/")
        assert page.status_code == 200, page.text[:500]
        assert "library-public" in page.text and f"{live.base_url}/mcp/public" in page.text
        chosen = browser.get("/mcp/connect/?endpoint=public")
        assert f'<pre id="mcp-url">{live.base_url}/mcp/public</pre>' in chosen.text
        assert "claude mcp add --transport http library-public" in chosen.text
        assert browser.get("/mcp/connect/?endpoint=nope").status_code == 404


def test_the_doctor_probes_every_endpoint(live: LiveServer, data: Path) -> None:
    result = manage(data, "mcp_doctor", "--site", live.base_url, env=LIVE_SETTINGS)
    assert f"Endpoint default: {live.base_url}/mcp" in result.stdout
    assert f"Endpoint public: {live.base_url}/mcp/public" in result.stdout
    assert "All checks passed." in result.stdout, result.stdout


def test_a_toolset_row_is_made_per_endpoint_on_migrate(data: Path) -> None:
    rows = _shell(
        data,
        "import json; from mcp_expose.models import EndpointToolset;"
        "print(json.dumps(list(EndpointToolset.objects.values_list('endpoint', 'offer_everything', 'read_only'))))",
    )
    assert json.loads(rows) == [["default", True, False], ["public", True, True]]


@pytest.mark.django_db
def test_the_test_client_connects_to_a_named_endpoint(mcp_client: Any, django_user_model: Any) -> None:
    user = django_user_model.objects.create_user("ann")
    public = set(mcp_client(user, endpoint="public").tool_names())
    assert "library.search_books" in public and not WRITES & public
    assert {"library.borrow_book", "library.return_book"} <= set(mcp_client(user).tool_names())
    with pytest.raises(ValueError, match="the endpoints are"):
        mcp_client(user, endpoint="nope").tool_names()
