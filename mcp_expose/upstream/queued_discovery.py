"""*Discover now*, off the admin's request: one discovery of one server, run as a Django task, its state kept on
the server's row for the pages to show.

A discovery may take a server's timeouts to fail; run in the request, it held one of the admin's sync threads for
as long. `queue` marks the row queued and enqueues `discover_upstream` on the backend MCP tasks run on
(MCP_EXPOSE['TASK_BACKEND'], found the same way), once that mark is committed. A worker of Django's Tasks
framework runs it: it records the reading as every discovery does (`snapshots.rediscover`), then leaves the row
done or failed with what it found.
Django's ImmediateBackend (the framework's default) runs it inside `queue`, in the request, as before.

Each move of the state is one conditional update on the run's id: a second click while a discovery is queued or
running queues nothing, a second delivery of a run does nothing, and a run replaced since writes nothing. A run no
worker took within TASK_QUEUE_TIMEOUT, or one still running past its bound (twice the server's timeouts, plus a
margin), reads as failed and may be queued again: no worker serves the queue, or its worker stopped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import uuid4

from django.db import router, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from mcp_expose.core.background import backend_named, task
from mcp_expose.core.conf import get_settings
from mcp_expose.core.errors import McpExposeError
from mcp_expose.models import UpstreamServer
from mcp_expose.upstream.snapshots import rediscover

logger = logging.getLogger("mcp_expose.upstream")

State = UpstreamServer.DiscoveryState
# Added to twice a server's timeouts: how long a run may be seen running (its token, its pages, the row lock).
RUNNING_MARGIN = 60.0


class NotQueued(McpExposeError):
    """No discovery was queued: the backend cannot take it (the message says why)."""


class AlreadyQueued(NotQueued):
    """No discovery was queued: one is queued or running already."""


def discover_upstream(server_pk: int, run: str) -> None:
    """Run the discovery `run` of the server `server_pk`, queued by `queue`. A run replaced since, or taken
    already, does nothing."""
    if not _move(server_pk, run, State.QUEUED, discovery_state=State.RUNNING, discovery_started_at=timezone.now()):
        return
    server = UpstreamServer.objects.filter(pk=server_pk).first()
    if server is None:
        return
    try:
        discovery, counts = rediscover(server)
    except Exception as exc:
        stopped = {"error": f"The discovery stopped: {type(exc).__name__}."}
        _move(server_pk, run, State.RUNNING, discovery_state=State.FAILED, discovery_outcome=stopped)
        raise
    if discovery.reached:
        outcome: dict[str, Any] = {"tools": len(discovery.tools), "refused": len(discovery.diagnostics), **counts}
        _move(server_pk, run, State.RUNNING, discovery_state=State.DONE, discovery_outcome=outcome)
    else:
        outcome = {"error": discovery.error}
        _move(server_pk, run, State.RUNNING, discovery_state=State.FAILED, discovery_outcome=outcome)
    logger.info("Upstream %s discovered (admin): %s", server.name, outcome)


# The Django task, by this module-level name (a worker finds it by its path). A TASKS setting the framework
# refuses must not stop the server: `queue` then says the discovery cannot be queued.
_declared: Any = None
try:
    _declared = task()(discover_upstream)
except Exception as exc:  # noqa: BLE001  (said by `queue`; logged once here)
    logger.warning("Discoveries cannot be queued: Django's Tasks framework refused the task (%s)", type(exc).__name__)
else:
    discover_upstream = _declared


def queue(server: UpstreamServer) -> UpstreamServer:
    """Queue a discovery of `server`; its row as it stands after (an immediate backend has run it already).
    Raises `AlreadyQueued` when one is queued or running, `NotQueued` when the backend cannot take it."""
    row = UpstreamServer.objects.filter(pk=server.pk).first()
    if row is None:
        raise NotQueued(_("The server no longer exists."))
    current = standing(row)
    if current.active:
        raise AlreadyQueued(_("A discovery is already %(state)s; another is not queued.") % {"state": current.label})
    alias = get_settings().TASK_BACKEND
    problem = _backend_problem(alias)
    if problem is not None:
        raise NotQueued(_("The discovery cannot be queued: %(problem)s.") % {"problem": problem})
    run = uuid4().hex
    claimed = UpstreamServer.objects.filter(
        pk=row.pk, discovery_state=row.discovery_state, discovery_task_id=row.discovery_task_id
    ).update(
        discovery_state=State.QUEUED,
        discovery_task_id=run,
        discovery_queued_at=timezone.now(),
        discovery_started_at=None,
        discovery_outcome={},
    )
    if not claimed:
        raise AlreadyQueued(_("Another discovery was queued meanwhile; this one is not."))
    using = router.db_for_write(UpstreamServer)
    if transaction.get_connection(using).in_atomic_block:
        # A worker must find the row queued: enqueued before the commit, it could take the run first, see no queued
        # row and drop it. After the commit, a refusal is on the row only (the request has answered).
        transaction.on_commit(lambda: _enqueue(row, run, alias), using=using)
    else:
        reason = _enqueue(row, run, alias)
        if reason is not None:
            raise NotQueued(reason)
    return UpstreamServer.objects.get(pk=row.pk)


def _enqueue(row: UpstreamServer, run: str, alias: str) -> str | None:
    """Enqueue the run `run` of `row` on the backend `alias`; why it could not be (also left on the row), or None."""
    try:
        _declared.using(backend=alias).enqueue(row.pk, run)
    except Exception as exc:  # noqa: BLE001  (whatever the backend raises is said, not a server error)
        reason = _("The discovery could not be queued on the Tasks backend %(alias)r: %(error)s") % {
            "alias": alias,
            "error": f"{type(exc).__name__}: {str(exc)[:300]}",
        }
        _move(row.pk, run, State.QUEUED, discovery_state=State.FAILED, discovery_outcome={"error": reason})
        return str(reason)
    logger.info("Upstream %s: discovery %s queued on the Tasks backend %r", row.name, run[:8], alias)
    return None


def _backend_problem(alias: str) -> str | None:
    """Why the backend `alias` cannot run a discovery, or None."""
    if _declared is None:
        return _("Django's Tasks framework refused the discovery task (see the server's log)")
    try:
        backend = backend_named(alias)
    except Exception as exc:  # noqa: BLE001  (any misconfiguration is said, not raised)
        return _("the Tasks backend %(alias)r is not configured (%(error)s)") % {
            "alias": alias,
            "error": f"{type(exc).__name__}: {exc}",
        }
    if type(backend).__name__ == "DummyBackend":
        return _("the Tasks backend %(alias)r is Django's DummyBackend, which never runs anything") % {"alias": alias}
    return None


def _move(server_pk: int, run: str, was: str, **fields: Any) -> bool:
    """Move the state of `run` on from `was`; False when the row holds another run, or another state."""
    return bool(
        UpstreamServer.objects.filter(pk=server_pk, discovery_task_id=run, discovery_state=was).update(**fields)
    )


@dataclass(frozen=True, slots=True)
class Standing:
    """How the last *Discover now* of a server stands, as the pages show it."""

    state: str  # "" (never asked for), queued, running, done or failed (a run past its bound reads failed)
    label: str

    @property
    def active(self) -> bool:
        return self.state in (State.QUEUED, State.RUNNING)


def standing(server: UpstreamServer, now: datetime | None = None) -> Standing:
    """The state of `server`'s last *Discover now*, in words: a run past its bound is failed, whatever its row
    says (its worker will not say so)."""
    now = now or timezone.now()
    state, outcome = server.discovery_state, server.discovery_outcome or {}
    if state == State.QUEUED:
        waited = _seconds(now, server.discovery_queued_at)
        limit = float(get_settings().TASK_QUEUE_TIMEOUT)
        if waited > limit:
            return Standing(
                State.FAILED,
                _(
                    "failed: no worker took the discovery within %(limit)s (does a worker serve the Tasks backend %(alias)r?)"
                )
                % {"limit": _duration(limit), "alias": get_settings().TASK_BACKEND},
            )
        return Standing(State.QUEUED, _("queued %(ago)s ago") % {"ago": _duration(waited)})
    if state == State.RUNNING:
        ran = _seconds(now, server.discovery_started_at)
        if ran > running_bound(server):
            return Standing(State.FAILED, _("failed: the discovery did not finish (its worker may have stopped)"))
        return Standing(State.RUNNING, _("running (started %(ago)s ago)") % {"ago": _duration(ran)})
    if state == State.DONE:
        return Standing(State.DONE, _("done: %(summary)s") % {"summary": summary(outcome)})
    if state == State.FAILED:
        return Standing(State.FAILED, _("failed: %(error)s") % {"error": outcome.get("error") or _("no reason given")})
    return Standing("", "")


def running_bound(server: UpstreamServer) -> float:
    """Seconds past which a running discovery of `server` is taken for dead: its own budget is its connect
    timeout plus two call timeouts (`discovery.discover`), so twice both, plus a margin, is never reached alive."""
    return 2 * (server.connect_timeout + server.call_timeout) + RUNNING_MARGIN


def summary(outcome: dict[str, Any]) -> str:
    """What a discovery that reached its server read, in one sentence."""
    counts = {key: int(outcome.get(key) or 0) for key in ("tools", "new", "changed", "withdrawn", "refused")}
    return (
        _("%(tools)d tools read (%(new)d new, %(changed)d changed, %(withdrawn)d withdrawn), %(refused)d refused.")
        % counts
    )


def _seconds(now: datetime, then: datetime | None) -> float:
    """Seconds from `then` to `now`; a missing time is taken as long past."""
    return float("inf") if then is None else max(0.0, (now - then).total_seconds())


def _duration(seconds: float) -> str:
    if seconds < 60:
        return _("%(count)d s") % {"count": seconds}
    if seconds < 3600:
        return _("%(count)d min") % {"count": seconds // 60}
    return _("%(count)d h") % {"count": seconds // 3600}
