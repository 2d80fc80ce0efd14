"""Asking the client for input in the middle of a call: a form for its user, a completion from its
model, or its roots.

A capability calls `context.ask({...})` with named questions and gets the answers back. How they
travel depends on the connection, not on the capability's code:

- 2026-07-28: there are no server-to-client requests. `ask` stops the call with `InputRequired`;
  the client receives an `input_required` result, asks, and repeats the call with the answers. The
  call runs again from the top and `ask` now returns them. Answers of earlier rounds travel in the
  sealed request state, so a capability may ask several times in a row (write after the last ask).
- 2025-11-25 with a back-channel (a stateful session, or stdio): the question is sent as a real
  `elicitation/create`, `sampling/createMessage` or `roots/list` request and `ask` awaits the answer.
- Anything else (the stateless legacy path) cannot ask: `ask` raises `CannotAsk`, a tool error
  that tells the caller how to connect instead.

Each round's state is single-use (`claim_round`): a replayed state is refused, so the last round of a
call, and whatever it writes, runs once.

A question the client has not declared the capability for raises `MissingClientCapability`
(JSON-RPC -32021) before anything is sent, as both revisions require.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from mcp_expose.core.errors import McpExposeError, ToolError

# Request-state entries: what was answered (with a digest of each question), what the last round
# asked, and that round's single-use id.
ANSWERS_KEY = "answers"
ASKED_KEY = "asked"
ROUND_KEY = "round"
UNASKED = "*"
Answer = types.ElicitResult | types.CreateMessageResult | types.ListRootsResult


@dataclass(frozen=True, slots=True)
class Elicit:
    """A form for the user: `schema` is a flat JSON object schema, or a pydantic model describing one."""

    message: str
    schema: Mapping[str, Any] | type[BaseModel]

    def requested_schema(self) -> dict[str, Any]:
        if isinstance(self.schema, type) and issubclass(self.schema, BaseModel):
            schema = self.schema.model_json_schema()
            schema.pop("title", None)
            return schema
        return dict(self.schema)

    def as_request(self) -> types.ElicitRequest:
        params = types.ElicitRequestFormParams(message=self.message, requested_schema=self.requested_schema())
        return types.ElicitRequest(params=params)

    answer_type = types.ElicitResult
    capability = "elicitation"


Role = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class Sample:
    """A completion from the client's model. `prompt` is one user message, or a list of
    (role, text) pairs for a conversation."""

    prompt: str | Sequence[tuple[Role, str]]
    max_tokens: int = 1000
    system_prompt: str | None = None
    temperature: float | None = None

    def as_request(self) -> types.CreateMessageRequest:
        turns: list[tuple[Role, str]] = [("user", self.prompt)] if isinstance(self.prompt, str) else list(self.prompt)
        messages = [types.SamplingMessage(role=role, content=types.TextContent(text=text)) for role, text in turns]
        params = types.CreateMessageRequestParams(
            messages=messages,
            max_tokens=self.max_tokens,
            system_prompt=self.system_prompt,
            temperature=self.temperature,
        )
        return types.CreateMessageRequest(params=params)

    answer_type = types.CreateMessageResult
    capability = "sampling"


@dataclass(frozen=True, slots=True)
class ListRoots:
    """The client's roots (folders or repositories it shares)."""

    def as_request(self) -> types.ListRootsRequest:
        return types.ListRootsRequest()

    answer_type = types.ListRootsResult
    capability = "roots"


Question = Elicit | Sample | ListRoots


class InputRequired(McpExposeError):
    """The call stops here until the client answers `questions` (2026-07-28)."""

    def __init__(self, questions: Mapping[str, Question], state: str) -> None:
        super().__init__("the client must answer questions before the call can go on")
        self.questions = dict(questions)
        self.state = state

    def as_result(self) -> types.InputRequiredResult:
        requests = {key: question.as_request() for key, question in self.questions.items()}
        return types.InputRequiredResult(input_requests=requests, request_state=self.state)


