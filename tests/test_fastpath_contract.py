"""The fast path's contract, read where it is written (`serving/fastpath_contract`): the plain methods agree with
each era's check, and each reason a plain call is left to the SDK is the one `call_left_to_sdk` gives."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from mcp.server import Server
from pydantic import Field

import mcp_expose
from mcp_expose.catalog.compiled import Catalog, compile_catalog
from mcp_expose.core.principal import Principal
from mcp_expose.declare.registry import CapabilityRegistry
from mcp_expose.serving import fastpath_legacy, fastpath_requests
from mcp_expose.serving.fastpath_contract import LEGACY, MODERN, PLAIN_METHODS, SdkAnswers, call_left_to_sdk


def test_the_plain_methods_are_those_each_era_s_check_admits() -> None:
    assert PLAIN_METHODS[MODERN] == set(fastpath_requests.PARAMS_MODELS)
    legacy = {*fastpath_requests.PARAMS_MODELS, *fastpath_legacy.CONSTANT_METHODS, fastpath_legacy.INITIALIZED}
    assert PLAIN_METHODS[LEGACY] == legacy


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    registry = CapabilityRegistry()

    def declare(key: str, target: Any = None, **options: Any) -> None:
        mcp_expose.tool(key=key, registry=registry, **options)(target or (lambda: None))

    def regional(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> None:
        return None

    declare("t.plain")
    declare("t.confirmed", requires_confirmation=True)
    declare("t.long", task="optional")
    declare("t.regional", regional)
    declare("t.scoped", scopes=["secret"])
    return compile_catalog(list(registry), {})


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("t.plain", None),
        ("t.nothing", SdkAnswers.UNKNOWN),
        ("t.confirmed", SdkAnswers.CONFIRMATION),
        ("t.long", SdkAnswers.TASK),
        ("t.regional", SdkAnswers.HEADER_BOUND),
        ("t.scoped", SdkAnswers.FORBIDDEN),
    ],
)
def test_each_call_the_sdk_must_answer_is_named_with_its_reason(
    catalog: Catalog, name: str, reason: SdkAnswers | None
) -> None:
    caller = Principal(user=None, scopes=frozenset({"mcp"}))
    entry, found = call_left_to_sdk(name, catalog, caller, Server("contract"))
    assert found is reason
    assert entry is catalog.get(name)
