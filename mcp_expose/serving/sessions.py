"""What a stateful 2025-11-25 session remembers, when `LEGACY_SESSIONS` is on.

The 2026-07-28 path and the default stateless legacy path keep nothing between
requests. A stateful legacy session (one process, or sticky routing) keeps, per
session id: the log level set with `logging/setLevel`, the resources subscribed
to, how to reach its standing stream (for list changes), and the recent SSE
events a reconnecting client may replay (`Last-Event-ID`). All of it is bounded
and dies with the process, or with the session: one idle past `LEGACY_SESSION_IDLE_SECONDS`
(no request in flight, no standing stream) is ended by the SDK's own idle timeout, and each
caller holds at most `MAX_LEGACY_SESSIONS_PER_CALLER` at once.
"""

from __future__ import annotations

import itertools
import logging
import weakref
from collections import OrderedDict, deque
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import JSONRPCMessage
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from mcp_expose.core import telemetry
from mcp_expose.core.conf import get_settings
from mcp_expose.core.context import LOG_LEVELS
from mcp_expose.core.errors import McpExposeError
from mcp_expose.core.principal import PRINCIPAL_SCOPE_KEY
from mcp_expose.serving.capacity import CAPACITY_REACHED, CallerKey, Refusal, Slots, caller_key

logger = logging.getLogger("mcp_expose.sessions")

MAX_SESSIONS_REMEMBERED = 10_000
MAX_SUBSCRIPTIONS_PER_SESSION = 1_000
# Seconds a list-change or resource notification may take to reach one session's stream.
SEND_TIMEOUT = 1.0

_memories: weakref.WeakSet[SessionMemory] = weakref.WeakSet()
# The caller (slot key, log label) of the request that may open a session, for `SessionManager._admit_session`.
_opening: ContextVar[tuple[CallerKey, str] | None] = ContextVar("mcp_expose.opening_session", default=None)


@dataclass(slots=True)
class SessionState:
    log_level: str = "debug"
    subscriptions: set[str] = field(default_factory=set)


class SessionMemory:
    """Per-session state, least recently used first out past `MAX_SESSIONS_REMEMBERED`."""

    def __init__(self, limit: int = MAX_SESSIONS_REMEMBERED) -> None:
        self.limit = limit
        self._states: OrderedDict[str | None, SessionState] = OrderedDict()
        # The SDK's session object of each live HTTP session, to reach its standing (GET) stream.
        self._peers: OrderedDict[str, Any] = OrderedDict()
        _memories.add(self)

    @property
    def reachable(self) -> int:
        """How many sessions would hear of a list change."""
        return len(self._peers)

    def forget(self, session_id: str) -> None:
        """The session ended (deleted, idle, crashed): nothing of it is kept."""
        self._peers.pop(session_id, None)
        self._states.pop(session_id, None)

    def saw(self, session_id: str, peer: Any) -> None:
        """A request of this session arrived: remember how to reach it later."""
        self._peers.pop(session_id, None)
        self._peers[session_id] = peer
        while len(self._peers) > self.limit:
            self._peers.popitem(last=False)

    async def announce_lists_changed(self) -> None:
        """`notifications/*/list_changed` on every remembered session's standing stream."""
        notifications = (
            types.ToolListChangedNotification(),
            types.PromptListChangedNotification(),
            types.ResourceListChangedNotification(),
        )
        await self._tell(list(self._peers), notifications)

    async def announce_resource_updated(self, uri: str) -> None:
        """`notifications/resources/updated` to the sessions subscribed to `uri`."""
        subscribed = [
            session_id
            for session_id in self._peers
            if session_id in self._states and uri in self._states[session_id].subscriptions
        ]
        params = types.ResourceUpdatedNotificationParams(uri=uri)
        await self._tell(subscribed, (types.ResourceUpdatedNotification(params=params),))

    async def _tell(self, session_ids: list[str], notifications: tuple[Any, ...]) -> None:
        """Send on each session's standing stream; a session that cannot be reached any more is forgotten."""
        for session_id in session_ids:
            peer = self._peers.get(session_id)
            if peer is None:
                continue
            try:
                # A client that does not read its stream must not hold up everyone else's news.
                with anyio.fail_after(SEND_TIMEOUT):
                    for notification in notifications:
                        await peer.send_notification(notification)
            except Exception:  # noqa: BLE001  (a closed or stuck session must not stop the others hearing it)
                logger.debug("Session %s is gone or stuck; forgetting it", session_id[:16], exc_info=True)
                self._peers.pop(session_id, None)

    def get(self, session_id: str | None) -> SessionState:
        state = self._states.pop(session_id, None) or SessionState()
        self._states[session_id] = state
        while len(self._states) > self.limit:
            self._states.popitem(last=False)
        return state

    def allows(self, session_id: str | None, level: str) -> bool:
        """Whether a message at `level` reaches this session (at or above the level it set)."""
        threshold = self._states[session_id].log_level if session_id in self._states else "debug"
        return LOG_LEVELS.index(level) >= LOG_LEVELS.index(threshold)

    def subscribe(self, session_id: str | None, uri: str) -> None:
        subscriptions = self.get(session_id).subscriptions
        if len(subscriptions) >= MAX_SUBSCRIPTIONS_PER_SESSION and uri not in subscriptions:
            raise ValueError(f"A session may subscribe to at most {MAX_SUBSCRIPTIONS_PER_SESSION} resources.")
        subscriptions.add(uri)

    def unsubscribe(self, session_id: str | None, uri: str) -> None:
        self.get(session_id).subscriptions.discard(uri)


