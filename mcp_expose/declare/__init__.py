"""Declaration: what the project's code says can be exposed (the decorators, `expose_view`, `ModelTools`).

The registry of capabilities, their input and output schemas, and the adapters that turn a function, a Django
view, a DRF view or a model into one. It knows Python callables, DRF serializers and model fields; it imports
only `core`, and knows nothing of rows, callers' credentials or the protocol.
"""
