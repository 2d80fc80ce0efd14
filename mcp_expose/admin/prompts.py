"""Prompts written in the admin."""

from __future__ import annotations

from django.contrib import admin

from mcp_expose.models import PromptTemplate


@admin.register(PromptTemplate)
class PromptTemplateAdmin(admin.ModelAdmin):
    list_display = ["name", "enabled", "title", "scopes", "updated_at"]
    list_editable = ["enabled"]
    list_filter = ["enabled"]
    search_fields = ["name", "title", "description", "template"]
    fields = ["name", "enabled", "title", "description", "arguments", "template", "scopes"]
