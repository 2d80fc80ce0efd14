"""The OAuth face a project wires in: DOT's URLs (`oauth.urls`), its settings for this resource
(`oauth.settings`) and their system checks (`oauth.checks`). Verifying tokens is `access.oauth_tokens`."""
