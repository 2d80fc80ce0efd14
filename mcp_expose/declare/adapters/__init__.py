"""Adapters that turn what a project already has (DRF views, Django views, models) into capabilities.

Each builds a capability's signature from the view's own serializers, routes and filters, and calls the real
view in-process. Part of `declare`: they import `declare` and `core` only.
"""
