from __future__ import annotations

import pytest
from django.core import checks
from django.test import override_settings

from mcp_expose.checks import check_anonymous_access, check_rows, check_settings

SHARED_CACHE = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://x"}}


@pytest.fixture(autouse=True)
def shared_cache():  # type: ignore[no-untyped-def]
    """Settings checks run against a cross-process cache unless a test says otherwise."""
    with override_settings(CACHES=SHARED_CACHE):
        yield


def ids(messages: list[checks.CheckMessage]) -> list[str]:
    return [message.id for message in messages]


def test_default_settings_pass() -> None:
    assert check_settings() == []


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"PATHS": "/mcp"}, "mcp_expose.E001"),
        ({"PATH": "mcp"}, "mcp_expose.E005"),
        ({"PATH": "/mcp/"}, "mcp_expose.E005"),
        ({"MAX_REQUEST_BODY_SIZE": 0}, "mcp_expose.E006"),
        ({"ALLOWED_ORIGINS": ["localhost:3000"]}, "mcp_expose.E007"),
        ({"CACHE_ALIAS": "nope"}, "mcp_expose.E008"),
    ],
)
def test_bad_settings_are_reported_with_a_hint(overrides: dict[str, object], expected: str) -> None:
    with override_settings(MCP_EXPOSE=overrides):
        messages = check_settings()
    assert ids(messages) == [expected]
    assert messages[0].hint


def test_a_process_private_cache_is_a_warning() -> None:
    with override_settings(CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}):
        assert ids(check_settings()) == ["mcp_expose.W001"]
    assert check_settings() == []


def test_anonymous_access_is_refused_in_deployments() -> None:
    with override_settings(DEBUG=False, MCP_EXPOSE={"ALLOW_ANONYMOUS": True}):
        assert ids(check_anonymous_access()) == ["mcp_expose.E009"]
    with override_settings(DEBUG=True, MCP_EXPOSE={"ALLOW_ANONYMOUS": True}):
        assert check_anonymous_access() == []


def test_deploy_check_runs_only_with_deploy_flag() -> None:
    with override_settings(DEBUG=False, MCP_EXPOSE={"ALLOW_ANONYMOUS": True}):
        assert "mcp_expose.E009" not in ids(checks.run_checks())
        assert "mcp_expose.E009" in ids(checks.run_checks(include_deployment_checks=True))


@pytest.mark.django_db
def test_row_name_clashes_are_reported_by_the_database_check() -> None:
    from mcp_expose.models import ExposedTool

    assert check_rows() == []
    ExposedTool.objects.filter(key="library.echo").update(wire_name="LIBRARY.GET_BOOK")
    messages = check_rows(databases=["default"])
    # These settings keep the dotted names: the override is one more name with a '.' (W017), then the clash.
    assert ids(messages) == ["mcp_expose.W017", "mcp_expose.W002"] and "library.echo" in messages[1].msg
    assert "1 admin's name is served with a '.' ('LIBRARY.GET_BOOK')" in messages[0].msg
