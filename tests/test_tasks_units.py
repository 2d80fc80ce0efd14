"""MCP tasks below the wire: declaring them, the admin's narrowing, the rows' state machine, the admin's list and
cancel action, pruning, and the checks. The whole flow, over HTTP with a worker, is in test_tasks.py."""

from __future__ import annotations

import re
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.test import Client, override_settings
from django.utils import timezone

import mcp_expose
from mcp_expose.calls import tasks
from mcp_expose.catalog.compiled import compile_catalog
from mcp_expose.checks import check_settings
from mcp_expose.core.conf import changed_settings
from mcp_expose.core.errors import DeclarationError
from mcp_expose.core.principal import anonymous_principal, principal_for_user
from mcp_expose.declare.exposure_state import ExposureState
from mcp_expose.declare.registry import CapabilityRegistry
from mcp_expose.models import ToolTask
from mcp_expose.serving.task_wire import created_result, detailed_task

NAME_QUESTION = {"method": "elicitation/create", "params": {"message": "Name?"}}


def declare(registry: CapabilityRegistry, key: str, **options: Any) -> None:
    def func() -> None:
        """Declared doc."""

    func.__name__ = key.rsplit(".", 1)[-1]
    mcp_expose.tool(registry=registry, key=key, **options)(func)


def test_a_tool_declares_whether_it_may_or_must_run_as_a_task(registry: CapabilityRegistry) -> None:
    declare(registry, "app.maybe", task="optional")
    declare(registry, "app.always", task="required", task_starts_in_call=True)
    declare(registry, "app.never")
    catalog = compile_catalog(registry, {})
    assert [catalog.get(name).task_support for name in ("app.maybe", "app.always", "app.never")] == [
        "optional",
        "required",
        None,
    ]
    assert catalog.get("app.always").capability.task_starts_in_call is True
    with pytest.raises(DeclarationError, match="task= takes 'optional', 'required' or None"):
        declare(registry, "app.bad", task="sometimes")
    with pytest.raises(DeclarationError, match="task_starts_in_call=True needs task="):
        declare(registry, "app.half", task_starts_in_call=True)


def test_the_admin_narrows_tasks_off_and_a_tool_that_requires_one_is_then_not_served(
    registry: CapabilityRegistry,
) -> None:
    declare(registry, "app.maybe", task="optional")
    declare(registry, "app.always", task="required")
    rows = {key: ExposureState(key=key, tasks_allowed=False) for key in ("app.maybe", "app.always")}
    catalog = compile_catalog(registry, rows)
    assert catalog.get("app.maybe").task_support is None
    assert catalog.get("app.always") is None
    assert any("app.always: requires a task" in problem for problem in catalog.problems)


def test_model_tools_take_tasks_per_action(registry: CapabilityRegistry) -> None:
    from project.library.models import Book

    mcp_expose.ModelTools(Book, actions=["list", "get"], tasks={"list": "optional"}, registry=registry)
    catalog = compile_catalog(registry, {})
    assert catalog.get("library.books.list").task_support == "optional"
    assert catalog.get("library.books.get").task_support is None
    with pytest.raises(DeclarationError, match="tasks= names actions not declared"):
        mcp_expose.ModelTools(Book, actions=["list"], tasks={"delete": "required"}, registry=CapabilityRegistry())


def test_view_backed_tools_take_task_for_every_action_or_per_action(registry: CapabilityRegistry) -> None:
    from project.library import api

    mcp_expose.expose_view(api.BookViewSet, actions=["list", "retrieve"], task="optional", registry=registry)
    mcp_expose.expose_view(api.LoanViewSet, actions=["list", "retrieve"], task={"list": "required"}, registry=registry)
    supports = {capability.key: capability.task_support for capability in registry}
    assert supports == {
        "library.books.list": "optional",
        "library.books.retrieve": "optional",
        "library.loans.list": "required",
        "library.loans.retrieve": None,
    }


