"""App config: the label `bench` makes the tool identities `bench.<function>`."""

from django.apps import AppConfig


class BenchConfig(AppConfig):
    name = "bench.benchapp"
    label = "bench"
    verbose_name = "Benchmark tools"
