"""The app's models: what is exposed and how, who may call, and what was called.

Each kind lives in its own module; this package is where Django, the migrations and the rest of the code find them.
"""

from mcp_expose.models.confirmations import Confirmation
from mcp_expose.models.credentials import API_KEY_PREFIX, ApiKey, ApiKeyQuerySet, CredentialLeak, hash_api_key
from mcp_expose.models.endpoints import EndpointToolset
from mcp_expose.models.exposure import ConfirmationChannel, ExposedTool
from mcp_expose.models.prompts import PromptTemplate
from mcp_expose.models.revision import RevisionStamp
from mcp_expose.models.tasks import ToolTask, new_task_id
from mcp_expose.models.upstream import UpstreamServer, UpstreamTool, validate_server_name, validate_upstream_url
from mcp_expose.models.usage import ListingCount, ToolCall
from mcp_expose.models.validators import (
    ARGUMENT_NAME,
    validate_prompt_arguments,
    validate_rate_limit,
    validate_scopes,
    validate_tags,
    validate_wire_name,
)

__all__ = [
    "UpstreamServer",
    "UpstreamTool",
    "validate_server_name",
    "validate_upstream_url",
    "API_KEY_PREFIX",
    "ARGUMENT_NAME",
    "ApiKey",
    "ApiKeyQuerySet",
    "Confirmation",
    "ConfirmationChannel",
    "CredentialLeak",
    "EndpointToolset",
    "ExposedTool",
    "ListingCount",
    "PromptTemplate",
    "RevisionStamp",
    "ToolCall",
    "ToolTask",
    "new_task_id",
    "hash_api_key",
    "validate_prompt_arguments",
    "validate_rate_limit",
    "validate_scopes",
    "validate_tags",
    "validate_wire_name",
]