@pytest.fixture
def owner(db: None) -> Any:
    user = User.objects.create_user("owner", password="pw")
    return principal_for_user(user, frozenset({"mcp"}), "oauth", client_id="app-1")


def _made(principal: Any, queued: list[str], tool: str = "app.job") -> tasks.TaskView:
    return tasks.create(tool, tool, principal, {"arguments": {}, "state": None, "responses": {}}, queued.append)


def test_a_task_is_made_queued_and_followed_only_by_its_own_caller(owner: Any) -> None:
    queued: list[str] = []
    view = _made(owner, queued)
    assert queued == [view.task_id] and view.status == "working" and len(view.task_id) >= 32
    assert tasks.find(view.task_id, owner).id == view.task_id
    same_user_other_client = principal_for_user(owner.user, owner.scopes, "oauth", client_id="app-2")
    for stranger in (same_user_other_client, principal_for_user(User.objects.create_user("eve"), frozenset(), "oauth")):
        assert tasks.find(view.task_id, stranger) is None
    assert tasks.find("x" * 65, owner) is None and tasks.find("", owner) is None
    wire = created_result(view)
    assert wire["resultType"] == "task" and wire["taskId"] == view.task_id and wire["ttlMs"] == 3600 * 1000
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", wire["createdAt"])
    assert not {"result", "error", "inputRequests", "ttl", "pollInterval", "requestState"} & set(wire)


def test_a_queue_that_refuses_the_task_leaves_no_row(owner: Any) -> None:
    def refuse(task_id: str) -> None:
        raise ConnectionError("broker down")

    with pytest.raises(tasks.TaskRefused) as refused:
        tasks.create("app.job", "app.job", owner, {}, refuse)
    assert refused.value.code == "unavailable" and not ToolTask.objects.exists()


@override_settings(MCP_EXPOSE={"MAX_ACTIVE_TASKS_PER_CALLER": 2})
def test_a_caller_has_at_most_so_many_active_tasks(owner: Any) -> None:
    queued: list[str] = []
    first = _made(owner, queued)
    _made(owner, queued)
    with pytest.raises(tasks.TaskRefused) as refused:
        _made(owner, queued)
    assert refused.value.code == "rate_limited"
    tasks.cancel(ToolTask.objects.get(id=first.task_id))
    _made(owner, queued)  # a cancelled one no longer counts


def test_one_run_at_a_time_and_nothing_after_a_cancellation(owner: Any) -> None:
    queued: list[str] = []
    view = _made(owner, queued)
    assert tasks.claim(view.task_id) is not None
    assert tasks.claim(view.task_id) is None  # a second delivery of the same job runs nothing
    assert tasks.beat(view.task_id, "half way") is True
    assert ToolTask.objects.get(id=view.task_id).status_message == "half way"
    assert tasks.cancel(ToolTask.objects.get(id=view.task_id)) is True
    assert tasks.beat(view.task_id, None) is False  # the run stops at its next beat
    assert tasks.complete(view.task_id, {"content": []}) is False  # and what it finished is not kept
    assert tasks.cancel(ToolTask.objects.get(id=view.task_id)) is False  # idempotent
    row = ToolTask.objects.get(id=view.task_id)
    assert row.status == "cancelled" and row.result is None and row.call == {}


def test_questions_park_the_task_and_answers_resume_it_when_all_are_in(owner: Any) -> None:
    queued: list[str] = []
    view = _made(owner, queued)
    tasks.claim(view.task_id)
    assert tasks.park(view.task_id, {"a": NAME_QUESTION, "b": NAME_QUESTION}, '{"asked":{}}')
    row = ToolTask.objects.get(id=view.task_id)
    assert detailed_task(tasks.TaskView.of(row))["inputRequests"] == {"a": NAME_QUESTION, "b": NAME_QUESTION}
    tasks.answer(row, {"a": {"action": "accept"}, "b": 12345, "unknown": {"action": "accept"}}, queued.append)
    row.refresh_from_db()  # an answer that is not an object is no answer: b is still pending
    assert row.status == "input_required" and list(row.input_requests) == ["b"]
    assert row.call["responses"] == {"a": {"action": "accept"}} and queued == [view.task_id]
    tasks.answer(row, {"b": {"action": "decline"}}, queued.append)
    row.refresh_from_db()
    assert (row.status, row.run, row.input_requests) == ("working", "queued", None)
    assert queued == [view.task_id, view.task_id]
    assert set(row.call["responses"]) == {"a", "b"}


