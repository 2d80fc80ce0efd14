"""The Django admin for the app: a module per kind of row, each registering its own `ModelAdmin`.

Importing the package (as `admin.autodiscover()` does) registers them all.
"""

from mcp_expose.admin.credentials import ApiKeyAdmin
from mcp_expose.admin.endpoints import EndpointToolsetAdmin
from mcp_expose.admin.exposure import AppLabelFilter, ExposedToolAdmin
from mcp_expose.admin.prompts import PromptTemplateAdmin
from mcp_expose.admin.records import ConfirmationAdmin, CredentialLeakAdmin, ReadOnlyAdmin, ToolCallAdmin
from mcp_expose.admin.tasks import ToolTaskAdmin
from mcp_expose.admin.upstream import UpstreamServerAdmin, UpstreamToolAdmin

__all__ = [
    "ApiKeyAdmin",
    "AppLabelFilter",
    "ConfirmationAdmin",
    "CredentialLeakAdmin",
    "EndpointToolsetAdmin",
    "ExposedToolAdmin",
    "PromptTemplateAdmin",
    "ReadOnlyAdmin",
    "ToolCallAdmin",
    "ToolTaskAdmin",
    "UpstreamServerAdmin",
    "UpstreamToolAdmin",
]
