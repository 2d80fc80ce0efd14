"""Adapters that turn what a project already has (DRF views, Django views, models) into capabilities."""
