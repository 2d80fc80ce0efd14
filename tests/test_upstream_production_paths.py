"""Production paths of the gateway that no other test covers, each against a real upstream process under uvicorn:
what is tested lives in the process and on the wire (its TLS handshake, its token endpoint, its keep-alive
connections), so nothing in this process could stand in for it.

- HTTPS: a request goes to the address the SSRF guard checked, while the TLS name and the Host header stay the
  URL's, and on to the next checked address when one refuses the connection; a certificate no trusted authority
  signed is refused, saying why.
- OAuth 2.1 client credentials: an upstream that is its own authorization server; its token is fetched once, reused,
  and renewed within the call that met a 401; a refused client secret is a tool error that quotes no secret.
- The connection pool: a changed row starts a new pool, and the old one closes.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from django.test import override_settings
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_expose.core.chain import CallChain
from mcp_expose.core.content import ContentBundle
from mcp_expose.core.context import InvocationContext
from mcp_expose.core.errors import UpstreamUnavailable
from mcp_expose.core.principal import Principal
from mcp_expose.core.ssrf_guard import check_host
from mcp_expose.upstream.calling import UpstreamCall, breaker, call_upstream, close_connections
from mcp_expose.upstream.client_credentials import ClientCredentials, tokens
from mcp_expose.upstream.discovery import UpstreamTarget, discover
from mcp_expose.upstream.pool import pool
from mcp_expose.upstream.transport import BoundedTransport, send_pinned
from tests.certificates import ServerCertificate, issue
from tests.live import HANG_GUARD_SECONDS, LiveServer
from tests.upstream_servers import run_upstream
from tests.upstreams.token_server import CLIENT_ID, CLIENT_SECRET

SETTINGS = {"UPSTREAM_ALLOW_LOOPBACK": True}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("upstream-production")


@pytest.fixture(autouse=True)
def loopback_allowed() -> Iterator[None]:
    with override_settings(MCP_EXPOSE=SETTINGS):
        breaker().reset()
        yield
        breaker().reset()


def context() -> InvocationContext:
    return InvocationContext(
        tool_name="up.tool", principal=Principal(user=None, method="api_key"), chain=CallChain(conversation_id="c-1")
    )


# HTTPS


@pytest.fixture(scope="module")
def certificate(files: Path) -> ServerCertificate:
    return issue(files, "localhost")


@pytest.fixture(scope="module")
def pinned() -> str:
    """The address the guard sends a request for `localhost` to (its first): the upstream listens there."""
    with override_settings(MCP_EXPOSE=SETTINGS):
        return str(check_host("localhost", 443)[0])


@pytest.fixture(scope="module")
def secure(files: Path, certificate: ServerCertificate, pinned: str) -> Iterator[LiveServer]:
    """The bare SDK server over TLS, with a certificate for the name `localhost` only (no address in it)."""
    tls = ["--ssl-certfile", str(certificate.certificate), "--ssl-keyfile", str(certificate.key)]
    addressing = {"scheme": "https", "host": "localhost", "verify": certificate.trusted()}
    with run_upstream(files, "bare_server", args=tls, bind=pinned, addressing=addressing) as server:
        yield server


def trusting(certificate: ServerCertificate) -> BoundedTransport:
    """The gateway's own transport (guard, pin, bounds, and its TLS context), made where UPSTREAM_CA_BUNDLE names
    the test's authority."""
    with override_settings(MCP_EXPOSE={**SETTINGS, "UPSTREAM_CA_BUNDLE": str(certificate.authority)}):
        return BoundedTransport("secure", max_bytes=1024 * 1024)


def test_discovery_and_calls_trust_the_authority_named_in_the_ca_bundle_setting(
    secure: LiveServer, certificate: ServerCertificate
) -> None:
    target = UpstreamTarget(32, "secure", secure.mcp_url, "2026-07-28", connect_timeout=5.0, call_timeout=5.0)

    async def run() -> Any:
        try:
            return await call_upstream(UpstreamCall(target, "add"), {"a": 2, "b": 3}, context())
        finally:
            await close_connections()

    with override_settings(MCP_EXPOSE={**SETTINGS, "UPSTREAM_CA_BUNDLE": str(certificate.authority)}):
        found = anyio.run(discover, target)
        assert found.error is None and [tool.name for tool in found.tools] == ["echo", "add", "notes"]
        assert anyio.run(run) == {"result": 5}


