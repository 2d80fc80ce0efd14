"""What is exposed (admin-edited rows) and who may call (API keys)."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from oauth2_provider.settings import oauth2_settings

from .catalog import ExposureState
from .names import name_problem, scope_problem, split_scopes
from .registry import APPROVAL_PAGE_CHANNEL, CLIENT_CHANNEL


def validate_wire_name(value: str) -> None:
    if value and (problem := name_problem(value)):
        raise ValidationError(problem[0].upper() + problem[1:] + ".", code="invalid_name")


def validate_rate_limit(value: str) -> None:
    from .ratelimit import parse_rate

    if value:
        try:
            parse_rate(value)
        except ValueError as exc:
            raise ValidationError(str(exc), code="invalid_rate") from None


def validate_scopes(value: str) -> None:
    problems = [problem for scope in value.split() if (problem := scope_problem(scope))]
    if problems:
        raise ValidationError("; ".join(problems) + ".", code="invalid_scope")


class ConfirmationChannel(models.TextChoices):
    """Where a person confirms a call (the values of `registry.ConfirmationChannel`)."""

    CLIENT = CLIENT_CHANNEL, _("the client")
    APPROVAL_PAGE = APPROVAL_PAGE_CHANNEL, _("approval page, signed in")


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
    requires_confirmation = models.BooleanField(
        _("requires confirmation"),
        default=False,
        help_text=_("Ask a human before every call (tools that require it in code always do)."),
    )
    confirmation_channel = models.CharField(
        _("confirmation channel"),
        max_length=20,
        choices=ConfirmationChannel.choices,
        default=ConfirmationChannel.CLIENT,
        help_text=_(
            "Who says yes: the client (a form in it, or the approval page if it has none), or only the calling "
            "user, signed in on this site's approval page, whatever the client answers. The approval page switches "
            "confirmation on; tools whose code asks for it always use it."
        ),
    )
    rate_limit = models.CharField(
        _("rate limit"),
        max_length=20,
        blank=True,
        validators=[validate_rate_limit],
        help_text=_("Calls per caller, e.g. '60/min', '1000/day'. The stricter of this and the code's applies."),
    )
    timeout = models.FloatField(
        _("timeout (seconds)"),
        null=True,
        blank=True,
        validators=[MinValueValidator(0.1)],
        help_text=_("The shorter of this and the code's timeout applies."),
    )
    max_result_bytes = models.PositiveIntegerField(
        _("result size limit (bytes)"),
        null=True,
        blank=True,
        validators=[MinValueValidator(256)],
        help_text=_("Larger results are truncated. The smaller of this and the code's limit applies."),
    )
    read_only_hint = models.BooleanField(
        _("read-only hint"), null=True, blank=True, help_text=_("Override the declared hint; blank keeps it.")
    )
    destructive_hint = models.BooleanField(
        _("destructive hint"), null=True, blank=True, help_text=_("Override the declared hint; blank keeps it.")
    )
    idempotent_hint = models.BooleanField(
        _("idempotent hint"), null=True, blank=True, help_text=_("Override the declared hint; blank keeps it.")
    )
    open_world_hint = models.BooleanField(
        _("open-world hint"), null=True, blank=True, help_text=_("Override the declared hint; blank keeps it.")
    )
    log_argument_values = models.BooleanField(
        _("log argument values"),
        default=False,
        help_text=_("Record argument values in the usage log (keys that look secret are always redacted)."),
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
        permissions = [("try_exposedtool", _("Can call tools from the admin"))]
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
            requires_confirmation=self.requires_confirmation,
            confirmation_channel=APPROVAL_PAGE_CHANNEL if self.confirmation_channel == APPROVAL_PAGE_CHANNEL
            else CLIENT_CHANNEL,
            rate_limit=self.rate_limit,
            timeout=self.timeout,
            max_result_bytes=self.max_result_bytes,
            log_argument_values=self.log_argument_values,
            annotations={
                "read_only": self.read_only_hint,
                "destructive": self.destructive_hint,
                "idempotent": self.idempotent_hint,
                "open_world": self.open_world_hint,
            },
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
        _("credential"), max_length=64, help_text=_("The API key's prefix, or the access token's number; never the secret.")
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
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


class Confirmation(models.Model):
    """A human's yes or no to one call, asked through the client (elicitation) or an approval page.

    Single use: a confirmation moves from pending to approved or declined, and an
    approved one to consumed when the call runs, each move one conditional UPDATE,
    so a replay finds nothing to move.
    """

    class Channel(models.TextChoices):
        ELICITATION = "elicitation", _("client form")
        APPROVAL_PAGE = "approval_page", _("approval page")

    class Status(models.TextChoices):
        PENDING = "pending", _("pending")
        APPROVED = "approved", _("approved")
        DECLINED = "declined", _("declined")
        EXPIRED = "expired", _("expired")
        CONSUMED = "consumed", _("used")
        CLOSED = "closed", _("answered")

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    channel = models.CharField(_("channel"), max_length=20, choices=Channel.choices)
    status = models.CharField(_("status"), max_length=20, choices=Status.choices, default=Status.PENDING)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mcp_confirmations", verbose_name=_("user")
    )
    caller = models.CharField(_("caller"), max_length=200, help_text=_("The principal that asked, secret-free."))
    tool_key = models.CharField(_("capability"), max_length=200)
    tool_name = models.CharField(_("tool"), max_length=64)
    summary = models.TextField(_("what will happen"))
    arguments = models.JSONField(_("arguments"), default=dict)
    arguments_digest = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(_("asked"), auto_now_add=True)
    expires_at = models.DateTimeField(_("expires"))
    decided_at = models.DateTimeField(_("decided"), null=True, blank=True)
    used_at = models.DateTimeField(_("used"), null=True, blank=True)

    class Meta:
        verbose_name = _("confirmation")
        verbose_name_plural = _("confirmations")
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["user", "tool_key", "arguments_digest", "status"])]

    def __str__(self) -> str:
        return f"{self.tool_name} for {self.user} ({self.get_status_display()})"

    @property
    def is_expired(self) -> bool:
        return self.expires_at <= timezone.now()


class ToolCall(models.Model):
    """One row per tools/call, whatever its outcome: who called what, how it went, how fast."""

    class Outcome(models.TextChoices):
        OK = "ok", _("ok")
        INVALID_INPUT = "invalid_input", _("invalid input")
        PERMISSION_DENIED = "permission_denied", _("permission denied")
        NOT_FOUND = "not_found", _("not found")
        CONFLICT = "conflict", _("conflict")
        RATE_LIMITED = "rate_limited", _("rate limited")
        TIMEOUT = "timeout", _("timeout")
        CANCELLED = "cancelled", _("cancelled")
        CONFIRMATION_REQUIRED = "confirmation_required", _("confirmation required")
        INPUT_REQUIRED = "input_required", _("waiting for the client's answers")
        DECLINED = "declined", _("declined")
        UNKNOWN_TOOL = "unknown_tool", _("unknown tool")
        TOOL_ERROR = "tool_error", _("tool error")
        INTERNAL = "internal", _("internal error")

    created_at = models.DateTimeField(_("time"), default=timezone.now, db_index=True)
    # Looked up through the (tool_name, created_at) index below, whose leading column it is.
    tool_name = models.CharField(_("tool"), max_length=64)
    tool_key = models.CharField(_("capability"), max_length=200, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        verbose_name=_("user"),
    )
    username = models.CharField(_("username"), max_length=150, blank=True)
    auth_method = models.CharField(_("authenticated by"), max_length=20)
    client_id = models.CharField(_("OAuth client"), max_length=255, blank=True, db_index=True)
    api_key_prefix = models.CharField(_("API key"), max_length=16, blank=True)
    scopes = models.CharField(_("scopes"), max_length=1000, blank=True)
    outcome = models.CharField(_("outcome"), max_length=30, choices=Outcome.choices, db_index=True)
    error_code = models.CharField(_("error code"), max_length=50, blank=True)
    incident = models.CharField(_("incident"), max_length=32, blank=True)
    duration_ms = models.FloatField(_("duration (ms)"))
    argument_bytes = models.PositiveIntegerField(_("argument size"), default=0)
    result_bytes = models.PositiveIntegerField(_("result size"), default=0)
    argument_keys = models.JSONField(_("argument keys"), default=list)
    argument_values = models.JSONField(_("argument values"), null=True, blank=True)
    depth = models.PositiveSmallIntegerField(_("agent depth"), default=0)
    conversation_id = models.CharField(_("conversation"), max_length=128, blank=True, db_index=True)
    protocol_version = models.CharField(_("protocol"), max_length=20, blank=True)
    # Given to the call's record when it is made, so that writing the row again (a retry after a commit whose
    # answer was lost, a spill file replayed twice) adds nothing. Rows written before it existed have none.
    row_id = models.UUIDField(_("row id"), null=True, blank=True, unique=True, editable=False)

    class Meta:
        verbose_name = _("tool call")
        verbose_name_plural = _("tool calls")
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["tool_name", "created_at"])]

    def __str__(self) -> str:
        return f"{self.tool_name} by {self.username or self.auth_method}: {self.outcome}"


class ListingCount(models.Model):
    """tools/list calls in one hour, added to in the database by each process's tally: one UPDATE adds
    atomically whichever processes flush at once, and a row is neither evicted nor expired, as a cache
    counter is (the file and database caches add by reading then writing, which loses what another
    process added meanwhile and resets the key's expiry to the cache's default timeout)."""

    hour = models.DateTimeField(_("hour"), unique=True)
    calls = models.PositiveBigIntegerField(_("tools/list calls"), default=0)

    class Meta:
        verbose_name = _("tools/list calls per hour")
        verbose_name_plural = _("tools/list calls per hour")

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:00}: {self.calls}"


class RevisionStamp(models.Model):
    """The database's copy of a revision stamp (the catalog's, the credentials'): the cache holds the one every
    request compares, this one is read while the cache is unavailable, so that admin changes and revocations
    still reach every process (`revision`)."""

    key = models.CharField(_("key"), max_length=100, unique=True)
    value = models.CharField(_("stamp"), max_length=64)
    changed_at = models.DateTimeField(_("changed"), auto_now=True)

    class Meta:
        verbose_name = _("revision stamp")
        verbose_name_plural = _("revision stamps")

    def __str__(self) -> str:
        return f"{self.key}: {self.value}"


ARGUMENT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def validate_prompt_arguments(value: object) -> None:
    """[{"name": "customer", "description": "...", "required": true, "values": ["a", "b"]}, ...]"""
    if not isinstance(value, list):
        raise ValidationError(_("Write the arguments as a JSON list of objects."), code="invalid")
    seen: set[str] = set()
    for index, argument in enumerate(value):
        if not isinstance(argument, dict) or not isinstance(argument.get("name"), str):
            raise ValidationError(_("Argument %(n)d needs a \"name\".") % {"n": index + 1}, code="invalid")
        name = argument["name"]
        if not ARGUMENT_NAME.fullmatch(name):
            raise ValidationError(_("%(name)r is not a valid argument name (letters, digits, _).") % {"name": name})
        if name in seen:
            raise ValidationError(_("The argument %(name)r is declared twice.") % {"name": name})
        seen.add(name)
        unknown = set(argument) - {"name", "description", "required", "values"}
        if unknown:
            raise ValidationError(_("Unknown keys %(keys)s in argument %(name)r.") % {"keys": sorted(unknown), "name": name})
        if "values" in argument and not (
            isinstance(argument["values"], list) and all(isinstance(item, str) for item in argument["values"])
        ):
            raise ValidationError(_("\"values\" of %(name)r must be a list of strings.") % {"name": name})


class PromptTemplate(models.Model):
    """A prompt written by an administrator: a Django template with declared arguments."""

    name = models.CharField(_("name"), max_length=64, unique=True, validators=[validate_wire_name])
    title = models.CharField(_("title"), max_length=200, blank=True)
    description = models.TextField(_("description"), blank=True)
    arguments = models.JSONField(
        _("arguments"),
        default=list,
        blank=True,
        validators=[validate_prompt_arguments],
        help_text=_('A JSON list, e.g. [{"name": "customer", "description": "Who wrote in", "required": true, '
                    '"values": ["Ada", "Grace"]}]. "values" are offered as completions.'),
    )
    template = models.TextField(
        _("template"), help_text=_("The prompt's text. Use {{ argument }} to insert an argument; Django template syntax.")
    )
    enabled = models.BooleanField(_("enabled"), default=True)
    scopes = models.CharField(
        _("scopes"), max_length=500, blank=True, validators=[validate_scopes],
        help_text=_("Space-separated scopes a caller needs to see and use this prompt."),
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        verbose_name = _("prompt")
        verbose_name_plural = _("prompts")
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        super().clean()
        from .prompt_templates import try_render

        problem = try_render(self.template, self.arguments if isinstance(self.arguments, list) else [])
        if problem:
            raise ValidationError({"template": problem})
        from .registry import registry

        if any(capability.kind == "prompt" and capability.name == self.name for capability in registry):
            raise ValidationError({"name": _("A prompt declared in code already has this name.")})
