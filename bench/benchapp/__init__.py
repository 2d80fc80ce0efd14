"""A bench-only Django app: the 200 trivial tools of the tools/list workload and a one-row ORM read.

Installed only by `bench.settings`; never part of the demo or the package.
"""
