"""A credential sent in a URL is revoked, recorded for the admin, and never written to the server's log.

Live: uvicorn serves the demo with its access log on (through the demo's LOGGING), two processes on one
database, so that a revocation made by one is seen at once by the other.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from uvicorn.config import LOGGING_CONFIG
from uvicorn.logging import AccessFormatter

from mcp_expose.access.credential_leaks import LEAK_REASON
from mcp_expose.access_log import StripQueryStrings

from .live import (
    LIVE_SETTINGS,
    LiveServer,
    create_api_key,
    jsonrpc_body,
    modern_headers,
    run_server,
    run_snippet,
)
from .oauth_client import Browser, obtain_token, refresh, register_client
from .test_processes import admin_session

# uvicorn's access log record: '%s - "%s %s HTTP/%s" %d' with (client, method, path?query, http_version, status).
ACCESS_FORMAT = '%s - "%s %s HTTP/%s" %d'


def access_record(target: str) -> logging.LogRecord:
    return logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, ACCESS_FORMAT, ("127.0.0.1:5000", "POST", target, "1.1", 400), None
    )


def uvicorn_line(record: logging.LogRecord) -> str:
    """The line uvicorn's own access formatter writes for `record`."""
    return AccessFormatter(fmt=LOGGING_CONFIG["formatters"]["access"]["fmt"], use_colors=False).format(record)


def test_the_filter_leaves_the_path_of_every_request_line() -> None:
    record = access_record("/mcp?access_token=s3cret&x=1")
    assert StripQueryStrings().filter(record) is True
    assert uvicorn_line(record) == 'INFO:     127.0.0.1:5000 - "POST /mcp HTTP/1.1" 400 Bad Request'
    assert "s3cret" not in record.getMessage()
    untouched = access_record("/admin/")
    StripQueryStrings().filter(untouched)
    assert untouched.args == ("127.0.0.1:5000", "POST", "/admin/", "1.1", 400)


def test_the_filter_can_be_limited_to_some_paths() -> None:
    only_mcp = StripQueryStrings(paths=["/mcp", "/mcp/"])
    mcp, admin = access_record("/mcp/?api_key=s3cret"), access_record("/admin/?q=ada")
    only_mcp.filter(mcp)
    only_mcp.filter(admin)
    assert mcp.args[2] == "/mcp/" and admin.args[2] == "/admin/?q=ada"


# Live --------------------------------------------------------------------------------------------------------

VERBOSE = {**LIVE_SETTINGS, "MCP_EXPOSE_LOG_LEVEL": "INFO"}


@pytest.fixture(scope="module")
def first(data: Path) -> Iterator[LiveServer]:
    with run_server(data, log_level="info", **VERBOSE) as server:
        yield server


@pytest.fixture(scope="module")
def second(data: Path) -> Iterator[LiveServer]:
    with run_server(data, log_level="info", **VERBOSE) as server:
        yield server


def list_tools(server: LiveServer, token: str | None = None, query: str = "") -> httpx2.Response:
    return httpx2.post(
        server.mcp_url + query, content=jsonrpc_body("tools/list"), headers=modern_headers("tools/list", token)
    )


def shell(data: Path, code: str) -> str:
    return run_snippet(data, code, env=LIVE_SETTINGS).stdout.strip().splitlines()[-1]


def shown_time(data: Path, model: str, lookup: str) -> str:
    """A row's revocation time as the admin prints it."""
    return shell(
        data,
        "from django.utils import formats, timezone; from mcp_expose.models import *;"
        f"print(formats.localize(timezone.template_localtime({model}.objects.get({lookup}).revoked_at)))",
    )


