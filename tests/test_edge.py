from __future__ import annotations

import pytest
from django.test import override_settings

from mcp_expose.core.requests import origin_allowed
from mcp_expose.serving.edge import check_body_size, check_host, check_origin, check_request


def test_hosts_follow_allowed_hosts() -> None:
    with override_settings(ALLOWED_HOSTS=["mcp.example.com"]):
        assert check_host({"host": "mcp.example.com"}) is None
        assert check_host({"host": "mcp.example.com:8443"}) is None
        refusal = check_host({"host": "evil.example.com"})
        assert refusal is not None and refusal.status == 400
        assert check_host({}) is not None
        assert check_host({"host": "mcp.example.com:99999"}) is not None  # not a port: refused, not a crash


@pytest.mark.parametrize(
    ("origin", "allowed", "ok"),
    [
        ("http://localhost:6274", ["http://localhost:*"], True),
        ("https://localhost:6274", ["http://localhost:*"], False),
        ("https://app.example.com", ["https://app.example.com"], True),
        ("https://app.example.com.evil.io", ["https://app.example.com"], False),
        ("http://127.0.0.1:9000", [], True),  # same origin as the request
        ("null", [], False),
    ],
)
def test_origin_rules(origin: str, allowed: list[str], ok: bool) -> None:
    assert origin_allowed(origin, "http://127.0.0.1:9000", allowed) is ok


def test_absent_origin_is_fine_and_foreign_gets_403() -> None:
    with override_settings(MCP_EXPOSE={"ALLOWED_ORIGINS": []}):
        assert check_origin("http", {"host": "127.0.0.1:9000"}) is None
        refusal = check_origin("http", {"host": "127.0.0.1:9000", "origin": "https://evil.example"})
        assert refusal is not None and refusal.status == 403


def test_proxy_ssl_header_decides_the_scheme_for_same_origin() -> None:
    headers = {"host": "mcp.example.com", "origin": "https://mcp.example.com", "x-forwarded-proto": "https"}
    with override_settings(SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https"), MCP_EXPOSE={}):
        assert check_origin("http", headers) is None
    with override_settings(SECURE_PROXY_SSL_HEADER=None, MCP_EXPOSE={}):
        assert check_origin("http", headers) is not None


def test_body_size_limit() -> None:
    with override_settings(MCP_EXPOSE={"MAX_REQUEST_BODY_SIZE": 10}):
        assert check_body_size({"content-length": "10"}) is None
        refusal = check_body_size({"content-length": "11"})
        assert refusal is not None and refusal.status == 413
        bad = check_body_size({"content-length": "ten"})
        assert bad is not None and bad.status == 400


def test_checks_run_in_order_host_first() -> None:
    with override_settings(ALLOWED_HOSTS=["ok"], MCP_EXPOSE={"MAX_REQUEST_BODY_SIZE": 1}):
        refusal = check_request("http", {"host": "bad", "origin": "https://evil", "content-length": "5"})
        assert refusal is not None and refusal.error == "invalid_host"