def test_https_goes_to_the_checked_address_under_the_urls_name(
    secure: LiveServer, certificate: ServerCertificate, pinned: str
) -> None:
    async def run() -> tuple[dict[str, Any], list[str], Any]:
        async with httpx2.AsyncClient(transport=trusting(certificate), follow_redirects=False) as http:
            seen = (await http.get(f"{secure.base_url}/seen")).json()
            async with Client(streamable_http_client(secure.mcp_url, http_client=http), mode="2026-07-28") as client:
                listed = [tool.name for tool in (await client.list_tools()).tools]
                added = await client.call_tool("add", {"a": 2, "b": 3})
        return seen, listed, added.structured_content

    seen, listed, added = anyio.run(run)
    # Sent to the address that was checked; the Host header names the URL's host.
    assert seen == {"host": f"localhost:{secure.port}", "scheme": "https", "server": [pinned, secure.port]}
    assert listed == ["echo", "add", "notes"] and added == {"result": 5}


def test_a_name_whose_first_address_refuses_the_connection_is_reached_at_the_next(
    secure: LiveServer, certificate: ServerCertificate, pinned: str
) -> None:
    """A name may resolve first to an address this host cannot reach (IPv6 without a route) and then to one that
    serves: the request goes on to the next checked address. Only a refused connection moves on (nothing of the
    request was sent), and when every address refuses, the last refusal is the error."""
    refusing = [ipaddress.ip_address("127.0.0.3"), ipaddress.ip_address("127.0.0.4")]  # nothing listens there

    async def run() -> Any:
        inner = trusting(certificate).inner
        async with inner:
            request = httpx2.Request("GET", f"{secure.base_url}/seen")
            response = await send_pinned(inner, request, "localhost", [refusing[0], ipaddress.ip_address(pinned)])
            seen = json.loads(await response.aread())
            with pytest.raises(httpx2.ConnectError):
                await send_pinned(inner, httpx2.Request("GET", f"{secure.base_url}/seen"), "localhost", refusing)
        return seen

    assert anyio.run(run) == {"host": f"localhost:{secure.port}", "scheme": "https", "server": [pinned, secure.port]}


def test_the_certificate_is_checked_against_the_name_it_was_asked_for(
    secure: LiveServer, certificate: ServerCertificate, pinned: str
) -> None:
    """The same server by its address: the certificate names `localhost` only, so it is refused. Above, the request
    went to that address too, and passed only because the TLS name it asked for was the URL's."""
    url = f"https://{'[' + pinned + ']' if ipaddress.ip_address(pinned).version == 6 else pinned}:{secure.port}/seen"

    async def run() -> None:
        async with httpx2.AsyncClient(transport=trusting(certificate), follow_redirects=False) as http:
            await http.get(url)

    with pytest.raises(httpx2.ConnectError, match=f"certificate is not valid for '{pinned}'"):
        anyio.run(run)


def test_a_certificate_no_trusted_authority_signed_is_refused_saying_why(secure: LiveServer) -> None:
    """Without UPSTREAM_CA_BUNDLE, discovery and calls trust the system's authorities only (`trust_env=False`: not
    SSL_CERT_FILE either), so the test's authority is unknown to them: refused, saying so and what to do."""
    target = UpstreamTarget(31, "secure", secure.mcp_url, "2026-07-28", connect_timeout=5.0, call_timeout=5.0)
    found = anyio.run(discover, target)
    assert found.tools == ()
    said = "The upstream's TLS certificate was refused (unable to get local issuer certificate)."
    assert found.error is not None and found.error.startswith(said) and "UPSTREAM_CA_BUNDLE" in found.error

    async def run() -> Any:
        try:
            return await call_upstream(UpstreamCall(target, "add"), {"a": 2, "b": 3}, context())
        finally:
            await close_connections()

    with pytest.raises(UpstreamUnavailable) as refused:
        anyio.run(run)
    assert said in refused.value.message