class MissingClientCapability(McpExposeError):
    """The client did not declare what a question needs; answered as JSON-RPC -32021."""

    def __init__(self, capabilities: Sequence[str]) -> None:
        names = ", ".join(sorted(set(capabilities)))
        super().__init__(f"This call needs the client capability {names}, which the client did not declare.")
        self.capabilities = sorted(set(capabilities))

    def error_data(self) -> dict[str, Any]:
        return {"requiredCapabilities": {name: {} for name in self.capabilities}}


# The MCP tasks extension (SEP-2663), as clients declare it in their capabilities.
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"


class TaskRequired(MissingClientCapability):
    """A tool that runs only as an MCP task, called by a client that did not declare the tasks extension."""

    def __init__(self, what: str = "This tool runs only as an MCP task") -> None:
        Exception.__init__(
            self,
            f"{what}: declare the {TASKS_EXTENSION} extension in the request's client capabilities "
            "(protocol revision 2026-07-28).",
        )
        self.capabilities = [TASKS_EXTENSION]

    def error_data(self) -> dict[str, Any]:
        return {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}


class ClientInputFailed(ToolError):
    code = "client_input_failed"
    default_message = "The client could not answer a question this tool asked."


class CannotAsk(ToolError):
    code = "client_input_unavailable"
    default_message = (
        "This tool needs to ask the client a question, which this connection cannot carry. Connect with "
        "protocol revision 2026-07-28, or with a 2025-11-25 client over stdio or a stateful session (LEGACY_SESSIONS, "
        "served by the ASGI entry mcp_expose.asgi, not the WSGI one)."
    )


BackChannel = Callable[[Question], Awaitable[Answer]]


@dataclass(slots=True)
class ClientInput:
    """What one call knows about asking its client: the declared capabilities, the answers so far,
    and how a new question travels."""

    capabilities: types.ClientCapabilities | None = None
    # 2026-07-28: questions become an input_required result.
    rounds: bool = False
    # 2025-11-25 with a back-channel: questions are sent and awaited.
    back_channel: BackChannel | None = None
    # Everything answered so far in this call, from the sealed state and this round's responses:
    # key -> {digest of the question answered -> the answer as JSON} (a key may be reused for a new question).
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Sealed state entries other than answers (a confirmation already given), carried to the next round.
    carried: dict[str, Any] = field(default_factory=dict)
    # The single-use id of the round this request answers (None on a first round).
    round_id: str | None = None

    @classmethod
    def for_round(
        cls,
        capabilities: types.ClientCapabilities | None,
        state: str | None,
        responses: Mapping[str, Any] | None,
        *,
        rounds: bool,
        back_channel: BackChannel | None = None,
    ) -> ClientInput:
        """Merge the answers carried in the (already unsealed) state with this round's responses."""
        carried = read_state(state)
        answers = {
            key: dict(given) for key, given in (carried.pop(ANSWERS_KEY, None) or {}).items() if isinstance(given, dict)
        }
        asked = carried.pop(ASKED_KEY, None) or {}
        round_id = carried.pop(ROUND_KEY, None)
        for key, response in (responses or {}).items():
            answer = (
                response.model_dump(mode="json", by_alias=True, exclude_none=True)
                if isinstance(response, BaseModel)
                else response
            )
            # An answer to what the last round asked is tied to that question; one the client offered
            # unasked (allowed, e.g. on a first call) fits whichever question takes that key first.
            answers.setdefault(key, {})[asked.get(key, UNASKED)] = answer
        return cls(
            capabilities=capabilities,
            rounds=rounds,
            back_channel=back_channel,
            answers=answers,
            carried=carried,
            round_id=round_id if isinstance(round_id, str) else None,
        )

    def missing_capabilities(self, questions: Mapping[str, Question]) -> list[str]:
        declared = self.capabilities
        missing = []
        for question in questions.values():
            if question.capability == "elicitation":
                elicitation = declared.elicitation if declared is not None else None
                # An empty elicitation capability means forms.
                if elicitation is None or (elicitation.form is None and elicitation.url is not None):
                    missing.append("elicitation")
            elif getattr(declared, question.capability, None) is None:
                missing.append(question.capability)
        return missing

    def can_ask(self, question: Question) -> bool:
        return (self.rounds or self.back_channel is not None) and not self.missing_capabilities({"q": question})

    async def ask(self, questions: Mapping[str, Question]) -> dict[str, Answer]:
        if not questions:
            return {}
        if not self.rounds and self.back_channel is None:
            raise CannotAsk()
        missing = self.missing_capabilities(questions)
        if missing:
            raise MissingClientCapability(missing)
        if self.rounds:
            return self._from_rounds(questions)
        answers: dict[str, Answer] = {}
        back_channel = self.back_channel
        assert back_channel is not None  # no rounds, so there is one (checked above)
        for key, question in questions.items():
            try:
                answers[key] = await back_channel(question)
            except (MCPError, ValidationError) as exc:
                raise ClientInputFailed(f"The client could not answer the question {key!r}.") from exc
        return answers

    def _from_rounds(self, questions: Mapping[str, Question]) -> dict[str, Answer]:
        answers: dict[str, Answer] = {}
        unanswered: dict[str, Question] = {}
        kept = {key: dict(given) for key, given in self.answers.items()}
        for key, question in questions.items():
            # An answer counts only for the question it answered: a tool may reuse a key for a new question.
            digest = question_digest(question)
            given = kept.get(key, {})
            answer = _parse(question, given.get(digest, given.get(UNASKED)))
            if answer is None:
                unanswered[key] = question
                given.pop(digest, None)  # malformed: ask again
            elif digest not in given:
                given[digest] = given.pop(UNASKED)  # now tied to this question
            if answer is not None:
                answers[key] = answer
        self.answers = kept  # a later `ask` in this run sees which unasked answer was taken
        if unanswered:
            # Ask again for anything missing or malformed, keeping what was answered well.
            raise InputRequired(unanswered, next_round_state(unanswered, kept, self.carried))
        return answers