def test_a_running_task_whose_worker_stopped_beating_fails(owner: Any) -> None:
    queued: list[str] = []
    view = _made(owner, queued)
    tasks.claim(view.task_id)
    ToolTask.objects.filter(id=view.task_id).update(heartbeat_at=timezone.now() - timedelta(seconds=31))
    found = tasks.find(view.task_id, owner)
    assert found.status == "failed" and found.error == tasks.DEAD_WORKER_ERROR
    wire = detailed_task(tasks.TaskView.of(found))
    assert wire["error"]["code"] == -32603 and "result" not in wire


def test_prune_deletes_expired_tasks_and_fails_those_of_dead_workers(owner: Any) -> None:
    queued: list[str] = []
    old, dead, fresh = (_made(owner, queued) for _ in range(3))
    ToolTask.objects.filter(id=old.task_id).update(expires_at=timezone.now() - timedelta(seconds=1))
    tasks.claim(dead.task_id)
    ToolTask.objects.filter(id=dead.task_id).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    out = StringIO()
    call_command("mcp_prune_usage", stdout=out)
    assert "Deleted 1 expired tasks; 1 tasks no worker will finish marked failed." in out.getvalue()
    assert not ToolTask.objects.filter(id=old.task_id).exists()
    assert ToolTask.objects.get(id=dead.task_id).status == "failed"
    assert ToolTask.objects.get(id=fresh.task_id).status == "working"
    assert tasks.find(old.task_id, owner) is None


