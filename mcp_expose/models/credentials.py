"""Who may call without OAuth: API keys, and the credentials that leaked into a URL and were revoked."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from mcp_expose.declare.names import split_scopes
from mcp_expose.models.validators import (
    validate_scopes,
)

API_KEY_PREFIX = "mcpx"


def hash_api_key(secret: str) -> str:
    """SHA-256 is enough: keys are 256-bit random strings, so there is nothing to brute-force."""
    return hashlib.sha256(secret.encode()).hexdigest()


class ApiKeyQuerySet(models.QuerySet["ApiKey"]):
    def usable(self) -> ApiKeyQuerySet:
        now = timezone.now()
        return self.filter(revoked_at__isnull=True, user__is_active=True).filter(
            models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=now)
        )


class ApiKey(models.Model):
    """A long-lived credential for agents and scripts that cannot run an OAuth flow.

    Only a short prefix is stored in clear; the secret is shown once, when the
    key is created.
    """

    name = models.CharField(_("name"), max_length=100, help_text=_("What this key is for."))
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mcp_api_keys", verbose_name=_("user")
    )
    prefix = models.CharField(_("prefix"), max_length=16, unique=True, editable=False)
    hashed_secret = models.CharField(max_length=64, editable=False)
    scopes = models.CharField(
        _("scopes"),
        max_length=500,
        blank=True,
        validators=[validate_scopes],
        help_text=_("Space-separated scopes this key grants."),
    )
    expires_at = models.DateTimeField(_("expires"), null=True, blank=True)
    revoked_at = models.DateTimeField(_("revoked"), null=True, blank=True, editable=False)
    revoked_reason = models.CharField(_("why revoked"), max_length=200, blank=True, editable=False)
    last_used_at = models.DateTimeField(_("last used"), null=True, blank=True, editable=False)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    objects = ApiKeyQuerySet.as_manager()

    class Meta:
        verbose_name = _("API key")
        verbose_name_plural = _("API keys")
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @classmethod
    def create_key(
        cls, *, user: Any, name: str, scopes: str = "", expires_in: timedelta | None = None
    ) -> tuple[ApiKey, str]:
        """Create a key and return it with its secret, which is not stored anywhere."""
        key = cls(user=user, name=name, scopes=scopes)
        if expires_in is not None:
            key.expires_at = timezone.now() + expires_in
        secret = key.assign_secret()
        key.full_clean()
        key.save()
        return key, secret

    def assign_secret(self) -> str:
        """Give the key a fresh secret; returns it (the only time it is available)."""
        self.prefix = secrets.token_hex(4)
        secret = f"{API_KEY_PREFIX}_{self.prefix}_{secrets.token_urlsafe(32)}"
        self.hashed_secret = hash_api_key(secret)
        return secret

    def matches(self, secret: str) -> bool:
        return hmac.compare_digest(self.hashed_secret, hash_api_key(secret))

    @property
    def scope_set(self) -> frozenset[str]:
        return split_scopes(self.scopes)

    @property
    def is_usable(self) -> bool:
        return (
            self.revoked_at is None
            and (self.expires_at is None or self.expires_at > timezone.now())
            and bool(getattr(self.user, "is_active", False))
        )

    def revoke(self, reason: str = "") -> None:
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.revoked_reason = reason
            self.save(update_fields=["revoked_at", "revoked_reason"])

    @staticmethod
    def prefix_of(secret: str) -> str | None:
        """The lookup prefix embedded in a presented key, or None if it is not shaped like ours."""
        parts = secret.split("_", 2)
        if len(parts) != 3 or parts[0] != API_KEY_PREFIX or len(parts[1]) != 8:
            return None
        return parts[1]


class CredentialLeak(models.Model):
    """A credential revoked because it was seen where secrets get copied (a URL), kept for the audit.

    Names the credential by what is not secret (an API key's prefix, an access token's row and client), so that
    an administrator can tell whose it was and why it stopped working.
    """

    class Kind(models.TextChoices):
        API_KEY = "api_key", _("API key")
        ACCESS_TOKEN = "access_token", _("OAuth access token")

    kind = models.CharField(_("kind"), max_length=20, choices=Kind.choices)
    identifier = models.CharField(
        _("credential"),
        max_length=64,
        help_text=_("The API key's prefix, or the access token's number; never the secret."),
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("user"),
    )
    client_id = models.CharField(_("OAuth client"), max_length=255, blank=True)
    reason = models.CharField(_("why revoked"), max_length=200)
    revoked_at = models.DateTimeField(_("revoked"), default=timezone.now, db_index=True)

    class Meta:
        verbose_name = _("leaked credential")
        verbose_name_plural = _("leaked credentials")
        ordering = ["-revoked_at"]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.identifier}"
