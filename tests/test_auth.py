from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import override_settings
from django.utils import timezone

from mcp_expose.access.credential_cache import credentials_revision
from mcp_expose.access.credential_leaks import LEAK_REASON
from mcp_expose.access.credentials import authenticate, credential_cache
from mcp_expose.access.failures import INVALID_TOKEN, LEAKED_IN_URL, MISSING, TOKEN_IN_URL, WRONG_SCHEME, AuthFailure
from mcp_expose.core.principal import Principal
from mcp_expose.models import ApiKey, CredentialLeak, hash_api_key

pytestmark = pytest.mark.django_db


@pytest.fixture
def user() -> User:
    user = User.objects.create_user("ada", password="x")
    user.user_permissions.add(Permission.objects.get(codename="view_loan"))
    return user


def bearer(secret: str) -> dict[str, str]:
    return {"authorization": f"Bearer {secret}"}


def test_a_valid_key_becomes_a_principal_with_permissions(user: User) -> None:
    key, secret = ApiKey.create_key(user=user, name="agent", scopes="library:read library:write")
    principal = authenticate(bearer(secret))
    assert isinstance(principal, Principal)
    assert principal.user == user and principal.method == "api_key"
    assert principal.scopes == {"library:read", "library:write", "mcp"}  # expanded by SCOPE_HIERARCHY
    assert principal.permissions == {"library.view_loan"}
    assert principal.api_key_prefix == key.prefix and secret not in repr(principal)
    key.refresh_from_db()
    assert key.last_used_at is not None


def test_only_a_prefix_and_a_hash_are_stored(user: User) -> None:
    key, secret = ApiKey.create_key(user=user, name="agent")
    stored = ApiKey.objects.values().get(pk=key.pk)
    assert secret not in repr(stored)
    assert stored["hashed_secret"] == hash_api_key(secret) and secret.startswith(f"mcpx_{stored['prefix']}_")


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, MISSING),
        ({"authorization": "Basic YWRhOng="}, WRONG_SCHEME),
        ({"authorization": "Bearer "}, INVALID_TOKEN),
        ({"authorization": "Bearer not-ours"}, INVALID_TOKEN),
        ({"authorization": "Bearer mcpx_00000000_unknown"}, INVALID_TOKEN),
    ],
)
def test_missing_and_malformed_credentials(headers: dict[str, str], expected: AuthFailure) -> None:
    assert authenticate(headers) == expected


def test_a_wrong_secret_with_a_real_prefix_is_refused(user: User) -> None:
    key, _ = ApiKey.create_key(user=user, name="agent")
    assert authenticate(bearer(f"mcpx_{key.prefix}_guessed")) == INVALID_TOKEN


