"""Input schemas that depend on who calls: a view whose serializer choice reads the request.

A DRF view may pick its serializer by the caller (`get_serializer_class()` returning a staff serializer) or
shape its fields by them (`Serializer.get_fields()` reading `self.context["request"].user`). Such a view
accepts different input from different people over HTTP, so each caller is shown, and checked against,
the schema the view will accept from them.

Which views these are is detected, not guessed: the schema is first built with a request for nobody
(an anonymous user) that notes every read of who is asking (`user`, `auth`, headers, session). A view that
read none of them has one schema for everyone. One that did is per-caller: for each caller the serializer
is built again, for that caller, and its schema is looked up by what it came to, so callers the view
treats alike share one compiled schema.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from mcp_expose.core.context import InvocationContext
from mcp_expose.core.errors import InvalidInput
from mcp_expose.core.principal import Principal
from mcp_expose.declare.json_schemas import closed
from mcp_expose.declare.schema import SchemaSignature

# Request attributes that say who is asking (or what they sent): reading one makes the result per-caller.
CALLER_ATTRIBUTES = frozenset(
    {
        "user",
        "auth",
        "successful_authenticator",
        "authenticators",
        "META",
        "headers",
        "COOKIES",
        "session",
    }
)
MAX_VARIANTS = 64  # distinct schemas kept per tool; beyond this the least used is compiled again when needed


class CallerReads:
    """Wraps a request while a schema is built, and notes whether anything read who is asking."""

    def __init__(self, request: Any) -> None:
        object.__setattr__(self, "_request", request)
        object.__setattr__(self, "read", set())

    def __getattr__(self, name: str) -> Any:
        if name in CALLER_ATTRIBUTES:
            self.read.add(name)
        return getattr(self._request, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._request, name, value)


def variant_of(schema: Mapping[str, Any]) -> str:
    """A short name for a schema: equal schemas, equal names."""
    return hashlib.blake2b(json.dumps(schema, sort_keys=True, default=str).encode(), digest_size=12).hexdigest()


Explainer = Callable[[InvalidInput, Mapping[str, Any], InvocationContext, Any], InvalidInput]


class ViewSignature(SchemaSignature):
    """A view operation's schema, where each argument goes in the request (`routing`), and, for a view that
    validates with a serializer, how to add the view's own errors to a refusal (`explainer`)."""

    def __init__(self, input_schema: dict[str, Any], routing: Any, explainer: Explainer | None = None) -> None:
        super().__init__(closed(input_schema), check=False)
        self.routing = routing
        self.variant = variant_of(input_schema)
        self._explainer = explainer
        self.explains_refusals = explainer is not None

    def for_caller(self, principal: Principal | None) -> ViewSignature:
        return self

    def explain_refusal(
        self, refusal: InvalidInput, arguments: Mapping[str, Any], context: InvocationContext
    ) -> InvalidInput:
        if self._explainer is None:
            return refusal
        return self._explainer(refusal, arguments, context, self.routing)


class CallerSchemas(ViewSignature):
    """The schema of a per-caller view: itself is the schema for nobody (what a listing without a caller,
    the admin, shows); `for_caller` builds the caller's.

    `build(principal)` returns (input schema, routing) for that caller; it runs the view's code, so call
    `for_caller` in a sync context (a worker thread).
    """

    varies_by_caller = True

    def __init__(
        self,
        input_schema: dict[str, Any],
        routing: Any,
        build: Callable[[Principal], tuple[dict[str, Any], Any]],
        explainer: Explainer | None = None,
    ) -> None:
        super().__init__(input_schema, routing, explainer)
        self._build = build
        self._variants: OrderedDict[str, ViewSignature] = OrderedDict({self.variant: self})
        self._lock = threading.Lock()

    def for_caller(self, principal: Principal | None) -> ViewSignature:
        if principal is None:
            return self
        schema, routing = self._build(principal)
        variant = variant_of(schema)
        with self._lock:
            known = self._variants.get(variant)
            if known is not None:
                self._variants.move_to_end(variant)
                return known
        made = ViewSignature(schema, routing, self._explainer)
        with self._lock:
            known = self._variants.setdefault(variant, made)
            self._variants.move_to_end(variant)
            while len(self._variants) > MAX_VARIANTS:
                self._variants.popitem(last=False)
        return known
