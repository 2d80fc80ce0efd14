"""Invocation: one call, from its name and arguments to its recorded result.

`dispatch` runs the steps (policy, depth, rate limit, confirmation, validation), `invoke` runs the capability
in one worker-thread hop, `results` projects what it returned, and the usage modules record it. It never sees
HTTP or the SDK; it imports `access` and below.
"""
