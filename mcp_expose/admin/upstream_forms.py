"""The registration form of an upstream server: its name and address checked, its secrets write-only and sealed,
and asked for again when the address moves to another origin."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from django import forms
from django.core.exceptions import ValidationError
from django.utils.translation import gettext_lazy as _

from mcp_expose.core.ssrf_guard import AddressRefused, connectable_address
from mcp_expose.models import UpstreamServer
from mcp_expose.upstream.headers import ENV_REFERENCE, parse_headers
from mcp_expose.upstream.sealing import seal
from mcp_expose.upstream.snapshots import unapprove_all


class SecretTextarea(forms.Textarea):
    """A textarea that never shows a value back: not the stored one, not one just submitted with an error."""

    def format_value(self, value: Any) -> None:
        return None


class UpstreamServerForm(forms.ModelForm):
    headers = forms.CharField(
        label=_("headers"),
        required=False,
        widget=SecretTextarea(attrs={"rows": 3, "autocomplete": "off"}),
        help_text=_(
            "One per line, 'Name: value', sent with every request when authentication is 'Static headers'. "
            "Stored sealed and never shown again: leave blank to keep the current ones (they are asked for again "
            "when the URL moves to another origin). A value 'env:MCP_UPSTREAM_<NAME>' is read from that "
            "environment variable when it is sent."
        ),
    )
    clear_headers = forms.BooleanField(label=_("remove the stored headers"), required=False)
    client_secret = forms.CharField(
        label=_("client secret"),
        required=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text=_(
            "Stored sealed and never shown again: leave blank to keep the current one (it is asked for again when "
            "the URL or the token endpoint moves to another origin). 'env:MCP_UPSTREAM_<NAME>' reads it from that "
            "environment variable when a token is asked for."
        ),
    )

    class Meta:
        model = UpstreamServer
        fields = [
            "name",
            "url",
            "enabled",
            "protocol",
            "authentication",
            "connect_timeout",
            "call_timeout",
            "oauth_token_url",
            "oauth_client_id",
            "oauth_scopes",
            "oauth_resource",
        ]

    # The admin's own address (scheme, host, port), set by the admin for the request: a URL there is a loop.
    own_origin: tuple[str, str, int | None] | None = None

    def clean_url(self) -> str:
        url = self.cleaned_data["url"]
        if self.own_origin is not None and origin_of(url) == self.own_origin:
            raise ValidationError(_("This is this server's own address: an upstream cannot be this server itself."))
        try:
            connectable_address(url)  # the form (validated already) and every address the host resolves to now
        except AddressRefused as exc:
            raise ValidationError(str(exc)) from None
        return url

    def clean_headers(self) -> dict[str, str] | None:
        text = self.cleaned_data.get("headers") or ""
        if not text.strip():
            return None
        try:
            return parse_headers(text)
        except ValueError as exc:
            raise ValidationError(str(exc)) from None

    def clean_client_secret(self) -> str:
        secret = str(self.cleaned_data.get("client_secret") or "").strip()
        if len(secret) > 4096 or any(ord(character) < 32 for character in secret):
            raise ValidationError(_("A client secret is at most 4096 characters, without control characters."))
        if secret.startswith("env:") and not ENV_REFERENCE.fullmatch(secret):
            raise ValidationError(_("Only env:MCP_UPSTREAM_<NAME> environment variables are read."))
        return secret

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("authentication") == UpstreamServer.Authentication.CLIENT_CREDENTIALS:
            if not cleaned.get("oauth_token_url"):
                self.add_error("oauth_token_url", _("Client credentials need the token endpoint."))
            if not cleaned.get("oauth_client_id"):
                self.add_error("oauth_client_id", _("Client credentials need the client id."))
            moved = self.moves_origin() or self._moves_token_origin()
            if not cleaned.get("client_secret") and (not self.instance.sealed_client_secret or moved):
                self.add_error(
                    "client_secret",
                    _("Enter the client secret again: the address moved.") if moved else _("Enter the client secret."),
                )
        has_headers = bool(cleaned.get("headers")) or (
            bool(self.instance.sealed_headers) and not cleaned.get("clear_headers")
        )
        if cleaned.get("authentication") == UpstreamServer.Authentication.HEADERS and not has_headers:
            self.add_error("headers", _("Give at least one header, or choose another authentication."))
        if (
            self.moves_origin()
            and self.instance.sealed_headers
            and not cleaned.get("headers")
            and not cleaned.get("clear_headers")
        ):
            # The stored secrets were given for the old address: never send them to a new one unasked.
            self.add_error("headers", _("The URL moves to another origin: enter the headers again, or remove them."))
        return cleaned

    def _moves_token_origin(self) -> bool:
        """Whether the token endpoint moves to another origin (from none to one included): the stored secret was
        given for the old one, whatever the authentication is set to now."""
        if not self.instance.pk or "oauth_token_url" not in self.cleaned_data:
            return False
        before = UpstreamServer.objects.get(pk=self.instance.pk).oauth_token_url
        after = self.cleaned_data["oauth_token_url"]
        return (bool(before) or bool(after)) and origin_of(before) != origin_of(after)

    def moves_origin(self) -> bool:
        if not self.instance.pk or "url" not in self.cleaned_data:
            return False
        return origin_of(UpstreamServer.objects.get(pk=self.instance.pk).url) != origin_of(self.cleaned_data["url"])

    def save(self, commit: bool = True) -> UpstreamServer:
        moved = self.moves_origin()
        server = super().save(commit=False)
        if self.cleaned_data.get("clear_headers"):
            server.sealed_headers = ""
        headers = self.cleaned_data.get("headers")
        if headers:
            server.sealed_headers = seal(json.dumps(headers))
        if self.cleaned_data.get("client_secret"):
            server.sealed_client_secret = seal(self.cleaned_data["client_secret"])
        elif moved or self._moves_token_origin():
            server.sealed_client_secret = ""  # never sent to an address it was not given for
        if commit:
            server.save()
        if moved:
            unapprove_all(server)
        return server


def origin_of(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port