@pytest.mark.parametrize("spoil", ["revoke", "expire", "deactivate"])
def test_revoked_expired_and_inactive_are_refused(user: User, spoil: str) -> None:
    key, secret = ApiKey.create_key(user=user, name="agent")
    if spoil == "revoke":
        key.revoke()
    elif spoil == "expire":
        ApiKey.objects.filter(pk=key.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    else:
        User.objects.filter(pk=user.pk).update(is_active=False)
    assert authenticate(bearer(secret)) == INVALID_TOKEN


def test_tokens_in_the_query_string_are_refused_even_with_a_header(user: User) -> None:
    key, secret = ApiKey.create_key(user=user, name="agent")
    assert authenticate(bearer(secret), [("access_token", "not-a-token")]) == TOKEN_IN_URL
    # Only what came in the URL is leaked: the header's key goes on working.
    assert isinstance(authenticate(bearer(secret)), Principal)
    assert not CredentialLeak.objects.exists()


@pytest.mark.parametrize("parameter", ["api_key", "access_token", "key", "anything"])
def test_a_key_in_the_query_string_is_revoked_and_recorded(
    user: User, parameter: str, django_capture_on_commit_callbacks: Any
) -> None:
    key, secret = ApiKey.create_key(user=user, name="agent")
    assert isinstance(authenticate(bearer(secret)), Principal)  # known to this process from now on
    stamp = credentials_revision()
    with django_capture_on_commit_callbacks(execute=True):
        assert authenticate({}, [("foo", "bar"), (parameter, secret)]) == LEAKED_IN_URL
    assert secret not in LEAKED_IN_URL.description
    key.refresh_from_db()
    assert key.revoked_at is not None and key.revoked_reason == LEAK_REASON
    assert key.last_used_at is None or key.last_used_at < key.revoked_at
    leak = CredentialLeak.objects.get()
    assert (leak.kind, leak.identifier, leak.user, leak.revoked_at) == ("api_key", key.prefix, user, key.revoked_at)
    # As with any revocation: every process's memory of the key is gone once the stamp moves.
    assert credentials_revision() != stamp
    assert authenticate(bearer(secret), credentials_stamp=credentials_revision()) == INVALID_TOKEN
    # Sent again, it is refused as any URL credential; nothing more is written.
    assert authenticate({}, [(parameter, secret)]) == TOKEN_IN_URL
    assert CredentialLeak.objects.count() == 1


def test_a_wrong_secret_in_the_query_string_revokes_nothing(user: User) -> None:
    key, secret = ApiKey.create_key(user=user, name="agent")
    for guess in (f"mcpx_{key.prefix}_guessed", secret + "x", secret[:-1], "mcpx_00000000_unknown"):
        assert authenticate({}, [("api_key", guess)]) == TOKEN_IN_URL
    key.refresh_from_db()
    assert key.revoked_at is None and not CredentialLeak.objects.exists()
    assert isinstance(authenticate(bearer(secret)), Principal)


def test_one_credential_per_request_is_revoked(user: User) -> None:
    first, first_secret = ApiKey.create_key(user=user, name="first")
    second, second_secret = ApiKey.create_key(user=user, name="second")
    assert authenticate({}, [("api_key", first_secret), ("access_token", second_secret)]) == LEAKED_IN_URL
    assert ApiKey.objects.get(pk=first.pk).revoked_at is not None
    assert ApiKey.objects.get(pk=second.pk).revoked_at is None
    assert list(CredentialLeak.objects.values_list("identifier", flat=True)) == [first.prefix]


def test_a_revoked_or_expired_key_in_the_query_string_is_left_as_it_is(user: User) -> None:
    revoked, revoked_secret = ApiKey.create_key(user=user, name="revoked")
    revoked.revoke(reason="Revoked in the admin.")
    expired, expired_secret = ApiKey.create_key(user=user, name="expired", expires_in=timedelta(seconds=-1))
    for secret in (revoked_secret, expired_secret):
        assert authenticate({}, [("api_key", secret)]) == TOKEN_IN_URL
    assert ApiKey.objects.get(pk=revoked.pk).revoked_reason == "Revoked in the admin."
    assert ApiKey.objects.get(pk=expired.pk).revoked_at is None
    assert not CredentialLeak.objects.exists()


def test_anonymous_access_only_when_enabled() -> None:
    assert authenticate({}) == MISSING
    with override_settings(MCP_EXPOSE={"ALLOW_ANONYMOUS": True, "ANONYMOUS_SCOPES": ["public"]}):
        principal = authenticate({})
        assert isinstance(principal, Principal)
        assert principal.method == "anonymous" and principal.scopes == {"public"}
        # A presented but bad credential is still refused.
        assert authenticate(bearer("mcpx_00000000_bad")) == INVALID_TOKEN


def test_last_used_is_written_at_most_once_per_interval(user: User, django_assert_num_queries: Any) -> None:
    _, secret = ApiKey.create_key(user=user, name="agent")
    authenticate(bearer(secret))
    credential_cache.clear()
    # select key+user, permission queries; no UPDATE the second time.
    with django_assert_num_queries(3):
        authenticate(bearer(secret))


def test_a_known_credential_costs_no_query_until_credentials_change(
    user: User, django_assert_num_queries: Any, django_capture_on_commit_callbacks: Any
) -> None:
    key, secret = ApiKey.create_key(user=user, name="agent", scopes="library:read")
    first = authenticate(bearer(secret))
    with django_assert_num_queries(0):
        again = authenticate(bearer(secret))
    assert isinstance(first, Principal) and again == first
    assert again.user is not first.user  # each request gets its own user object
    # A change to any credential moves the stamp after commit: the next request asks the database again.
    with django_capture_on_commit_callbacks(execute=True):
        key.revoke()
    assert authenticate(bearer(secret)) == INVALID_TOKEN


@pytest.mark.parametrize("change", ["deactivate", "permission", "another key"])
def test_changes_to_users_and_permissions_reach_known_credentials(
    user: User, change: str, django_capture_on_commit_callbacks: Any
) -> None:
    _, secret = ApiKey.create_key(user=user, name="agent")
    assert authenticate(bearer(secret)).permissions == {"library.view_loan"}  # type: ignore[union-attr]
    with django_capture_on_commit_callbacks(execute=True):
        if change == "deactivate":
            user.is_active = False
            user.save()
        elif change == "permission":
            user.user_permissions.clear()
        else:
            ApiKey.create_key(user=user, name="other")
    after = authenticate(bearer(secret))
    if change == "deactivate":
        assert after == INVALID_TOKEN
    elif change == "permission":
        assert isinstance(after, Principal) and after.permissions == frozenset()
    else:
        assert isinstance(after, Principal) and after.permissions == {"library.view_loan"}


def test_the_event_loop_answers_only_what_needs_no_database(
    user: User, django_assert_num_queries: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """`Gate.authenticate_in_loop` (no thread hop) answers from this process's memory and the local cache, or
    says None: an unknown credential, a moved stamp, a catalog not yet compiled. A networked cache is never
    read on the loop at all."""
    from mcp_expose.access.credential_cache import CREDENTIALS_KEY
    from mcp_expose.catalog.compiled import CatalogProvider
    from mcp_expose.catalog.revision import REVISION_KEY, local_stamp_cache, read_stamps
    from mcp_expose.serving.gate import Gate

    edge = Gate(CatalogProvider())

    def in_loop(headers: dict[str, str], resource: str) -> Any:
        """As the edge does it: the stamps from the local cache, then the answer without a hop, if any."""
        stamps = read_stamps(REVISION_KEY, CREDENTIALS_KEY, cache=local_stamp_cache())
        return edge.authenticate_in_loop(headers, frozenset(), resource, stamps)

    _, secret = ApiKey.create_key(user=user, name="agent", scopes="library:read")
    resource = "http://testserver/mcp"
    with django_assert_num_queries(0):
        assert in_loop(bearer(secret), resource) is None  # nothing compiled yet
        assert in_loop({}, resource) is None
    principal, catalog = edge.authenticate(bearer(secret), frozenset(), resource)  # the hop: learns both
    with django_assert_num_queries(0):
        assert in_loop(bearer(secret), resource) == (principal, catalog)
        assert in_loop({}, resource) == (MISSING, None)
        assert in_loop(bearer("mcpx_unknown_secret"), resource) is None
        assert in_loop(bearer(secret), "http://elsewhere/mcp") is None
    with django_capture_on_commit_callbacks(execute=True):
        User.objects.create_user("grace")  # any credential change moves the stamp
    assert in_loop(bearer(secret), resource) is None
    redis = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://127.0.0.1:1"}}
    with override_settings(CACHES=redis):
        assert local_stamp_cache() is None  # never read on the loop: the edge takes the hop, which reads it
