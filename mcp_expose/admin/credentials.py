"""API keys in the admin: a secret shown once when the key is made, its status, and revoking."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.db.models import ForeignKey, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.cache import patch_cache_control
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from mcp_expose.models import ApiKey


class UserByUsername(forms.ModelChoiceField):
    """A user typed by username (the user model's `USERNAME_FIELD`)."""

    def __init__(self, **kwargs: Any) -> None:
        model = get_user_model()
        super().__init__(
            queryset=model._default_manager.all(),
            to_field_name=model.USERNAME_FIELD,
            widget=forms.TextInput(attrs={"autocomplete": "off", "class": "vTextField"}),
            label=_("user"),
            help_text=_("The username of the user the key acts as."),
            **kwargs,
        )

    def clean(self, value: Any) -> Any:
        try:
            return super().clean(value.strip() if isinstance(value, str) else value)
        except forms.ValidationError as error:
            if getattr(error, "code", None) == "invalid_choice":
                raise forms.ValidationError(
                    _("No user has the username %(name)s."), code="invalid_choice", params={"name": repr(value)}
                ) from None
            raise


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "prefix", "scopes", "status", "expires_at", "last_used_at", "created_at"]
    list_filter = ["revoked_at", "expires_at"]
    search_fields = ["name", "prefix", "user__username", "scopes"]
    actions = ["revoke_selected"]
    readonly_fields = ["prefix", "revoked_at", "revoked_reason", "last_used_at", "created_at"]
    created_template = "admin/mcp_expose/apikey/created.html"

    def get_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> list[Any]:
        if obj is None:
            # Only a superuser may create a key that acts as someone else.
            owner = ["user"] if request.user.is_superuser else []
            return ["name", *owner, "scopes", "expires_at"]
        return [
            "name",
            "user",
            "prefix",
            "scopes",
            "expires_at",
            "revoked_at",
            "revoked_reason",
            "last_used_at",
            "created_at",
        ]

    def formfield_for_foreignkey(self, db_field: ForeignKey, request: HttpRequest, **kwargs: Any) -> Any:
        """The owner by username, as people know them: a raw id box made `admin` fail with "Select a valid
        choice", and a select box would list every user of a large site."""
        if db_field.name != "user":
            return super().formfield_for_foreignkey(db_field, request, **kwargs)
        return UserByUsername(initial=request.user.get_username())

    def get_readonly_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> list[str]:
        # A key's owner never changes: moving a key would hand its holder another user's rights.
        return [*self.readonly_fields, "user"] if obj is not None else list(self.readonly_fields)

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApiKey]:
        keys = super().get_queryset(request)
        return keys if request.user.is_superuser else keys.filter(user=request.user)

    @admin.display(description=_("status"))
    def status(self, obj: ApiKey) -> str:
        if obj.revoked_at is not None:
            return str(_("revoked"))
        if not obj.is_usable:
            return str(_("expired or user inactive"))
        return str(_("active"))

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if not change:
            if not request.user.is_superuser:
                obj.user = cast(Any, request.user)  # a staff member: signed in
            request._mcp_api_key_secret = obj.assign_secret()  # type: ignore[attr-defined]
        super().save_model(request, obj, form, change)

    def response_add(self, request: HttpRequest, obj: ApiKey, post_url_continue: str | None = None) -> HttpResponse:
        """Show the secret in this response only; it is not stored and cannot be shown again."""
        secret = getattr(request, "_mcp_api_key_secret", None)
        if secret is None:
            return super().response_add(request, obj, post_url_continue)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": _("API key created"),
            "api_key": obj,
            "secret": secret,
        }
        response = TemplateResponse(request, self.created_template, context)
        patch_cache_control(response, no_store=True)
        return response

    @admin.action(description=_("Revoke selected API keys"), permissions=["change"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        revoked = 0
        for key in queryset.filter(revoked_at__isnull=True):
            key.revoke(reason=str(_("Revoked in the admin.")))
            self.log_change(request, key, [{"changed": {"fields": ["revoked_at", "revoked_reason"]}}])
            revoked += 1
        self.message_user(
            request,
            ngettext("%(count)d API key revoked.", "%(count)d API keys revoked.", revoked) % {"count": revoked},
            messages.SUCCESS,
        )
