"""The operator's pages around the exposure rows: try it, catalog overview, usage dashboard."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from mcp_expose.declare.json_schemas import portable_types
from mcp_expose.models import ExposedTool, ToolCall
from mcp_expose.operator.tryit import form_fields, parse_submission
from project.library.seed import seed_library

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def boss() -> Client:
    seed_library()
    User.objects.create_superuser("boss", "boss@example.com", "pw")
    client = Client(enforce_csrf_checks=True)
    client.login(username="boss", password="pw")
    return client


def token(page: str) -> str:
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)


def try_url(key: str) -> str:
    return f"/admin/mcp_expose/exposedtool/{ExposedTool.objects.get(key=key).pk}/try/"


def test_try_it_builds_a_form_from_the_schema_and_shows_the_client_result(boss: Client) -> None:
    url = try_url("library.search_books")
    page = boss.get(url).content.decode()
    assert '<label for="arg-query">query</label>' in page and '<select id="arg-genre"' in page
    assert 'type="number" step="1" id="arg-limit"' in page and "confirm-write" not in page
    response = boss.post(url, {"csrfmiddlewaretoken": token(page), "arg_query": "sagan", "arg_limit": "1"})
    result = json.loads(
        re.search(r'<pre class="mcp-json" id="try-result"[^>]*>(.*?)</pre>', response.content.decode(), re.S)
        .group(1)
        .replace("&quot;", '"')
        .replace("&#x27;", "'")
    )
    assert result["isError"] is False and result["structuredContent"]["result"][0]["title"] == "Cosmos"
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    call = ToolCall.objects.get(tool_name="library.search_books")
    assert call.username == "boss" and call.auth_method == "local" and call.outcome == "ok"


def test_try_it_asks_before_a_write_and_needs_csrf_and_permission(boss: Client) -> None:
    url = try_url("library.borrow_book")
    page = boss.get(url).content.decode()
    assert 'id="confirm-write"' in page
    assert boss.post(url, {"arg_book_id": "1"}).status_code == 403  # no CSRF token
    refused = boss.post(url, {"csrfmiddlewaretoken": token(page), "arg_book_id": "1"}).content.decode()
    assert "tick the confirmation box" in refused and not ToolCall.objects.exists()
    User.objects.create_user("clerk", password="pw", is_staff=True).user_permissions.add(
        Permission.objects.get(codename="view_exposedtool")
    )
    clerk = Client()
    clerk.login(username="clerk", password="pw")
    assert clerk.get(url).status_code == 403  # viewing rows is not calling tools


def test_catalog_overview_explains_why_tools_are_hidden(boss: Client) -> None:
    reader = User.objects.create_user("reader", password="pw")
    ExposedTool.objects.filter(key="library.popular_authors").update(enabled=False)
    page = boss.get(
        "/admin/mcp_expose/exposedtool/overview/", {"user": reader.pk, "scopes": "library:read"}
    ).content.decode()
    rows = dict(re.findall(r'<tr><th scope="row">([^<]+)</th><td>[^<]*</td><td>[^<]*</td><td>([^<]*)</td></tr>', page))
    assert rows["library.search_books"] == ""
    assert rows["library.borrow_book"] == "missing scope: library:write"
    assert rows["library.overdue_loans"] == "missing permission: library.view_loan"
    assert rows["library.popular_authors"] == "disabled"
    assert "tools served" in page and "tokens in every model context" in page


def overview_rows(page: str) -> dict[str, str]:
    """The overview table: each tool's name, and why it is hidden ("" when listed)."""
    return dict(re.findall(r'<tr><th scope="row">([^<]+)</th><td>[^<]*</td><td>[^<]*</td><td>([^<]*)</td></tr>', page))


def test_catalog_overview_as_an_oauth_client_names_the_clients_a_row_allows(boss: Client) -> None:
    from oauth2_provider.models import get_application_model

    Application = get_application_model()
    owner = User.objects.create_user("agent-owner", password="pw")

    def application(name: str) -> Any:
        return Application.objects.create(
            name=name,
            client_id=f"{name}-client-id",
            user=owner,
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris="http://127.0.0.1/callback",
        )

    allowed, other = application("allowed-agent"), application("other-agent")
    ExposedTool.objects.get(key="library.search_books").allowed_clients.set([allowed])

    def seen_by(**query: Any) -> dict[str, str]:
        page = boss.get("/admin/mcp_expose/exposedtool/overview/", {"scopes": "library:read", **query})
        assert page.status_code == 200
        return overview_rows(page.content.decode())

    as_allowed, as_other = seen_by(client=allowed.pk), seen_by(client=other.pk)
    assert as_allowed["library.search_books"] == ""
    assert as_other["library.search_books"] == "client not allowed: only allowed-agent-client-id"
    # Only that row names clients: the other client sees the rest as the allowed one does.
    assert as_other["library.popular_authors"] == as_allowed["library.popular_authors"] == ""
    # An API key is no OAuth client: the user alone does not see the tool either.
    assert seen_by(user=owner.pk)["library.search_books"] == "client not allowed: only allowed-agent-client-id"