@pytest.mark.django_db(transaction=True)
def test_the_admin_lists_tasks_and_cancels_them_with_the_permission_and_csrf(owner: Any) -> None:
    queued: list[str] = []
    view = _made(owner, queued, tool="library.shelf_report")
    staff = User.objects.create_user("staff", password="pw", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_tooltask"))
    client = Client(enforce_csrf_checks=True)
    assert client.login(username="staff", password="pw")
    page = client.get("/admin/mcp_expose/tooltask/").content.decode()
    assert "library.shelf_report" in page and "working" in page
    assert "Cancel selected tasks" not in page  # no cancel permission: no action
    staff.user_permissions.add(Permission.objects.get(codename="cancel_tooltask"))
    page = client.get("/admin/mcp_expose/tooltask/").content.decode()
    assert "Cancel selected tasks" in page
    detail = client.get(f"/admin/mcp_expose/tooltask/{view.task_id}/change/").content.decode()
    assert "arguments" not in detail  # what the call carried stays with the server
    form = {"action": "cancel_selected", "_selected_action": [view.task_id]}
    assert client.post("/admin/mcp_expose/tooltask/", form).status_code == 403  # no CSRF token
    assert ToolTask.objects.get(id=view.task_id).status == "working"
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    assert client.post("/admin/mcp_expose/tooltask/", {**form, "csrfmiddlewaretoken": token}).status_code == 302
    assert ToolTask.objects.get(id=view.task_id).status == "cancelled"
    summary = client.get("/admin/mcp_expose/toolcall/summary/")
    assert summary.status_code == 403  # the usage dashboard needs its own view permission
    staff.user_permissions.add(Permission.objects.get(codename="view_toolcall"))
    summary_page = client.get("/admin/mcp_expose/toolcall/summary/").content.decode()
    assert "Tasks started: 0 working, 0 waiting for input, 0 completed, 0 failed, 1 cancelled" in summary_page


@pytest.mark.parametrize(
    ("settings_", "check_id", "text"),
    [
        ({"TASK_LEASE": 1, "TASK_HEARTBEAT": 1}, "mcp_expose.E018", "under three heartbeats"),
        ({"TASK_TTL": 0}, "mcp_expose.E018", "TASK_TTL"),
        ({"TASK_BACKEND": "nowhere"}, "mcp_expose.W015", "'nowhere' is not configured"),
    ],
)
def test_the_checks_name_task_settings_that_cannot_work(settings_: dict[str, Any], check_id: str, text: str) -> None:
    with override_settings(MCP_EXPOSE=changed_settings(**settings_)):
        found = [message for message in check_settings() if message.id == check_id]
    assert len(found) == 1 and text in found[0].msg
    assert not [message for message in check_settings() if message.id in ("mcp_expose.E018", "mcp_expose.W015")]


@pytest.mark.django_db(transaction=True)
def test_mcp_call_says_a_tool_runs_only_as_a_task(restore_global_registry: CapabilityRegistry) -> None:
    from django.core.management.base import CommandError

    from mcp_expose.catalog.compiled import provider

    User.objects.create_user("ada", password="pw")
    declare(restore_global_registry, "library.only_as_task", task="required", read_only=True)
    provider.invalidate()
    try:
        with pytest.raises(CommandError, match="runs only as an MCP task"):
            call_command("mcp_call", "library.only_as_task", "{}", "--user", "ada", stdout=StringIO())
    finally:
        provider.invalidate()


def test_the_extension_is_advertised_unless_tasks_are_off() -> None:
    from mcp_expose.serving.server import build_server

    assert "io.modelcontextprotocol/tasks" in build_server().extensions
    with override_settings(MCP_EXPOSE={"TASKS": False}):
        server = build_server()
    assert "io.modelcontextprotocol/tasks" not in server.extensions and server.get_request_handler("tasks/get") is None


def test_a_run_no_worker_takes_in_time_fails_instead_of_working_forever(owner: Any) -> None:
    queued: list[str] = []
    view = _made(owner, queued)
    assert tasks.find(view.task_id, owner).status == "working"
    ToolTask.objects.filter(id=view.task_id).update(updated_at=timezone.now() - timedelta(seconds=601))
    found = tasks.find(view.task_id, owner)
    assert found.status == "failed" and found.error == tasks.UNCLAIMED_ERROR and found.call == {}


def test_the_worker_runs_as_the_credential_as_it_stands_now(db: None) -> None:
    """An API key narrowed since runs with less; a revoked one, or an OAuth grant revoked, runs nothing; a
    refreshed OAuth token carries the grant on."""
    from oauth2_provider.models import AccessToken, Application

    from mcp_expose.models import ApiKey
    from mcp_expose.serving.task_worker import _principal_of

    user = User.objects.create_user("ada", password="pw")
    key, _secret = ApiKey.create_key(user=user, name="k", scopes="mcp library:read library:write")
    queued: list[str] = []
    from_key = principal_for_user(
        user, frozenset({"mcp", "library:read", "library:write"}), "api_key", api_key_id=key.pk
    )
    row = ToolTask.objects.get(id=_made(from_key, queued).task_id)
    assert _principal_of(row).scopes == {"mcp", "library:read", "library:write"}
    key.scopes = "mcp library:read"
    key.save()
    assert _principal_of(row).scopes == {"mcp", "library:read"}
    key.revoke()
    assert _principal_of(row) is None

    app = Application.objects.create(
        name="app", client_id="app-1", client_type="public", authorization_grant_type="authorization-code", user=user
    )
    first = AccessToken.objects.create(
        user=user, application=app, token="t1", scope="mcp library:read", expires=timezone.now() + timedelta(hours=1)
    )
    from_token = principal_for_user(
        user, frozenset({"mcp", "library:read"}), "oauth", client_id="app-1", credential=first
    )
    row = ToolTask.objects.get(id=_made(from_token, queued).task_id)
    assert row.access_token_id == first.pk and _principal_of(row).credential == first
    refreshed = AccessToken.objects.create(
        user=user, application=app, token="t2", scope="mcp", expires=timezone.now() + timedelta(hours=1)
    )
    first.delete()  # DOT deletes the old access token when the client refreshes, as when it is revoked
    again = _principal_of(row)
    assert again.credential == refreshed and again.scopes == {"mcp"}  # no more than the live grant
    refreshed.delete()
    assert _principal_of(row) is None
    with override_settings(MCP_EXPOSE={"ALLOW_ANONYMOUS": False}):
        anonymous = ToolTask.objects.get(id=_made(anonymous_principal(), queued).task_id)
        assert _principal_of(anonymous) is None


def test_a_task_of_a_project_authenticator_runs_for_its_user_while_active(db: None) -> None:
    """A DRF class's credential cannot be asked again from a worker: the run acts for the same user, with the
    call's scopes, until the user is deactivated; and only the same authenticator's caller follows it."""
    from mcp_expose.serving.task_worker import _principal_of

    user = User.objects.create_user("ada", password="pw")
    queued: list[str] = []
    caller = principal_for_user(user, frozenset({"mcp"}), "drf", authenticator="JWTAuthentication")
    # What serving/tasks.start_task writes into the call for such a caller.
    call = {"arguments": {}, "state": None, "responses": {}, "authenticator": caller.authenticator}
    row = ToolTask.objects.get(id=tasks.create("app.job", "app.job", caller, call, queued.append).task_id)
    assert row.owner == f"drf:JWTAuthentication:{user.pk}"
    again = _principal_of(row)
    assert again is not None and (again.method, again.authenticator, again.scopes) == (
        "drf",
        "JWTAuthentication",
        {"mcp"},
    )
    other = principal_for_user(user, frozenset({"mcp"}), "drf", authenticator="PartnerAuthentication")
    assert tasks.owner_key(other) != row.owner
    user.is_active = False
    user.save()
    row.refresh_from_db()
    assert _principal_of(row) is None


def test_a_task_belongs_to_the_endpoint_it_was_made_at(owner: Any) -> None:
    queued: list[str] = []
    call = {"arguments": {}, "state": None, "responses": {}, "endpoint": "public"}
    view = tasks.create("app.job", "app.job", owner, call, queued.append)
    assert tasks.find(view.task_id, owner, "public").id == view.task_id
    # The same caller at another endpoint does not see it, nor resume or cancel it there.
    assert tasks.find(view.task_id, owner) is None and tasks.find(view.task_id, owner, "ops") is None


def test_a_refreshed_token_carries_a_task_on_only_for_the_same_resource(db: None) -> None:
    from oauth2_provider.models import AccessToken, Application

    from mcp_expose.serving.task_worker import _live_grant

    user = User.objects.create_user("ada", password="pw")
    app = Application.objects.create(
        name="app", client_id="app-1", client_type="public", authorization_grant_type="authorization-code", user=user
    )
    later = timezone.now() + timedelta(hours=1)
    mcp, public = "http://testserver/mcp", "http://testserver/mcp/public"
    row = ToolTask.objects.create(
        tool_name="t",
        tool_key="t",
        owner="o",
        user=user,
        credential_method="oauth",
        client_id="app-1",
        access_token_id=None,
        scopes=["mcp"],
        call={"resource": [mcp]},
    )
    AccessToken.objects.create(user=user, application=app, token="other", scope="mcp", resource=[public], expires=later)
    assert _live_grant(row) is None  # the client's token for the other endpoint is another grant
    refreshed = AccessToken.objects.create(
        user=user,
        application=app,
        token="again",
        scope="mcp",
        resource=[mcp + "/"],
        expires=later - timedelta(minutes=1),
    )
    assert _live_grant(row) == refreshed
