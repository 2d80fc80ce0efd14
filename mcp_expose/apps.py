from __future__ import annotations

from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Model
from django.db.models.signals import m2m_changed, post_delete, post_migrate, post_save
from django.utils.translation import gettext_lazy as _


class McpExposeConfig(AppConfig):
    name = "mcp_expose"
    verbose_name = _("MCP exposure")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from mcp_expose import checks  # noqa: F401  (registers the system checks)
        from mcp_expose.core.conf import get_settings
        from mcp_expose.declare.discovery import autodiscover
        from mcp_expose.declare.registry import registry
        from mcp_expose.models import EndpointToolset, ExposedTool, PromptTemplate, UpstreamServer, UpstreamTool
        from mcp_expose.oauth import checks as oauth_checks  # noqa: F401
        from mcp_expose.signals import row_saved, sync_after_migrate, upstream_saved

        autodiscover(get_settings().AUTODISCOVER_MODULE, registry)
        problems = registry.problems()
        if problems:
            raise ImproperlyConfigured(
                "MCP declarations cannot be served:\n"
                + "\n".join(f"  [{check_id}] {message} {hint}" for check_id, message, hint in problems)
            )
        post_migrate.connect(sync_after_migrate, sender=self, dispatch_uid="mcp_expose.sync_after_migrate")
        post_save.connect(row_saved, sender=ExposedTool, dispatch_uid="mcp_expose.row_saved")
        post_delete.connect(row_saved, sender=ExposedTool, dispatch_uid="mcp_expose.row_deleted")
        post_save.connect(row_saved, sender=PromptTemplate, dispatch_uid="mcp_expose.prompt_saved")
        post_delete.connect(row_saved, sender=PromptTemplate, dispatch_uid="mcp_expose.prompt_deleted")
        m2m_changed.connect(
            row_saved, sender=ExposedTool.allowed_clients.through, dispatch_uid="mcp_expose.clients_changed"
        )
        post_save.connect(row_saved, sender=EndpointToolset, dispatch_uid="mcp_expose.toolset_saved")
        post_delete.connect(row_saved, sender=EndpointToolset, dispatch_uid="mcp_expose.toolset_deleted")
        m2m_changed.connect(
            row_saved, sender=EndpointToolset.capabilities.through, dispatch_uid="mcp_expose.toolset_chosen"
        )
        for model in (UpstreamServer, UpstreamTool):
            label = model._meta.model_name
            post_save.connect(upstream_saved, sender=model, dispatch_uid=f"mcp_expose.{label}_saved")
            post_delete.connect(row_saved, sender=model, dispatch_uid=f"mcp_expose.{label}_deleted")
        _watch_credentials()


def _watch_credentials() -> None:
    """Whatever decides who a bearer credential is and what it may do moves the credentials stamp."""
    from django.apps import apps
    from django.contrib.auth import get_user_model

    from mcp_expose.access.credential_cache import credentials_changed
    from mcp_expose.models import ApiKey

    user_model = get_user_model()
    models: list[type[Model]] = [ApiKey, user_model]
    relations = [
        getattr(user_model, name).through for name in ("groups", "user_permissions") if hasattr(user_model, name)
    ]
    if apps.is_installed("django.contrib.auth"):
        from django.contrib.auth.models import Group

        models.append(Group)
        relations.append(Group.permissions.through)
    if apps.is_installed("oauth2_provider"):
        from oauth2_provider.models import get_access_token_model, get_application_model

        models += [get_access_token_model(), get_application_model()]
    for model in models:
        label = model._meta.label_lower
        post_save.connect(credentials_changed, sender=model, dispatch_uid=f"mcp_expose.credentials.{label}.saved")
        post_delete.connect(credentials_changed, sender=model, dispatch_uid=f"mcp_expose.credentials.{label}.deleted")
    for relation in relations:
        m2m_changed.connect(
            credentials_changed, sender=relation, dispatch_uid=f"mcp_expose.credentials.{relation._meta.label_lower}"
        )
