"""Transport: the protocol, spoken through the official SDK, and the ASGI entry that guards it.

`asgi` routes and guards each request (`edge`), `server` wires the SDK's server to the calls below, `fastpath`
answers the plainest stateless requests without it, `sessions` and `events` carry streams and notifications
between processes. The SDK is imported here (and in `core.asking`, `declare.uri_templates`, `outbound`).
"""