def test_a_ca_bundle_that_cannot_be_read_is_a_check_error(files: Path) -> None:
    from mcp_expose.checks import _upstream_setting_messages
    from mcp_expose.core.conf import get_settings

    (files / "not-pem.txt").write_text("not a certificate")
    for value, problem in (
        (str(files / "missing.pem"), "no such file"),
        (str(files / "not-pem.txt"), "no certificate"),
    ):
        with override_settings(MCP_EXPOSE={"UPSTREAM_CA_BUNDLE": value}):
            [error] = [m for m in _upstream_setting_messages(get_settings()) if "UPSTREAM_CA_BUNDLE" in m.msg]
        assert error.id == "mcp_expose.E016" and problem in error.msg


# OAuth 2.1 client credentials


@pytest.fixture(scope="module")
def secured(files: Path) -> Iterator[LiveServer]:
    with run_upstream(files, "token_server") as server:
        yield server


def secured_call(server: LiveServer, pk: int, secret: str = CLIENT_SECRET) -> UpstreamCall:
    credentials = ClientCredentials(f"{server.base_url}/token", CLIENT_ID, secret, resource=server.mcp_url)
    target = UpstreamTarget(pk, "secured", server.mcp_url, "2026-07-28", 5.0, 5.0, oauth=credentials)
    return UpstreamCall(target, "echo")


async def stats(server: LiveServer) -> dict[str, Any]:
    async with httpx2.AsyncClient() as http:
        return (await http.get(f"{server.base_url}/stats")).json()


def test_a_token_is_fetched_once_reused_and_renewed_within_the_call_that_met_a_401(secured: LiveServer) -> None:
    call = secured_call(secured, 41)

    async def run() -> list[tuple[Any, dict[str, Any]]]:
        tokens.forget(41)
        steps = [(None, await stats(secured))]
        for _ in range(2):
            steps.append((await call_upstream(call, {"text": "hi"}, context()), await stats(secured)))
        async with httpx2.AsyncClient() as http:
            await http.post(f"{secured.base_url}/revoke")  # revoked before it expired: the cache cannot know
        steps.append((await call_upstream(call, {"text": "again"}, context()), await stats(secured)))
        await close_connections()
        return steps

    (_, before), (first, fetched), (second, reused), (third, renewed) = anyio.run(run)
    issued = before["issued"]
    assert first == second == {"result": "hi"} and third == {"result": "again"}
    assert fetched["issued"] == reused["issued"] == issued + 1  # the second call reused the token
    assert reused["accepted"][-2:] == [f"tok-{issued + 1}"] * 2
    # After the revocation: one 401, one new token, and the call made again with it, all in the one call.
    assert renewed["issued"] == issued + 2
    assert renewed["refused_calls"] == reused["refused_calls"] + 1
    assert renewed["accepted"][-1] == f"tok-{issued + 2}"
    # Asked for as RFC 8707 says, for the upstream's URL.
    assert renewed["forms"][-1] == {"grant_type": "client_credentials", "resource": secured.mcp_url}


def test_a_refused_client_secret_is_upstream_unavailable_and_quotes_no_secret(secured: LiveServer) -> None:
    call = secured_call(secured, 42, secret="not-the-secret")

    async def run() -> tuple[dict[str, Any], UpstreamUnavailable, dict[str, Any]]:
        before = await stats(secured)
        try:
            await call_upstream(call, {"text": "hi"}, context())
        except UpstreamUnavailable as exc:
            return before, exc, await stats(secured)
        finally:
            await close_connections()
        raise AssertionError("the call succeeded with a wrong client secret")

    before, refused, after = anyio.run(run)
    assert refused.code == "upstream_unavailable"
    assert refused.message == (
        "The upstream server 'secured' could not be used: The token endpoint answered HTTP 401 (invalid_client); "
        "no token."
    )
    assert "not-the-secret" not in json.dumps([refused.message, refused.details])
    assert after["refused_clients"] == before["refused_clients"] + 1
    assert after["accepted"] == before["accepted"]  # nothing reached the MCP endpoint


