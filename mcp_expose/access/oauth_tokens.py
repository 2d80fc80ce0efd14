"""Accept django-oauth-toolkit access tokens issued for this resource, and nothing else.

Sync (DOT is sync): called inside the edge's thread hop.
"""

from __future__ import annotations

import hashlib
import logging

from django.utils import timezone

from mcp_expose.access.failures import INVALID_TOKEN, AuthFailure
from mcp_expose.access.protected_resource import canonical_uri
from mcp_expose.access.scopes import expand_scopes
from mcp_expose.core.principal import Principal, principal_for_user

logger = logging.getLogger("mcp_expose.auth")

MAX_TOKEN_LENGTH = 4096


def authenticate_access_token(token: str, resource: str) -> Principal | AuthFailure:
    """A principal for a DOT access token whose audience is exactly `resource`.

    Refused: unknown, expired or revoked tokens; tokens with no resource or
    another one (DOT treats "no resource" as "any audience"; we fail closed);
    dynamic-registration access tokens; tokens of inactive users.
    """
    from oauth2_provider.models import get_access_token_model
    from oauth2_provider.settings import oauth2_settings

    if len(token) > MAX_TOKEN_LENGTH or any(character.isspace() for character in token):
        return INVALID_TOKEN
    checksum = hashlib.sha256(token.encode()).hexdigest()
    access_token = (
        get_access_token_model()
        .objects.select_related("application", "application__user", "user")
        .filter(token_checksum=checksum)
        .first()
    )
    if access_token is None:
        return INVALID_TOKEN
    reference = f"token #{access_token.pk}"
    if access_token.expires <= timezone.now():
        logger.info("Refused %s: expired", reference)
        return INVALID_TOKEN
    granted = access_token.scope.split()
    if oauth2_settings.DCR_REGISTRATION_SCOPE in granted:
        logger.info("Refused %s: a client-registration token is not an MCP credential", reference)
        return INVALID_TOKEN
    audiences = {canonical_uri(audience) for audience in (access_token.resource or []) if isinstance(audience, str)}
    if resource not in audiences:
        logger.info("Refused %s: issued for %s, not for %s", reference, sorted(audiences) or "no resource", resource)
        return INVALID_TOKEN
    application = access_token.application
    client_id = application.client_id if application is not None else None
    user = access_token.user or (application.user if application is not None else None)
    extra = {"client_id": client_id, "credential": access_token}
    if user is None:
        # A client-credentials token of a client nobody owns (open dynamic registration creates such
        # clients): it would act for no one, so it may not act at all.
        logger.info("Refused %s: neither the token nor its client belongs to a user", reference)
        return INVALID_TOKEN
    if not user.is_active:
        logger.info("Refused %s: its user is inactive", reference)
        return INVALID_TOKEN
    return principal_for_user(user, expand_scopes(granted), "oauth", **extra)
