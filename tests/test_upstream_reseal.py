"""`manage.py mcp_reseal_upstreams`: after a SECRET_KEY rotation, the upstream servers' sealed secrets are sealed
again under the new key, so the old one can leave SECRET_KEY_FALLBACKS; approvals and the catalog stay as they were.
"""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from mcp_expose.models import UpstreamServer, UpstreamTool
from mcp_expose.upstream.discovery import UpstreamTarget
from mcp_expose.upstream.sealing import SecretUnavailable, seal, unseal

pytestmark = pytest.mark.django_db

OLD = "old-key-" + "a" * 50
NEW = "new-key-" + "b" * 50
LOST = "lost-key-" + "c" * 50
ROTATED = override_settings(SECRET_KEY=NEW, SECRET_KEY_FALLBACKS=[OLD])
OLD_KEY_GONE = override_settings(SECRET_KEY=NEW, SECRET_KEY_FALLBACKS=[])


def sealed(fields: dict[str, str], key: str) -> dict[str, str]:
    with override_settings(SECRET_KEY=key, SECRET_KEY_FALLBACKS=[]):
        return {name: seal(value) for name, value in fields.items()}


@pytest.fixture
def servers() -> dict[str, UpstreamServer]:
    """Under the old key: one server by headers, one by client credentials whose secret names an environment
    variable and which keeps headers from before (sealed, never sent), each with an approved tool."""
    tickets = UpstreamServer.objects.create(
        name="tickets",
        url="https://tickets.example/mcp",
        authentication="headers",
        **sealed({"sealed_headers": '{"X-Api-Key": "tickets-key"}'}, OLD),
    )
    wiki = UpstreamServer.objects.create(
        name="wiki",
        url="https://wiki.example/mcp",
        authentication="client_credentials",
        oauth_token_url="https://auth.example/token",
        oauth_client_id="gateway",
        **sealed({"sealed_client_secret": "env:MCP_UPSTREAM_WIKI", "sealed_headers": '{"X-Old": "kept"}'}, OLD),
    )
    UpstreamServer.objects.create(name="open", url="https://open.example/mcp")  # nothing sealed
    for server in (tickets, wiki):
        UpstreamTool.objects.create(
            server=server,
            name="lookup",
            status=UpstreamTool.Status.APPROVED,
            approved={"name": "lookup", "description": "Look it up."},
            approved_digest="d" * 64,
        )
    return {"tickets": tickets, "wiki": wiki}


def run(*args: str) -> str:
    out = StringIO()
    call_command("mcp_reseal_upstreams", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def stored() -> dict[str, tuple[str, str, Any]]:
    return {
        name: (headers, secret, updated)
        for name, headers, secret, updated in UpstreamServer.objects.values_list(
            "name", "sealed_headers", "sealed_client_secret", "updated_at"
        )
    }


def test_resealed_secrets_open_once_the_old_key_is_gone_and_approvals_stay(
    servers: dict[str, UpstreamServer], monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    before = stored()
    with ROTATED, django_capture_on_commit_callbacks() as scheduled:
        output = run()
    assert output.splitlines() == [
        "open: nothing to reseal",
        "tickets: resealed sealed_headers",
        "wiki: resealed sealed_headers, sealed_client_secret",
        "Secrets resealed: 3.",
    ]
    after = stored()
    assert after["tickets"][0] != before["tickets"][0]
    assert after["wiki"][0] != before["wiki"][0] and after["wiki"][1] != before["wiki"][1]
    assert after["open"] == before["open"] == ("", "", before["open"][2])
    # Only the sealed columns were written: no save, so no catalog change is scheduled and updated_at stays.
    assert scheduled == []
    assert [row[2] for row in after.values()] == [row[2] for row in before.values()]
    assert set(UpstreamTool.objects.values_list("status", flat=True)) == {"approved"}
    assert UpstreamTool.objects.exclude(approved_digest="d" * 64).count() == 0

    monkeypatch.setenv("MCP_UPSTREAM_WIKI", "wiki-secret")
    with OLD_KEY_GONE:
        assert UpstreamTarget.from_row(UpstreamServer.objects.get(name="tickets")).headers == {
            "X-Api-Key": "tickets-key"
        }
        wiki = UpstreamTarget.from_row(UpstreamServer.objects.get(name="wiki"))
        assert wiki.oauth is not None and wiki.oauth.client_secret == "wiki-secret"
        assert unseal(after["wiki"][0], "the headers") == '{"X-Old": "kept"}'
        with pytest.raises(SecretUnavailable, match="no longer has"):
            unseal(before["tickets"][0], "the headers")  # what was stored before needed the old key
        # Run again: everything opens under the current key already, so nothing is written.
        assert run().splitlines()[-1] == "Secrets resealed: 0."
    assert stored() == after


def test_a_secret_no_key_opens_is_named_without_its_value_and_the_others_are_resealed(
    servers: dict[str, UpstreamServer],
) -> None:
    UpstreamServer.objects.filter(name="wiki").update(**sealed({"sealed_client_secret": "lost-secret-value"}, LOST))
    before = stored()
    out = StringIO()
    with ROTATED, pytest.raises(CommandError) as failed:
        call_command("mcp_reseal_upstreams", stdout=out, stderr=StringIO())
    output = out.getvalue()
    assert (
        "wiki: sealed_client_secret was sealed under a SECRET_KEY this deployment no longer has (neither SECRET_KEY "
        "nor SECRET_KEY_FALLBACKS opens it); enter it again." in output.splitlines()
    )
    assert "wiki: resealed sealed_headers" in output and "tickets: resealed sealed_headers" in output
    assert str(failed.value).startswith("Secrets that open under neither SECRET_KEY nor SECRET_KEY_FALLBACKS: 1.")
    assert str(failed.value).endswith("The others were resealed.")
    assert "lost-secret-value" not in output + str(failed.value)
    after = stored()
    assert after["wiki"][1] == before["wiki"][1]  # left as it was, to enter again
    with OLD_KEY_GONE:
        assert UpstreamTarget.from_row(UpstreamServer.objects.get(name="tickets")).headers == {
            "X-Api-Key": "tickets-key"
        }
        assert unseal(after["wiki"][0], "the headers") == '{"X-Old": "kept"}'


def test_a_dry_run_opens_everything_and_writes_nothing(servers: dict[str, UpstreamServer]) -> None:
    before = stored()
    with ROTATED:
        output = run("--dry-run")
    assert "tickets: would reseal sealed_headers" in output
    assert "wiki: would reseal sealed_headers, sealed_client_secret" in output
    assert output.splitlines()[-1] == "Secrets to reseal: 3. Nothing was written (--dry-run)."
    assert stored() == before
    UpstreamServer.objects.filter(name="tickets").update(**sealed({"sealed_headers": "{}"}, LOST))
    with ROTATED, pytest.raises(CommandError, match="Nothing was written."):
        run("--dry-run")
