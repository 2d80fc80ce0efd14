"""VIEW_MIDDLEWARE: the middleware a view-backed call runs through, and none by default.

Live: a real server, the official SDK client in both eras, the toolbox's views reading what the toolbox's
middleware set. Units: the chain's hooks, as Django's handler runs them, and the system check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.checks import Error
from django.core.exceptions import ImproperlyConfigured, MiddlewareNotUsed
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.response import SimpleTemplateResponse
from django.test import override_settings
from django.utils.deprecation import MiddlewareMixin

from mcp_expose.checks import check_settings
from mcp_expose.declare.adapters.middleware import run_view, view_chain

from .live import LIVE_SETTINGS, LiveServer, run_server
from .mcp_client import MODES, connect

TOOLBOX = "tests.apps.toolbox.middleware"
CHAIN = f"{TOOLBOX}.closed_tenants,{TOOLBOX}.TenantMiddleware,{TOOLBOX}.locale_middleware"
VIEW_TOOLS = ["toolbox.tenant", "toolbox.tenant_page"]  # a DRF APIView and a plain Django view


@pytest.fixture(scope="module")
def with_middleware(data: Path) -> Iterator[LiveServer]:
    with run_server(data, MCP_TEST_VIEW_MIDDLEWARE=CHAIN, **LIVE_SETTINGS) as live:
        yield live


async def call_view_tool(server: LiveServer, key: str, mode: str, tool: str, tenant: str | None) -> Any:
    headers = {"X-Tenant": tenant} if tenant is not None else {}
    async with connect(server.mcp_url, key, mode, headers=headers) as client:
        return await client.call_tool(tool, {})


@pytest.mark.live
@pytest.mark.anyio
@pytest.mark.parametrize("tool", VIEW_TOOLS)
@pytest.mark.parametrize("mode", list(MODES))
async def test_views_see_what_the_named_middleware_set(
    with_middleware: LiveServer, key: str, mode: str, tool: str
) -> None:
    result = await call_view_tool(with_middleware, key, mode, tool, "acme")
    assert not result.is_error, result.structured_content
    view_name = "TenantView" if tool == "toolbox.tenant" else "tenant_page"
    assert result.structured_content == {
        "tenant": "acme",
        "locale": "fr",
        "view_name": view_name,
        "middleware_on_this_thread": True,
    }


@pytest.mark.live
@pytest.mark.anyio
@pytest.mark.parametrize("tool", VIEW_TOOLS)
@pytest.mark.parametrize("mode", list(MODES))
async def test_by_default_no_middleware_runs_for_views(server: LiveServer, key: str, mode: str, tool: str) -> None:
    result = await call_view_tool(server, key, mode, tool, "acme")
    assert result.structured_content == {
        "tenant": None,
        "locale": None,
        "view_name": None,
        "middleware_on_this_thread": None,
    }


@pytest.mark.live
@pytest.mark.anyio
@pytest.mark.parametrize("tool", VIEW_TOOLS)
@pytest.mark.parametrize("mode", list(MODES))
async def test_a_middleware_answering_by_itself_is_the_views_answer(
    with_middleware: LiveServer, key: str, mode: str, tool: str
) -> None:
    refused = await call_view_tool(with_middleware, key, mode, tool, "closed")
    assert refused.is_error
    assert refused.structured_content["error"] == {"code": "permission_denied", "message": "This tenant is closed."}
    notice = await call_view_tool(with_middleware, key, mode, tool, "maintenance")
    assert not notice.is_error and notice.structured_content == {"maintenance": True}


# The chain, unit by unit ----------------------------------------------------------------------------------------

# What each middleware saw, in order, for the test that just ran.
seen: list[str] = []


class Recording(MiddlewareMixin):
    def process_request(self, request: HttpRequest) -> None:
        seen.append("request")

    def process_view(self, request: HttpRequest, view: Callable[..., Any], args: tuple, kwargs: dict) -> None:
        seen.append(f"view {view.__name__} {kwargs}")

    def process_template_response(self, request: HttpRequest, response: Any) -> Any:
        seen.append("template")
        response.context_data = {"name": "from the hook"}
        return response

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        seen.append(f"exception {exc}")
        return HttpResponse("handled", status=409) if str(exc) == "handle me" else None

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        seen.append(f"response {response.content.decode()}")
        return response


def unused(get_response: Callable[..., Any]) -> Callable[..., Any]:
    raise MiddlewareNotUsed


class AsyncOnly:
    sync_capable = False
    async_capable = True

    def __init__(self, get_response: Callable[..., Any]) -> None:
        self.get_response = get_response


def page(request: HttpRequest, name: str) -> SimpleTemplateResponse:
    from django.template import engines

    return SimpleTemplateResponse(engines["django"].from_string("hello {{ name }}"), {"name": name})


def failing(request: HttpRequest, name: str) -> HttpResponse:
    raise RuntimeError(name)


def chain_of(*names: str) -> dict[str, Any]:
    return {"VIEW_MIDDLEWARE": [f"{__name__}.{name}" for name in names]}


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    seen.clear()
    view_chain.cache_clear()
    yield
    view_chain.cache_clear()


def test_without_middleware_the_view_is_called_as_it_is() -> None:
    response = run_view(page, HttpRequest(), {"name": "ada"})
    assert not response.is_rendered and seen == []


def test_hooks_run_where_djangos_handler_runs_them() -> None:
    with override_settings(MCP_EXPOSE=chain_of("unused", "Recording")):
        response = run_view(page, HttpRequest(), {"name": "ada"})
    assert response.content == b"hello from the hook"
    assert seen == ["request", "view page {'name': 'ada'}", "template", "response hello from the hook"]


def test_process_exception_may_answer_for_the_view_or_let_it_raise() -> None:
    with override_settings(MCP_EXPOSE=chain_of("Recording")):
        handled = run_view(failing, HttpRequest(), {"name": "handle me"})
        assert handled.status_code == 409
        with pytest.raises(RuntimeError, match="not me"):
            run_view(failing, HttpRequest(), {"name": "not me"})
    assert seen == [
        "request",
        "view failing {'name': 'handle me'}",
        "exception handle me",
        "response handled",
        "request",
        "view failing {'name': 'not me'}",
        "exception not me",
    ]


def test_the_chain_is_built_once_per_setting_value() -> None:
    with override_settings(MCP_EXPOSE=chain_of("Recording")):
        for _ in range(3):
            run_view(lambda request: JsonResponse({}), HttpRequest(), {})
    assert view_chain.cache_info().misses == 1 and view_chain.cache_info().hits == 2


@pytest.mark.parametrize(
    ("paths", "named"),
    [
        (["tests.apps.toolbox.middleware.NoSuchMiddleware"], "'tests.apps.toolbox.middleware.NoSuchMiddleware'"),
        (["no_such_module.Middleware"], "'no_such_module.Middleware'"),
        ([f"{__name__}.AsyncOnly"], "async-only"),
        ([""], "dotted paths"),
        ("tests.apps.toolbox.middleware.TenantMiddleware", "VIEW_MIDDLEWARE"),
    ],
)
def test_the_check_names_each_middleware_that_cannot_serve(paths: Any, named: str) -> None:
    with override_settings(MCP_EXPOSE={"VIEW_MIDDLEWARE": paths}):
        messages = [message for message in check_settings() if message.id == "mcp_expose.E013"]
    assert len(messages) == 1 and isinstance(messages[0], Error) and named in messages[0].msg
    assert messages[0].hint


def test_the_check_accepts_real_middleware() -> None:
    with override_settings(MCP_EXPOSE={"VIEW_MIDDLEWARE": CHAIN.split(",")}):
        assert [message for message in check_settings() if message.id == "mcp_expose.E013"] == []


def test_a_broken_chain_fails_the_call_not_silently() -> None:
    with override_settings(MCP_EXPOSE=chain_of("AsyncOnly")), pytest.raises(ImproperlyConfigured, match="async-only"):
        run_view(page, HttpRequest(), {"name": "ada"})
