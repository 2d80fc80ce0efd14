"""What is exposed (admin-edited rows) and who may call (API keys)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from oauth2_provider.settings import oauth2_settings

from .catalog import ExposureState
from .names import name_problem, scope_problem, split_scopes


def validate_wire_name(value: str) -> None:
    if value and (problem := name_problem(value)):
        raise ValidationError(problem[0].upper() + problem[1:] + ".", code="invalid_name")


def validate_scopes(value: str) -> None:
    problems = [problem for scope in value.split() if (problem := scope_problem(scope))]
    if problems:
        raise ValidationError("; ".join(problems) + ".", code="invalid_scope")


class ExposedTool(models.Model):
    """Whether and how one declared capability is offered over MCP.

    Rows are created from the declarations (on migrate and by `mcp_sync`); an
    administrator narrows or switches them off. Rows whose capability left the
    code are kept, marked stale, and never served.
    """

    key = models.CharField(
        _("capability"), max_length=200, unique=True, help_text=_("Identity of the declaration: app_label.name.")
    )
    enabled = models.BooleanField(_("enabled"), default=True)
    wire_name = models.CharField(
        _("tool name"),
        max_length=64,
        blank=True,
        validators=[validate_wire_name],
        help_text=_("Name clients see. Leave blank to use the name declared in code."),
    )
    title = models.CharField(_("title"), max_length=200, blank=True, help_text=_("Overrides the declared title."))
    description = models.TextField(
        _("description"), blank=True, help_text=_("Overrides the declared description (the docstring).")
    )
    extra_scopes = models.CharField(
        _("extra scopes"),
        max_length=500,
        blank=True,
        validators=[validate_scopes],
        help_text=_("Space-separated scopes required in addition to those declared in code."),
    )
    allowed_clients = models.ManyToManyField(
        oauth2_settings.APPLICATION_MODEL,
        blank=True,
        related_name="+",
        verbose_name=_("allowed OAuth clients"),
        help_text=_("If any are chosen, only these OAuth clients may see and call the tool (API keys may not)."),
    )
    stale = models.BooleanField(
        _("stale"), default=False, editable=False, help_text=_("The capability no longer exists in code.")
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        verbose_name = _("exposed tool")
        verbose_name_plural = _("exposed tools")
        ordering = ["key"]
        constraints = [
            models.UniqueConstraint(
                Lower("wire_name"),
                condition=~models.Q(wire_name=""),
                name="mcp_expose_tool_wire_name_ci_unique",
                violation_error_message=_("Another tool already uses this name (names are compared ignoring case)."),
            )
        ]

    def __str__(self) -> str:
        return self.wire_name or self.key

    @property
    def extra_scope_set(self) -> frozenset[str]:
        return split_scopes(self.extra_scopes)

    def exposure_state(self, allowed_client_ids: frozenset[str] = frozenset()) -> ExposureState:
        """The row as the catalog compiler reads it (pass the allowed clients' ids, prefetched)."""
        return ExposureState(
            key=self.key,
            enabled=self.enabled,
            wire_name=self.wire_name,
            title=self.title,
            description=self.description,
            extra_scopes=self.extra_scope_set,
            allowed_clients=allowed_client_ids,
        )

    def clean(self) -> None:
        super().clean()
        from .registry import registry

        if not self.wire_name:
            return
        folded = self.wire_name.casefold()
        overrides = dict(ExposedTool.objects.exclude(pk=self.pk).values_list("key", "wire_name"))
        for capability in registry:
            if capability.key != self.key and (overrides.get(capability.key) or capability.name).casefold() == folded:
                raise ValidationError(
                    {"wire_name": _("The tool %(key)s is already served under this name.") % {"key": capability.key}}
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
        cls, *, user: object, name: str, scopes: str = "", expires_in: timedelta | None = None
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

    def revoke(self) -> None:
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])

    @staticmethod
    def prefix_of(secret: str) -> str | None:
        """The lookup prefix embedded in a presented key, or None if it is not shaped like ours."""
        parts = secret.split("_", 2)
        if len(parts) != 3 or parts[0] != API_KEY_PREFIX or len(parts[1]) != 8:
            return None
        return parts[1]
