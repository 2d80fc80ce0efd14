"""Compilation: the catalog, the immutable join of declared capabilities and the admin's exposure rows.

`compiled` joins them (pure: no database, no cache); its provider recompiles when the revision stamp
(`revision`) changes; `sync` makes the rows for new declarations. It imports `models`, `declare` and `core`.
"""