# The connection pool


@pytest.fixture(scope="module")
def hostile(files: Path) -> Iterator[LiveServer]:
    with run_upstream(files, "hostile_server") as server:
        yield server


def test_a_changed_row_gets_a_new_pool_and_the_old_pool_closes(hostile: LiveServer) -> None:
    url = f"{hostile.base_url}/mcp/calls"
    before = UpstreamTarget(43, "up", url, "2026-07-28", headers={"Authorization": "Bearer before"})
    after = UpstreamTarget(43, "up", url, "2026-07-28", headers={"Authorization": "Bearer after"})

    async def echoed(target: UpstreamTarget) -> str:
        value = await call_upstream(UpstreamCall(target, "fine_call"), {"text": "hi"}, context())
        assert isinstance(value, ContentBundle)
        return json.loads(value.items[0].text)["headers"]["authorization"]

    async def run() -> None:
        assert await echoed(before) == "Bearer before"
        first = pool.of_this_loop()[43]
        served: list[str] = []
        closed = anyio.Event()
        serve, close = first.transport.handle_async_request, first.transport.aclose

        async def watched_serve(request: httpx2.Request) -> httpx2.Response:
            served.append(request.headers["authorization"])
            return await serve(request)

        async def watched_close() -> None:
            await close()
            closed.set()

        first.transport.handle_async_request = watched_serve  # type: ignore[method-assign]
        first.transport.aclose = watched_close  # type: ignore[method-assign]
        # The same row again: the same pool serves it.
        assert await echoed(before) == "Bearer before"
        assert pool.of_this_loop()[43] is first and served and set(served) == {"Bearer before"}
        # The row changed: a new pool, with the new header; the old one serves nothing more, and closes.
        assert await echoed(after) == "Bearer after"
        second = pool.of_this_loop()[43]
        assert second is not first and second.fingerprint != first.fingerprint
        with anyio.fail_after(HANG_GUARD_SECONDS):  # only stops a hang: it closes at once
            await closed.wait()
        assert set(served) == {"Bearer before"}
        await close_connections()

    anyio.run(run)


def test_a_row_changed_during_a_call_closes_the_old_pool_only_after_that_call(secured: LiveServer) -> None:
    """Replacing a pool must not cut a call still reading from it."""
    held = secured_call(secured, 44)
    changed = UpstreamCall(replace(held.target, call_timeout=4.0), "echo")

    async def run() -> tuple[Any, int, bool]:
        tokens.forget(44)
        started = anyio.Event()
        results: list[Any] = []

        async def report(progress: float, total: float | None, message: str | None) -> None:
            started.set()

        holding = InvocationContext(
            tool_name="up.hold", principal=context().principal, chain=CallChain(), report_progress_callback=report
        )

        async def hold() -> None:
            results.append(await call_upstream(UpstreamCall(held.target, "hold"), {}, holding))

        async with anyio.create_task_group() as group:
            group.start_soon(hold)
            with anyio.fail_after(HANG_GUARD_SECONDS):
                await started.wait()
            old = pool.of_this_loop()[44]
            assert await call_upstream(changed, {"text": "hi"}, context()) == {"result": "hi"}
            held_by = old.users  # the held call still holds the replaced pool
            async with httpx2.AsyncClient() as http:
                await http.post(f"{secured.base_url}/release")
        retired_then_closed = old.retired and old.users == 0 and old not in pool.of_this_loop().values()
        await close_connections()
        return results[0], held_by, retired_then_closed

    result, held_by, retired_then_closed = anyio.run(run)
    assert result == {"result": "released"}  # the held call finished over the pool that was replaced under it
    assert held_by == 1 and retired_then_closed
