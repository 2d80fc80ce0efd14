"""The person at the test client: what they answer to the forms a call asks, and on the approval page.

A tool needing confirmation asks in the client (a 2026-07-28 client that shows forms), or sends the person
to the approval page (every other client, and tools whose confirmations are taken there only). `confirm`
answers both as that person would; `answer` fills in the forms a tool asks itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import mcp_types as types
from pydantic import BaseModel

from mcp_expose.calls.confirmation import CONFIRM_FIELD

# What a test answers a form with: the content to submit, None to decline, or the SDK's result as is.
FormAnswer = Mapping[str, Any] | types.ElicitResult | None
Answerer = Callable[[str, Mapping[str, Any]], FormAnswer]


class Person:
    """Answers as the test says: `confirm` True says yes to a confirmation, False says no, None leaves it
    unanswered; `answer(message, schema)` fills in any other form (None: every other form is unanswered)."""

    def __init__(self, confirm: bool | None = None, answer: Answerer | None = None) -> None:
        self.confirm = confirm
        self.answer = answer

    @property
    def answers_forms(self) -> bool:
        return self.confirm is not None or self.answer is not None

    def answer_form(self, message: str, schema: Mapping[str, Any]) -> types.ElicitResult | None:
        """The answer to one form, or None when the test gave none."""
        if self.confirm is not None and is_confirmation(schema):
            if self.confirm:
                return types.ElicitResult(action="accept", content={CONFIRM_FIELD: True})
            return types.ElicitResult(action="decline")
        if self.answer is None:
            return None
        given = self.answer(message, schema)
        if given is None:
            return types.ElicitResult(action="decline")
        if isinstance(given, types.ElicitResult):
            return given
        return types.ElicitResult(action="accept", content=dict(given))

    def answer_round(self, asked: types.InputRequiredResult) -> dict[str, Any] | None:
        """Answers to every question of a 2026-07-28 `input_required` result, or None when one has none (then
        the result goes back to the test as it is)."""
        answers: dict[str, Any] = {}
        for key, request in (asked.input_requests or {}).items():
            params = request.params if isinstance(request, types.ElicitRequest) else None
            if not isinstance(params, types.ElicitRequestFormParams):
                return None  # sampling, roots and URL forms are not the test client's to answer
            answer = self.answer_form(params.message, schema_of(params))
            if answer is None:
                return None
            answers[key] = answer
        return answers or None

    async def elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        """The SDK client's elicitation callback, for questions a 2025-11-25 call sends mid-call."""
        answer = self.answer_form(params.message, schema_of(params)) if params.mode == "form" else None
        if answer is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"The test gave no answer to: {params.message}")
        return answer

    def answer_on_page(self, user: Any, approval_url: str) -> None:
        """Sign in as `user` and say yes or no on the approval page, as the person would. Sync: a request."""
        from django.test import Client

        browser = Client()
        browser.force_login(user)
        fields = {"approve": "1"} if self.confirm else {"decline": "1"}
        response = browser.post(urlsplit(approval_url).path, fields)
        if response.status_code != 200:
            raise AssertionError(f"The approval page {approval_url} answered HTTP {response.status_code}.")


def is_confirmation(schema: Mapping[str, Any]) -> bool:
    """Whether a form is the dispatcher's confirmation question (one boolean, `confirm`)."""
    properties = schema.get("properties") or {}
    return list(properties) == [CONFIRM_FIELD] and properties[CONFIRM_FIELD].get("type") == "boolean"


def schema_of(params: Any) -> Mapping[str, Any]:
    schema = getattr(params, "requested_schema", None) or {}
    return schema.model_dump(by_alias=True, exclude_none=True) if isinstance(schema, BaseModel) else schema


def approval_url(result: Any) -> str | None:
    """The approval page a `confirmation_required` tool error sends the person to."""
    if not isinstance(result, types.CallToolResult) or not result.is_error:
        return None
    error = (result.structured_content or {}).get("error") or {}
    if error.get("code") != "confirmation_required":
        return None
    url = (error.get("details") or {}).get("approval_url")
    return url if isinstance(url, str) else None
