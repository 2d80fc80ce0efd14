"""Resources, prompts and completion: read-only capabilities, through the same policy as tools."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from mcp_expose.access.policy import decide
from mcp_expose.calls import ratelimit
from mcp_expose.calls.dispatch import CLIENT_QUESTIONS, CallRequest, caller_identity, claim_round, invocation_context
from mcp_expose.calls.failures import ToolFailure, failure_for
from mcp_expose.calls.invoke import ToolTimeout, invoke
from mcp_expose.catalog.compiled import Catalog, ToolEntry
from mcp_expose.core.content import CONTENT_TYPES, ContentBundle, Text
from mcp_expose.core.db import in_worker_thread
from mcp_expose.core.errors import McpExposeError
from mcp_expose.core.principal import Principal

MAX_COMPLETIONS = 100


class UnknownResource(McpExposeError):
    def __init__(self, uri: str) -> None:
        super().__init__(f"Resource not found: {uri}")
        self.uri = uri


class UnknownPrompt(McpExposeError):
    def __init__(self, name: str) -> None:
        super().__init__(f"Unknown prompt: {name}")
        self.name = name


class ReadFailed(McpExposeError):
    """A resource or prompt failed; `failure` is what the client may see."""

    def __init__(self, failure: ToolFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


@dataclass(frozen=True)
class Message:
    role: Literal["user", "assistant"]
    # Text, or one content item (an image, audio, an embedded resource or a resource link).
    content: Any

    @property
    def text(self) -> str | None:
        return self.content if isinstance(self.content, str) else None


async def _execute(entry: ToolEntry, values: Mapping[str, Any], principal: Principal, request: CallRequest) -> Any:
    await claim_round(request)
    if entry.rate_limit is not None and request.request_state is None:
        decision = await in_worker_thread(ratelimit.hit)(entry.key, caller_identity(principal), entry.rate_limit)
        if not decision.allowed:
            raise ReadFailed(
                ToolFailure(
                    "rate_limited",
                    f"Too many reads. Try again in {decision.retry_after} seconds.",
                    {"retry_after": decision.retry_after},
                )
            )
    try:
        return await invoke(entry, values, invocation_context(entry, principal, request))
    except ToolTimeout as exc:
        raise ReadFailed(ToolFailure("timeout", str(exc))) from None
    except CLIENT_QUESTIONS:
        raise
    except Exception as exc:  # noqa: BLE001  (mapped to a safe failure, logged when unexpected)
        raise ReadFailed(failure_for(entry, exc)) from None


async def read_resource(
    catalog: Catalog, principal: Principal, uri: str, request: CallRequest | None = None
) -> tuple[ToolEntry, Any]:
    """The contents at `uri`. Unknown, disabled and forbidden resources all raise `UnknownResource`."""
    found = catalog.find_resource(uri)
    if found is None or not decide(principal, found[0]).allowed:
        raise UnknownResource(uri)
    entry, variables = found
    values = entry.capability.signature.validate_arguments(variables, strict=False)
    return entry, await _execute(entry, values, principal, request or CallRequest())


async def get_prompt(
    catalog: Catalog,
    principal: Principal,
    name: str,
    arguments: Mapping[str, str] | None,
    request: CallRequest | None = None,
) -> tuple[ToolEntry, list[Message]]:
    entry = catalog.get_prompt(name)
    if entry is None or not decide(principal, entry).allowed:
        raise UnknownPrompt(name)
    values = entry.capability.signature.validate_arguments(arguments or {}, strict=False)
    return entry, messages(await _execute(entry, values, principal, request or CallRequest()))


def messages(value: Any) -> list[Message]:
    """A prompt's return value as messages: text or a content item is one user message; a list may mix
    those with (role, content) pairs and {"role": ..., "content": ...} mappings."""
    if isinstance(value, ContentBundle):  # a list holding content items, as the invoker hands it over
        value = list(value.items)
    items = value if isinstance(value, list) else [value]
    result = []
    for item in items:
        if isinstance(item, (str, *CONTENT_TYPES)):
            result.append(Message("user", _content(item)))
        elif isinstance(item, list | tuple) and len(item) == 2:
            result.append(Message(_role(item[0]), _content(item[1])))
        elif isinstance(item, Mapping) and "content" in item:
            result.append(Message(_role(item.get("role", "user")), _content(item["content"])))
        else:
            raise ReadFailed(ToolFailure("internal", "The prompt returned something that is not a message."))
    return result


def _role(value: Any) -> Literal["user", "assistant"]:
    if value == "user":
        return "user"
    if value == "assistant":
        return "assistant"
    raise ReadFailed(ToolFailure("internal", f"Prompt messages come from 'user' or 'assistant', not {str(value)!r}."))


def _content(value: Any) -> Any:
    if isinstance(value, Text):
        return value.text
    return value if isinstance(value, CONTENT_TYPES) else str(value)


async def complete(
    catalog: Catalog, principal: Principal, *, prompt: str | None, uri: str | None, argument: str, prefix: str
) -> tuple[list[str], int]:
    """Candidate values for a prompt argument or a resource template variable, and how many there are."""
    entry = None
    if prompt is not None:
        entry = catalog.get_prompt(prompt)
    elif uri is not None:
        entry = next((candidate for candidate in catalog.resources if candidate.uri == uri), None)
    if entry is None or not decide(principal, entry).allowed:
        return [], 0
    source = entry.capability.completions.get(argument)
    if source is None:
        return [], 0
    if callable(source):
        found = await source(prefix) if inspect.iscoroutinefunction(source) else await in_worker_thread(source)(prefix)
        candidates = [str(value) for value in found]
    else:
        folded = prefix.casefold()
        candidates = [str(value) for value in source if str(value).casefold().startswith(folded)]
    return candidates[:MAX_COMPLETIONS], len(candidates)
