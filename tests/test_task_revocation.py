"""A task stops when the credential that started it is revoked: before its run starts, and at the next heartbeat
while it runs. For each authenticator: an API key, a django-oauth-toolkit token and DRF's `Token` (a caller that a
project's DRF class accepted), with real rows, and the worker's run (`serving/task_worker.run`) in this process."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import anyio
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application
from rest_framework.authtoken.models import Token

import mcp_expose
from mcp_expose.access.authenticators import authenticate_api_key
from mcp_expose.calls.dispatch import CallRequest
from mcp_expose.catalog.compiled import provider
from mcp_expose.core.conf import changed_settings
from mcp_expose.core.endpoints import DEFAULT_ENDPOINT, endpoint_named
from mcp_expose.core.principal import Principal, principal_for_user
from mcp_expose.declare.registry import CapabilityRegistry
from mcp_expose.models import ApiKey, ToolTask
from mcp_expose.serving import task_worker
from mcp_expose.serving.tasks import start_task

pytestmark = pytest.mark.anyio

KEY = "toolbox_tasks.wait_for_cancel"
REVOKED_MESSAGE = "The credential that started this task is no longer valid."
# Every wait below ends on its event; this only stops a hang (a run the heartbeat never stops).
HANG_GUARD_SECONDS = 120.0
CREDENTIALS = ["api_key", "oauth", "drf_token"]


class Runs:
    """What the tool saw: each run's start, as an event the test waits on."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.count = 0


@pytest.fixture
def runs(restore_global_registry: CapabilityRegistry, settings: Any) -> Iterator[Runs]:
    seen = Runs()

    async def wait_for_cancel() -> str:
        """Runs until its task is stopped."""
        seen.count += 1
        seen.started.set()
        await anyio.sleep_forever()
        return "never"

    mcp_expose.tool(registry=restore_global_registry, key=KEY, task="optional")(wait_for_cancel)
    settings.MCP_EXPOSE = changed_settings(settings.MCP_EXPOSE, TASK_HEARTBEAT=0.05)
    provider.invalidate()
    yield seen
    provider.invalidate()


def caller(kind: str) -> tuple[Principal, Callable[[], None]]:
    """A caller accepted with a credential of `kind`, as its authenticator makes it, and how to revoke it."""
    user = User.objects.create_user(f"ada-{kind}", password="pw")
    if kind == "api_key":
        key, secret = ApiKey.create_key(user=user, name="k", scopes="mcp")
        principal = authenticate_api_key(secret, record_use=False)
        assert isinstance(principal, Principal)
        return principal, lambda: ApiKey.objects.get(pk=key.pk).revoke()
    if kind == "oauth":
        app = Application.objects.create(
            name="app", client_id="app-1", client_type="public", authorization_grant_type="authorization-code"
        )
        token = AccessToken.objects.create(
            user=user, application=app, token="t-1", scope="mcp", expires=timezone.now() + timedelta(hours=1)
        )
        principal = principal_for_user(user, frozenset({"mcp"}), "oauth", client_id="app-1", credential=token)
        return principal, lambda: AccessToken.objects.get(pk=token.pk).revoke()
    drf_token = Token.objects.create(user=user)
    # What DrfAuthenticator makes of TokenAuthentication's (user, token).
    principal = principal_for_user(
        user, frozenset({"mcp"}), "drf", credential=drf_token, authenticator="TokenAuthentication"
    )
    return principal, lambda: Token.objects.filter(user=user).delete()


async def queued(principal: Principal) -> str:
    """A task of the tool, made as a call makes it (queued on the Tasks backend, which runs nothing here)."""

    def entry() -> Any:
        endpoint = endpoint_named(DEFAULT_ENDPOINT)
        assert endpoint is not None
        return next(entry for entry in provider.get_sync().for_endpoint(endpoint).tools if entry.key == KEY)

    view = await start_task(await sync_to_async(entry)(), principal, {}, CallRequest())
    return view.task_id


async def settled(task_id: str) -> ToolTask:
    return await ToolTask.objects.aget(id=task_id)


def assert_failed_as_revoked(row: ToolTask, secrets: list[str]) -> None:
    assert (row.status, row.status_message) == ("failed", REVOKED_MESSAGE)
    assert row.error["message"] == REVOKED_MESSAGE
    assert not any(secret in str(row.error) + row.status_message for secret in secrets)


def secrets_of(principal: Principal) -> list[str]:
    credential = principal.credential
    return [str(value) for value in (getattr(credential, "token", None), getattr(credential, "key", None)) if value]


@pytest.mark.parametrize("kind", CREDENTIALS)
async def test_a_credential_revoked_before_the_run_starts_runs_nothing(
    transactional_db: None, runs: Runs, kind: str
) -> None:
    principal, revoke = await sync_to_async(caller)(kind)
    task_id = await queued(principal)
    await sync_to_async(revoke)()
    with anyio.fail_after(HANG_GUARD_SECONDS):
        await task_worker.run(task_id)
    assert runs.count == 0
    assert_failed_as_revoked(await settled(task_id), secrets_of(principal))


@pytest.mark.parametrize("kind", CREDENTIALS)
async def test_a_credential_revoked_while_the_task_runs_stops_it_at_the_next_heartbeat(
    transactional_db: None, runs: Runs, kind: str
) -> None:
    principal, revoke = await sync_to_async(caller)(kind)
    task_id = await queued(principal)
    with anyio.fail_after(HANG_GUARD_SECONDS):
        async with anyio.create_task_group() as group:
            group.start_soon(task_worker.run, task_id)
            await anyio.to_thread.run_sync(runs.started.wait, abandon_on_cancel=True)
            assert (await settled(task_id)).status == "working"
            await sync_to_async(revoke)()
    assert runs.count == 1
    assert_failed_as_revoked(await settled(task_id), secrets_of(principal))


async def test_a_task_whose_credential_stands_keeps_running_through_its_heartbeats(
    transactional_db: None, runs: Runs
) -> None:
    """The other side: beats that find the DRF Token still there change nothing; cancelling is what stops it."""
    from mcp_expose.calls import tasks

    principal, _revoke = await sync_to_async(caller)("drf_token")
    task_id = await queued(principal)
    row = await settled(task_id)
    assert row.call["credential_row"]["model"] == "authtoken.token"
    assert principal.credential.key not in str(row.call)  # a digest of the key, never the key
    with anyio.fail_after(HANG_GUARD_SECONDS):
        async with anyio.create_task_group() as group:
            group.start_soon(task_worker.run, task_id)
            await anyio.to_thread.run_sync(runs.started.wait, abandon_on_cancel=True)
            assert await sync_to_async(task_worker._beat)(task_id, "half way") == task_worker.ALIVE
            assert (await settled(task_id)).status_message == "half way"
            await sync_to_async(tasks.cancel)(row)
    assert (await settled(task_id)).status == "cancelled"
