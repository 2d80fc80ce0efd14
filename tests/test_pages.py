from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings

pytestmark = pytest.mark.django_db


def test_connect_page_needs_a_login() -> None:
    response = Client().get("/mcp/connect/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


@override_settings(ALLOWED_HOSTS=["mcp.example.com"])
def test_connect_page_shows_the_endpoint_configs_and_scopes() -> None:
    User.objects.create_user("ann", password="pw")
    client = Client()
    client.login(username="ann", password="pw")
    page = client.get("/mcp/connect/", HTTP_HOST="mcp.example.com").content.decode()
    assert '<pre id="mcp-url">http://mcp.example.com/mcp</pre>' in page
    assert "claude mcp add --transport http library-demo http://mcp.example.com/mcp" in page
    assert "&quot;type&quot;: &quot;http&quot;" in page  # VS Code
    assert "&quot;mcpServers&quot;" in page  # Cursor
    assert "@modelcontextprotocol/inspector --cli" in page
    assert "Borrow and return books in your name" in page and "library.borrow_book" in page
    assert "Ask an administrator to create an API key" in page


def test_staff_get_a_link_to_create_an_api_key() -> None:
    User.objects.create_user("boss", password="pw", is_staff=True)
    client = Client()
    client.login(username="boss", password="pw")
    assert "/admin/mcp_expose/apikey/add/" in client.get("/mcp/connect/").content.decode()


def test_the_configured_resource_wins_over_the_host_header() -> None:
    User.objects.create_user("ann", password="pw")
    client = Client()
    client.login(username="ann", password="pw")
    with override_settings(MCP_EXPOSE={"RESOURCE": "https://MCP.example.com/mcp/"}):
        page = client.get("/mcp/connect/").content.decode()
    assert "https://mcp.example.com/mcp</pre>" in page