@pytest.mark.live
def test_an_api_key_in_the_url_is_revoked_in_every_process(first: LiveServer, second: LiveServer, data: Path) -> None:
    secret = create_api_key(data, "admin", "mcp library:read")
    prefix = secret.split("_")[1]
    assert list_tools(second, secret).status_code == 200  # the second process now knows the key

    response = list_tools(first, query=f"?api_key={secret}")
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "invalid_request" and "has been revoked" in body["error_description"]
    assert secret not in response.text and prefix not in response.text

    assert list_tools(second, secret).status_code == 401
    assert list_tools(first, secret).status_code == 401

    with admin_session(first.base_url) as admin:
        changelist = admin.get("/admin/mcp_expose/apikey/", params={"q": prefix}).text
        pk = re.search(r'href="/admin/mcp_expose/apikey/(\d+)/change/', changelist).group(1)
        page = admin.get(f"/admin/mcp_expose/apikey/{pk}/change/").text
        assert LEAK_REASON in page
        assert shown_time(data, "ApiKey", f"prefix={prefix!r}") in page
        leaks = admin.get("/admin/mcp_expose/credentialleak/", params={"q": prefix}).text
        assert (
            "API key" in leaks
            and prefix in leaks
            and shown_time(data, "CredentialLeak", f"identifier={prefix!r}") in leaks
        )

    for server in (first, second):
        log = server.log()
        assert secret not in log and secret.split("_", 2)[2] not in log  # the random part may hold "_" itself
    assert f"Revoked API key {prefix}, admin (API key {prefix}): it was sent in a URL" in first.log()
    # The access log is on and writes the request line, without its query string.
    assert '"POST /mcp HTTP/1.1" 400' in first.log()


@pytest.mark.live
def test_an_access_token_in_the_url_is_revoked_with_its_refresh_token(first: LiveServer, data: Path) -> None:
    client_id = register_client(first.base_url)["client_id"]
    with Browser.logged_in(first.base_url, "reader", "reader") as reader:
        token = obtain_token(reader, first.base_url, client_id, "mcp library:read", first.mcp_url)
    access, refresh_token = token["access_token"], token["refresh_token"]
    assert list_tools(first, access).status_code == 200

    response = list_tools(first, query=f"?access_token={access}")
    assert response.status_code == 400 and "has been revoked" in response.json()["error_description"]
    assert access not in response.text

    assert list_tools(first, access).status_code == 401
    revoked = shell(
        data,
        "import hashlib; from oauth2_provider.models import RefreshToken;"
        f"print(RefreshToken.objects.get(token_checksum=hashlib.sha256({refresh_token!r}.encode()).hexdigest()).revoked"
        " is not None)",
    )
    assert revoked == "True"
    refreshed = refresh(first.base_url, client_id, refresh_token)
    assert refreshed.status_code == 400 and refreshed.json()["error"] == "invalid_grant"

    with admin_session(first.base_url) as admin:
        leaks = admin.get("/admin/mcp_expose/credentialleak/", params={"q": client_id}).text
        assert "OAuth access token" in leaks and client_id in leaks and ">reader<" in leaks
        assert LEAK_REASON in leaks
        assert shown_time(data, "CredentialLeak", f"client_id={client_id!r}") in leaks

    log = first.log()
    assert access not in log and refresh_token not in log
    assert f"OAuth client {client_id}): it was sent in a URL" in log


@pytest.mark.live
def test_a_wrong_key_in_the_url_revokes_nothing(first: LiveServer, data: Path) -> None:
    secret = create_api_key(data, "admin", "mcp")
    prefix = secret.split("_")[1]
    guessed = f"mcpx_{prefix}_guessed"
    response = list_tools(first, query=f"?api_key={guessed}")
    assert response.status_code == 400
    assert response.json()["error_description"] == "Send credentials in the Authorization header, never in the URL."
    assert list_tools(first, secret).status_code == 200
    assert (
        shell(
            data,
            f"from mcp_expose.models import *; print(CredentialLeak.objects.filter(identifier={prefix!r}).count(), ApiKey.objects.get(prefix={prefix!r}).revoked_at)",
        )
        == "0 None"
    )
    assert guessed not in first.log()
