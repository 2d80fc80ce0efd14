"""The ASGI entry's pieces, each alone: the routing, the gate, the choice between the fast path and the SDK's, the
lifespan, and the resource metadata. Each is driven with a raw ASGI scope, on the test's own event loop."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from mcp.server.subscriptions import InMemorySubscriptionBus

from mcp_expose.catalog.compiled import CatalogProvider
from mcp_expose.core.endpoints import endpoints
from mcp_expose.core.principal import PRINCIPAL_SCOPE_KEY
from mcp_expose.models import ApiKey
from mcp_expose.serving import fastpath_legacy, fastpath_requests
from mcp_expose.serving.asgi import McpExposeASGI
from mcp_expose.serving.events import ChangeRelay
from mcp_expose.serving.gate import Admitted, Gate
from mcp_expose.serving.lifespan import Lifespan
from mcp_expose.serving.path_choice import plain_reader
from mcp_expose.serving.request_context import CATALOG_SCOPE_KEY
from mcp_expose.serving.resource_metadata import serve_metadata

pytestmark = pytest.mark.anyio


BODY = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).encode()


def http_scope(path: str = "/mcp", method: str = "POST", **headers: str) -> dict[str, Any]:
    raw = {"host": "testserver", "content-type": "application/json", **headers}
    return {
        "type": "http",
        "method": method,
        "path": path,
        "scheme": "http",
        "query_string": b"",
        "headers": [(name.replace("_", "-").encode(), value.encode()) for name, value in raw.items()],
    }


class Exchange:
    """A client's side of one ASGI exchange: the body it sends, what it is sent."""

    def __init__(self, body: bytes = BODY) -> None:
        self.body = body
        self.sent: list[dict[str, Any]] = []

    async def receive(self) -> dict[str, Any]:
        body, self.body = self.body, b""
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int:
        return next(message["status"] for message in self.sent if message["type"] == "http.response.start")

    @property
    def json(self) -> Any:
        return json.loads(b"".join(message.get("body", b"") for message in self.sent if "body" in message))


@pytest.fixture
def gate() -> Gate:
    return Gate(CatalogProvider())


async def test_the_gate_refuses_a_foreign_origin_before_anything_else(gate: Gate) -> None:
    exchange = Exchange()
    scope = http_scope(origin="https://evil.example", authorization="Bearer anything")
    assert await gate.admit(endpoints()[0], scope, exchange.receive, exchange.send) is None
    assert exchange.status == 403 and exchange.json["error"] == "forbidden_origin"


@pytest.mark.django_db(transaction=True)
async def test_the_gate_challenges_a_caller_without_credentials(gate: Gate) -> None:
    exchange = Exchange()
    assert await gate.admit(endpoints()[0], http_scope(), exchange.receive, exchange.send) is None
    assert exchange.status == 401
    challenge = dict(exchange.sent[0]["headers"])[b"www-authenticate"].decode()
    assert challenge.startswith("Bearer ") and "resource_metadata=" in challenge


@pytest.mark.django_db(transaction=True)
async def test_the_gate_admits_a_known_key_with_its_principal_and_catalog(gate: Gate) -> None:
    user = await User.objects.acreate(username="reader")
    _, secret = await anyio.to_thread.run_sync(lambda: ApiKey.create_key(user=user, name="k", scopes="mcp"))
    exchange = Exchange()
    scope = http_scope(authorization=f"Bearer {secret}", x_trailing="  spaced  ")
    admitted = await gate.admit(endpoints()[0], scope, exchange.receive, exchange.send)
    assert isinstance(admitted, Admitted) and exchange.sent == []
    assert admitted.principal.user.pk == user.pk and admitted.principal.method == "api_key"
    assert admitted.scope[PRINCIPAL_SCOPE_KEY] is admitted.principal
    assert admitted.scope[CATALOG_SCOPE_KEY] is admitted.catalog
    assert admitted.headers["x-trailing"] == "spaced"  # optional whitespace around a value is not part of it
    assert (await admitted.receive())["body"] == BODY  # nothing of the body was taken
    assert admitted.caller().access_token.client_id == f"api-key:{admitted.principal.api_key_prefix}"


def test_the_choice_of_path_reads_method_and_headers_alone() -> None:
    modern = {"content-type": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call"}
    legacy = {"content-type": "application/json", "mcp-protocol-version": "2025-11-25"}
    assert plain_reader("POST", modern, stateful=False) is fastpath_requests.plain_request
    assert plain_reader("POST", legacy, stateful=False) is fastpath_legacy.plain_legacy_request
    assert plain_reader("POST", legacy, stateful=True) is None  # a stateful session's requests are the SDK's
    assert plain_reader("GET", modern, stateful=False) is None


def test_the_lifespan_alone_refuses_to_start_on_what_cannot_be_served() -> None:
    bus = InMemorySubscriptionBus()
    lifespan = Lifespan(CatalogProvider(), [], ChangeRelay(bus, None), bus, streams=False)
    lifespan.resolve_declarations()  # the demo's declarations and authenticators: all servable
    with (
        override_settings(MCP_EXPOSE={"AUTHENTICATORS": ["no.such.Authenticator"]}),
        pytest.raises(ImproperlyConfigured, match=r"MCP_EXPOSE\['AUTHENTICATORS'\] is misconfigured"),
    ):
        lifespan.resolve_declarations()
    assert not lifespan.stopping()
    lifespan.begin_stopping()
    assert lifespan.stopping()


async def test_the_resource_metadata_alone_answers_its_preflight_and_refuses_other_methods() -> None:
    preflight, refused = Exchange(), Exchange()
    endpoint = endpoints()[0]
    await serve_metadata(endpoint, http_scope(method="OPTIONS"), preflight.receive, preflight.send)
    await serve_metadata(endpoint, http_scope(method="POST"), refused.receive, refused.send)
    assert preflight.status == 204 and (b"access-control-allow-origin", b"*") in preflight.sent[0]["headers"]
    assert refused.status == 405 and (b"allow", b"GET, OPTIONS") in refused.sent[0]["headers"]


async def test_the_routing_hands_django_everything_that_is_not_ours() -> None:
    reached: list[str] = []

    async def django(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["path"])

    app = McpExposeASGI(django, provider=CatalogProvider())
    exchange = Exchange()
    for path in ("/admin/", "/mcpx", "/mcp/other"):
        await app(http_scope(path), exchange.receive, exchange.send)
    with override_settings(ALLOWED_HOSTS=["elsewhere.example"]):
        await app(http_scope("/mcp"), exchange.receive, exchange.send)  # ours: refused by the gate, not Django's
    assert reached == ["/admin/", "/mcpx", "/mcp/other"] and exchange.status == 400
