"""Authorization: who is calling, and what they may see and call.

Credentials (API keys, OAuth access tokens for this resource) become a `Principal`; `policy` is the one
decision, used by listing and by calling alike; `stepup` says which scopes a refused call needs. It imports
`catalog` and below, never the calling machinery or the protocol.
"""