def test_the_dashboard_draws_charts_without_scripts(boss: Client) -> None:
    from django.utils import timezone

    ToolCall.objects.bulk_create(
        ToolCall(
            tool_name="library.echo", outcome=outcome, duration_ms=ms, auth_method="api_key", created_at=timezone.now()
        )
        for outcome, ms in [("ok", 5.0), ("ok", 7.0), ("internal", 50.0), ("permission_denied", 1.0)]
    )
    page = boss.get("/admin/mcp_expose/toolcall/summary/").content.decode()
    assert page.count('<svg xmlns="http://www.w3.org/2000/svg" role="img"') >= 4
    assert 'aria-label="library.echo: calls per hour, last 24 hours"' in page
    assert "library.echo: error rate 25%" in page and "?tool_name=library.echo&amp;outcome__exact=internal" in page
    assert "<script" not in page.split('<div id="content-main"')[1]


@pytest.mark.usefixtures("spill_dir")
def test_the_dashboard_says_how_many_usage_rows_wait_for_the_database(boss: Client) -> None:
    from mcp_expose.calls import usage, usage_spill
    from mcp_expose.core.principal import Principal

    assert 'id="usage-unwritten"' not in boss.get("/admin/mcp_expose/toolcall/summary/").content.decode()
    caller = Principal(user=None, method="local")
    assert usage_spill.set_aside([usage.row_values(usage.CallRecord("t.kept", caller)) for _ in range(2)]) == 2
    page = boss.get("/admin/mcp_expose/toolcall/summary/").content.decode()
    assert "0 buffered in memory, 2 in spill files" in page


def test_form_submission_parsing() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer"},
            "x": {"type": ["number", "string"]},
            "flag": {"type": "boolean"},
            "mode": {"enum": ["a", "b"]},
            "data": {"type": "object"},
            "note": {"type": "string"},
        },
        "required": ["n"],
    }
    assert [field.widget for field in form_fields(schema)] == ["number", "text", "checkbox", "select", "json", "text"]
    arguments, errors = parse_submission(
        schema,
        {"arg_n": "3", "arg_x": "1.5", "arg_flag": "on", "arg_mode": "b", "arg_data": '{"k": 1}', "arg_note": ""},
    )
    assert errors == [] and arguments == {"n": 3, "x": 1.5, "flag": True, "mode": "b", "data": {"k": 1}}
    _, errors = parse_submission(schema, {"arg_n": "three", "arg_mode": "z", "arg_data": "{"})
    assert len(errors) == 3
    raw, errors = parse_submission(schema, {"raw_arguments": '{"n": 1}', "arg_n": "9"})
    assert raw == {"n": 1} and errors == []


def test_the_form_reads_unions_written_as_single_type_branches() -> None:
    """A generated schema spells `["integer", "string"]` and `["integer", "null"]` as `anyOf` branches: the form
    still offers a text box for the one, a number box for the other, and converts what is typed."""
    schema = portable_types(
        {
            "type": "object",
            "properties": {
                "book": {"type": ["integer", "string"]},
                "born": {"type": ["integer", "null"]},
                "fee": {"type": ["number", "string", "null"]},
            },
        }
    )
    assert "anyOf" in schema["properties"]["book"]
    assert [field.widget for field in form_fields(schema)] == ["text", "number", "text"]
    arguments, errors = parse_submission(schema, {"arg_book": "7", "arg_born": "1929", "arg_fee": "1.5"})
    assert errors == [] and arguments == {"book": 7, "born": 1929, "fee": 1.5}
    arguments, errors = parse_submission(schema, {"arg_book": "isbn-1", "arg_born": "soon"})
    assert arguments == {"book": "isbn-1"} and errors == ["born: not a number"]
