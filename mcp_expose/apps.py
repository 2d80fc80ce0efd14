from __future__ import annotations

from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured
from django.db.models.signals import m2m_changed, post_delete, post_migrate, post_save
from django.utils.translation import gettext_lazy as _


class McpExposeConfig(AppConfig):
    name = "mcp_expose"
    verbose_name = _("MCP exposure")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
        from .conf import get_settings
        from .discovery import autodiscover
        from .models import ExposedTool, PromptTemplate
        from .oauth import checks as oauth_checks  # noqa: F401
        from .registry import registry
        from .signals import row_saved, sync_after_migrate

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
