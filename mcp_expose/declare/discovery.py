"""Import every installed app's declaration module, Django-admin style."""

from __future__ import annotations

from importlib import import_module

from django.apps import apps
from django.utils.module_loading import module_has_submodule

from mcp_expose.declare.registry import CapabilityRegistry


def autodiscover(module_name: str, registry: CapabilityRegistry) -> None:
    """Import `<app>.<module_name>` for each app. A missing module is fine; a broken one raises.

    When a module fails, what it registered before failing is rolled back, so a
    later retry (the dev server's reloader) does not see half a module twice.
    """
    for app_config in apps.get_app_configs():
        before = registry.snapshot()
        try:
            import_module(f"{app_config.name}.{module_name}")
        except Exception:
            registry.restore(before)
            if module_has_submodule(app_config.module, module_name):
                raise
