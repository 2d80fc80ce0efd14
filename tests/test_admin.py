"""The admin, driven through Django's test client with CSRF checks enforced."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

import mcp_expose
from mcp_expose.catalog.compiled import provider
from mcp_expose.models import ApiKey, ExposedTool

pytestmark = pytest.mark.django_db(transaction=True)

CHANGELIST = "/admin/mcp_expose/exposedtool/"


@pytest.fixture
def admin_client() -> Client:
    User.objects.create_superuser("boss", "boss@example.com", "pw")
    client = Client(enforce_csrf_checks=True)
    assert client.login(username="boss", password="pw")
    return client


def csrf_token(client: Client, url: str) -> str:
    page = client.get(url)
    assert page.status_code == 200
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)


def served_names() -> set[str]:
    return {entry.name for entry in provider.get_sync().tools}


def test_rows_exist_for_every_declaration_after_migrate() -> None:
    assert set(ExposedTool.objects.values_list("key", flat=True)) >= {"library.search_books", "library.echo"}


def test_changelist_shows_tools_with_toggles_filters_and_search(admin_client: Client) -> None:
    page = admin_client.get(CHANGELIST, {"q": "search_books"}).content.decode()
    assert "library.search_books" in page and "library.get_book" not in page
    assert 'name="form-0-enabled"' in page
    full = admin_client.get(CHANGELIST).content.decode()
    assert "Enable selected tools" in full and "Disable selected tools" in full
    assert "library:write" in full  # scopes column
    assert admin_client.get(CHANGELIST, {"app": "library", "enabled__exact": "1"}).status_code == 200


def test_bulk_disable_needs_csrf_and_hides_the_tool(admin_client: Client) -> None:
    row = ExposedTool.objects.get(key="library.echo")
    assert "library.echo" in served_names()
    refused = admin_client.post(CHANGELIST, {"action": "disable_selected", "_selected_action": [row.pk]})
    assert refused.status_code == 403
    assert ExposedTool.objects.get(pk=row.pk).enabled
    token = csrf_token(admin_client, CHANGELIST)
    response = admin_client.post(
        CHANGELIST, {"action": "disable_selected", "_selected_action": [row.pk], "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 302
    assert not ExposedTool.objects.get(pk=row.pk).enabled
    assert "library.echo" not in served_names()


def test_change_page_previews_the_schema_and_validates_names(admin_client: Client) -> None:
    row = ExposedTool.objects.get(key="library.get_book")
    url = f"{CHANGELIST}{row.pk}/change/"
    page = admin_client.get(url).content.decode()
    assert '<pre class="mcp-json">' in page and "&quot;book_id&quot;" in page and "additionalProperties" in page
    token = csrf_token(admin_client, url)
    clash = admin_client.post(url, {"enabled": "on", "wire_name": "LIBRARY.ECHO", "csrfmiddlewaretoken": token})
    assert clash.status_code == 200 and "already served under this name" in clash.content.decode()
    bad = admin_client.post(url, {"enabled": "on", "wire_name": "has space", "csrfmiddlewaretoken": token})
    assert "only letters, digits" in bad.content.decode()
    from oauth2_provider.models import Application

    favoured = Application.objects.create(
        name="Favoured",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris="http://127.0.0.1/cb",
    )
    assert 'name="allowed_clients"' in page
    ok = admin_client.post(
        url,
        {
            "enabled": "on",
            "wire_name": "book",
            "extra_scopes": "staff",
            "allowed_clients": [favoured.pk],
            "confirmation_channel": "client",
            "csrfmiddlewaretoken": token,
        },
    )
    assert ok.status_code == 302
    entry = provider.get_sync().get("book")
    assert entry is not None and entry.scopes == {"library:read", "staff"}
    assert entry.allowed_clients == {favoured.client_id}


def change_confirmation(admin_client: Client, key: str, channel: str) -> str:
    """Save a tool's confirmation channel through its change form; return the changelist's confirmation cell."""
    url = f"{CHANGELIST}{ExposedTool.objects.get(key=key).pk}/change/"
    token = csrf_token(admin_client, url)
    saved = admin_client.post(url, {"enabled": "on", "confirmation_channel": channel, "csrfmiddlewaretoken": token})
    assert saved.status_code == 302, saved.content.decode()
    listing = admin_client.get(CHANGELIST, {"q": key}).content.decode()
    return re.search(r'<td class="field-confirmation_display">([^<]*)</td>', listing).group(1)


def test_the_admin_moves_confirmation_to_the_approval_page_but_never_back(
    admin_client: Client, restore_global_registry: Any
) -> None:
    from mcp_expose.catalog.sync import sync_exposures

    def wipe(shelf: str) -> str:
        """Clear a shelf (a person must approve it on the site)."""
        return shelf

    mcp_expose.tool(key="library.wipe", requires_confirmation="approval_page")(wipe)
    sync_exposures()
    entry = provider.get_sync().get("library.echo")
    assert (entry.requires_confirmation, entry.confirmation_channel) == (False, "client")

    assert change_confirmation(admin_client, "library.echo", "approval_page") == "on the approval page"
    entry = provider.get_sync().get("library.echo")
    assert (entry.requires_confirmation, entry.confirmation_channel) == (True, "approval_page")

    assert change_confirmation(admin_client, "library.wipe", "client") == "on the approval page"
    entry = provider.get_sync().get("library.wipe")
    assert (entry.requires_confirmation, entry.confirmation_channel) == (True, "approval_page")
    page = admin_client.get(f"{CHANGELIST}{ExposedTool.objects.get(key='library.wipe').pk}/change/").content.decode()
    assert 'name="confirmation_channel"' in page and "on the approval page" in page  # as declared in code

    assert change_confirmation(admin_client, "library.echo", "client") == "—"
    assert provider.get_sync().get("library.echo").confirmation_channel == "client"


def test_rows_cannot_be_added_by_hand(admin_client: Client) -> None:
    assert admin_client.get(f"{CHANGELIST}add/").status_code == 403


def test_api_key_secret_is_shown_once(admin_client: Client) -> None:
    url = "/admin/mcp_expose/apikey/add/"
    token = csrf_token(admin_client, url)
    User.objects.create_user("reader", password="pw")
    form = admin_client.get(url).content.decode()
    assert 'name="user" value="boss"' in form  # a username box, filled with the signed-in superuser
    unknown = admin_client.post(
        url, {"name": "ci", "user": "nobody", "scopes": "library:read", "csrfmiddlewaretoken": token}
    )
    assert unknown.status_code == 200 and "No user has the username &#x27;nobody&#x27;." in unknown.content.decode()
    assert not ApiKey.objects.filter(name="ci").exists()
    response = admin_client.post(
        url, {"name": "ci", "user": "reader", "scopes": "library:read", "csrfmiddlewaretoken": token}
    )
    page = response.content.decode()
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    secret = re.search(r'id="mcp-api-key-secret" [^>]*value="(mcpx_[^"]+)"', page).group(1)
    # The whole key once more, in the header clients send: the form they paste.
    assert f'value="Authorization: Bearer {secret}"' in page
    key = ApiKey.objects.get(name="ci")
    assert key.matches(secret) and key.user.username == "reader"
    change_page = admin_client.get(f"/admin/mcp_expose/apikey/{key.pk}/change/").content.decode()
    assert secret not in change_page and key.prefix in change_page


def test_api_key_scopes_are_validated(admin_client: Client) -> None:
    url = "/admin/mcp_expose/apikey/add/"
    token = csrf_token(admin_client, url)
    user = User.objects.get(username="boss")
    response = admin_client.post(
        url, {"name": "x", "user": user.username, "scopes": 'bad"scope', "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 200 and "not a valid scope" in response.content.decode()
    assert not ApiKey.objects.filter(name="x").exists()


def test_revoke_action(admin_client: Client) -> None:
    key, secret = ApiKey.create_key(user=User.objects.get(username="boss"), name="old")
    changelist = "/admin/mcp_expose/apikey/"
    token = csrf_token(admin_client, changelist)
    admin_client.post(
        changelist, {"action": "revoke_selected", "_selected_action": [key.pk], "csrfmiddlewaretoken": token}
    )
    key.refresh_from_db()
    assert key.revoked_at is not None and not key.is_usable


def test_the_change_page_says_in_words_whether_the_code_declares_the_capability(admin_client: Client) -> None:
    row = ExposedTool.objects.get(key="library.echo")
    page = admin_client.get(f"{CHANGELIST}{row.pk}/change/").content.decode()
    assert "Yes: the code declares this capability." in page
    ExposedTool.objects.filter(pk=row.pk).update(stale=True)
    page = admin_client.get(f"{CHANGELIST}{row.pk}/change/").content.decode()
    assert "No: the code no longer declares it." in page and "never served" in page


def test_staff_without_permission_cannot_change_rows() -> None:
    User.objects.create_user("clerk", password="pw", is_staff=True)
    client = Client()
    client.login(username="clerk", password="pw")
    assert client.get(CHANGELIST).status_code == 403


def test_staff_create_api_keys_only_for_themselves() -> None:
    from django.contrib.auth.models import Permission

    boss = User.objects.create_superuser("root", "root@example.com", "pw")
    clerk = User.objects.create_user("clerk", password="pw", is_staff=True)
    clerk.user_permissions.add(*Permission.objects.filter(codename__in=["add_apikey", "view_apikey", "change_apikey"]))
    ApiKey.create_key(user=boss, name="boss key")
    client = Client(enforce_csrf_checks=True)
    client.login(username="clerk", password="pw")
    url = "/admin/mcp_expose/apikey/add/"
    page = client.get(url).content.decode()
    assert 'name="user"' not in page
    client.post(url, {"name": "mine", "user": boss.pk, "scopes": "mcp", "csrfmiddlewaretoken": csrf_token(client, url)})
    assert ApiKey.objects.get(name="mine").user == clerk
    listing = client.get("/admin/mcp_expose/apikey/").content.decode()
    assert "mine" in listing and "boss key" not in listing