# Every session manager of this process, for the count of open sessions.
_managers: weakref.WeakSet[SessionManager] = weakref.WeakSet()


def _open_sessions() -> list[tuple[float, dict[str, Any]]]:
    return [(float(sum(len(manager._open) for manager in list(_managers))), {})]


telemetry.observe(
    "mcp_expose.legacy.sessions",
    _open_sessions,
    unit="{session}",
    description="Open 2025-11-25 sessions in this process (LEGACY_SESSIONS).",
)


class SessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, with one event history per session, a short idle timeout and a cap per caller.

    The SDK hands every session the same event store and names streams by JSON-RPC request id, which
    every session reuses (1, 2, 3...): one shared store would replay one session's results to another
    that reconnects, or guesses an event id. So each session gets its own `RecentEvents`.

    The SDK ends a session that had no request in flight (its standing stream counts as one) for
    `session_idle_timeout`: `LEGACY_SESSION_IDLE_SECONDS` here, so that a client gone without DELETE does not
    hold its session's memory for the SDK's default half hour. A caller past `MAX_LEGACY_SESSIONS_PER_CALLER`
    gets 429 with a retryable `CAPACITY_REACHED` error instead of a new session.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        conf = get_settings()
        kwargs.setdefault("session_idle_timeout", conf.LEGACY_SESSION_IDLE_SECONDS)
        super().__init__(*args, **kwargs)
        self.slots = Slots("sessions", None, conf.MAX_LEGACY_SESSIONS_PER_CALLER)
        self._holders: dict[str, CallerKey] = {}
        self._open: set[str] = set()  # the ids of the sessions admitted and not yet discarded
        _managers.add(self)

    async def _handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        opening = None
        if not any(name == MCP_SESSION_ID_HEADER.encode("ascii") for name, _ in scope.get("headers", ())):
            opening = _caller_of(scope)
        token = _opening.set(opening)
        try:
            await super()._handle_stateful_request(scope, receive, send)
        except CallerAtCapacity as refused:
            await _refusal_response(refused.refusal)(scope, receive, send)
        finally:
            _opening.reset(token)

    def _admit_session(self, requestor: Any) -> Any:
        opening = _opening.get()
        if opening is not None:
            refusal = self.slots.take(*opening)
            if refusal is not None:
                raise CallerAtCapacity(refusal)
        if self.event_store is not None:
            self.event_store = RecentEvents()  # read by the transport created just below
        transport = super()._admit_session(requestor)
        if opening is not None:
            if transport is None:  # the SDK's limit for the whole process
                self.slots.give_back(opening[0])
            elif transport.mcp_session_id is not None:
                self._holders[transport.mcp_session_id] = opening[0]
        if transport is not None and transport.mcp_session_id is not None:
            self._open.add(transport.mcp_session_id)
        return transport

    async def _discard_session(self, session_id: str, transport: Any) -> None:
        idle = transport.idle_scope is not None and transport.idle_scope.cancel_called
        if idle and session_id in self._open:
            logger.debug(
                "Ended session %s... idle for %s s; %d open",
                session_id[:8],
                self.session_idle_timeout,
                len(self._open) - 1,
            )
        self._open.discard(session_id)
        holder = self._holders.pop(session_id, None)
        if holder is not None:
            self.slots.give_back(holder)
        for memory in list(_memories):
            memory.forget(session_id)
        await super()._discard_session(session_id, transport)


class CallerAtCapacity(McpExposeError):
    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


def _caller_of(scope: Scope) -> tuple[CallerKey, str] | None:
    """The slot key and log label of the caller our edge authenticated (None without our edge in front)."""
    principal = scope.get(PRINCIPAL_SCOPE_KEY)
    if principal is None:
        return None
    client = scope.get("client")
    return caller_key(principal, client[0] if client else None), principal.label


def _refusal_response(refusal: Refusal) -> JSONResponse:
    """429 with a JSON-RPC error body, which the SDK's client raises as that error."""
    error = {"code": CAPACITY_REACHED, "message": refusal.message, "data": refusal.error_data()}
    return JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, status_code=429)


class RecentEvents(EventStore):
    """The last `per_stream` events of each SSE stream of one session, for clients that reconnect with
    Last-Event-ID."""

    def __init__(self, per_stream: int = 50, streams: int = 50) -> None:
        self.per_stream = per_stream
        self.streams = streams
        self._counter = itertools.count(1)
        self._events: OrderedDict[StreamId, deque[tuple[int, JSONRPCMessage | None]]] = OrderedDict()
        self._stream_of: dict[int, StreamId] = {}

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        number = next(self._counter)
        events = self._events.pop(stream_id, None) or deque()
        if len(events) == self.per_stream:
            dropped, _ = events.popleft()
            self._stream_of.pop(dropped, None)
        events.append((number, message))
        self._events[stream_id] = events
        self._stream_of[number] = stream_id
        while len(self._events) > self.streams:
            _, forgotten = self._events.popitem(last=False)
            for old, _ in forgotten:
                self._stream_of.pop(old, None)
        return str(number)

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        try:
            after = int(last_event_id)
        except ValueError:
            return None
        stream_id = self._stream_of.get(after)
        if stream_id is None:
            return None
        for number, message in self._events.get(stream_id, ()):
            if number > after and message is not None:  # None marks a priming event
                await send_callback(EventMessage(message, str(number)))
        return stream_id