def _parse(question: Question, raw: Any) -> Answer | None:
    if raw is None:
        return None
    try:
        return question.answer_type.model_validate(raw, by_name=False)
    except ValidationError:
        return None


def question_digest(question: Question) -> str:
    wire = question.as_request().model_dump(mode="json", by_alias=True, exclude_none=True)
    return hashlib.sha256(json.dumps(wire, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:32]


def next_round_state(questions: Mapping[str, Question], answers: Mapping[str, Any], carried: Mapping[str, Any]) -> str:
    """The state for the round that asks `questions`: answers so far, what is asked, a fresh round id."""
    asked = {key: question_digest(question) for key, question in questions.items()}
    return write_state({**carried, ANSWERS_KEY: dict(answers), ASKED_KEY: asked, ROUND_KEY: uuid.uuid4().hex})


def claim_round(round_id: str) -> bool:
    """Use up a round (sync: the shared cache). False when it was answered before: a replayed state.

    A cache that cannot answer raises `DependencyUnavailable` (the call is `unavailable`): a round whose single
    use cannot be guaranteed is not run. First rounds never get here."""
    from mcp_expose.core.conf import get_settings
    from mcp_expose.core.process_cache import process_cache
    from mcp_expose.core.shared_cache import guarded

    cache = process_cache()
    return bool(
        guarded(
            "answering a later round of a question",
            cache.add,
            f"mcp_expose:round:{round_id}",
            1,
            get_settings().CONFIRMATION_TTL + 60,
        )
    )


def read_state(state: str | None) -> dict[str, Any]:
    """The request state's entries. Sealed by the SDK's boundary, so anything else is a bug, not an attack."""
    if not state:
        return {}
    try:
        value = json.loads(state)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def write_state(entries: Mapping[str, Any]) -> str:
    return json.dumps(dict(entries), separators=(",", ":"), sort_keys=True)
