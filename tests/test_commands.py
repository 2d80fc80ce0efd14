"""The management commands: mcp_sync, mcp_tools and mcp_call in this process, through `call_command`.

`manage.py demo` runs as a real process on a data directory of its own: the command itself is the subject (it
migrates, seeds, writes the key files, and reads no terminal when it has none).
"""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from mcp_expose.models import ExposedTool

from .live import manage

pytestmark = pytest.mark.django_db(transaction=True)


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


@pytest.fixture
def reader() -> User:
    return User.objects.create_user("reader", password="pw")


def test_mcp_sync_creates_marks_stale_and_revives() -> None:
    ExposedTool.objects.filter(key="library.echo").delete()
    ExposedTool.objects.create(key="retired.tool")
    ExposedTool.objects.filter(key="library.get_book").update(stale=True, enabled=False)
    output = run("mcp_sync")
    assert "created  library.echo" in output
    assert "stale    retired.tool" in output
    assert "revived  library.get_book" in output
    assert ExposedTool.objects.get(key="retired.tool").stale
    # The administrator's decision survives the revival.
    assert not ExposedTool.objects.get(key="library.get_book").enabled
    assert run("mcp_sync").strip() == "Exposure rows are up to date."


def test_mcp_tools_lists_what_a_user_sees(reader: User) -> None:
    everything = run("mcp_tools")
    assert "library.overdue_loans" in everything
    as_reader = run("mcp_tools", "--user", "reader")
    assert "library.search_books" in as_reader and "library.overdue_loans" not in as_reader
    narrow = json.loads(run("mcp_tools", "--user", "reader", "--scopes", "nothing", "--json"))
    assert [tool["name"] for tool in narrow["tools"]] == ["library.echo", "library.whoami"]
    assert narrow["tools"][0]["inputSchema"]["additionalProperties"] is False


def test_mcp_call_runs_through_the_dispatcher(reader: User) -> None:
    output = json.loads(run("mcp_call", "library.echo", '{"message": "hi"}', "--user", "reader"))
    assert output == {"caller": "reader", "message": "hi"}
    whoami = json.loads(run("mcp_call", "library.whoami", "{}", "--user", "reader"))
    assert whoami["credential"] == "command" and whoami["request_auth"] is None


def test_mcp_call_prints_the_content_of_a_result_without_structured_content(reader: User) -> None:
    from project.library.models import Author, Book

    book = Book.objects.create(title="Tehanu", author=Author.objects.create(name="Ursula K. Le Guin"), price=9)
    lines = run("mcp_call", "library.book_card", json.dumps({"book_id": book.pk}), "--user", "reader").splitlines()
    assert lines[0] == "Tehanu by Ursula K. Le Guin"
    assert lines[1].startswith("[image: image/png, ") and lines[1].endswith(" base64 characters]")
    link = json.loads("\n".join(lines[2:]))
    assert link["type"] == "resource_link" and link["uri"] == f"library://books/{book.pk}"


def test_mcp_call_reports_errors_with_a_nonzero_exit(reader: User) -> None:
    with pytest.raises(CommandError, match="reported an error") as caught:
        call_command("mcp_call", "library.echo", '{"message": 5}', "--user", "reader", stdout=StringIO())
    assert caught.value.returncode == 1
    with pytest.raises(CommandError, match="Unknown tool: library.overdue_loans"):
        call_command("mcp_call", "library.overdue_loans", "--user", "reader", stdout=StringIO())
    with pytest.raises(CommandError, match="not valid JSON"):
        call_command("mcp_call", "library.echo", "{nope", "--user", "reader")
    with pytest.raises(CommandError, match="JSON object"):
        call_command("mcp_call", "library.echo", "[1]", "--user", "reader")
    with pytest.raises(CommandError, match="No user named 'ghost'"):
        call_command("mcp_call", "library.echo", "{}", "--user", "ghost")


def test_demo_prepares_everything_and_is_idempotent(tmp_path: Path) -> None:
    first = manage(tmp_path, "demo", "--noinput", "--no-serve").stdout
    key = (tmp_path / "demo-api-key.txt").read_text().strip()
    assert "Seeded 8 books." in first and "admin / admin" in first and key in first
    assert "http://127.0.0.1:8000/mcp" in first
    second = manage(tmp_path, "demo", "--noinput", "--no-serve", "--addrport", "0.0.0.0:9000").stdout
    assert "Seeded" not in second and "admin / admin" not in second
    assert key in second and "http://0.0.0.0:9000/mcp" in second
    # Exactly one usable demo key, the same one both times.
    count = (
        manage(
            tmp_path,
            "shell",
            "-c",
            "from mcp_expose.models import ApiKey; print(ApiKey.objects.filter(revoked_at__isnull=True).count())",
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    assert count == "1"


def test_demo_without_a_terminal_takes_the_defaults_instead_of_prompting(tmp_path: Path) -> None:
    # Standard input is a pipe at its end, as in a script or CI: no prompt can be answered.
    output = manage(tmp_path, "demo", "--no-serve", input_text="").stdout
    assert "Password for" not in output and "admin / admin" in output


def test_demo_replaces_a_key_whose_secret_file_was_lost(tmp_path: Path) -> None:
    manage(tmp_path, "demo", "--noinput", "--no-serve")
    first = (tmp_path / "demo-api-key.txt").read_text().strip()
    (tmp_path / "demo-api-key.txt").unlink()
    manage(tmp_path, "demo", "--noinput", "--no-serve")
    assert (tmp_path / "demo-api-key.txt").read_text().strip() != first
