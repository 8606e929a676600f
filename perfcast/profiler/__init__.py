"""Measure models on the local device: ``measure`` (in process), ``run_isolated`` (subprocess),
``collect`` (a resumable sweep into the measurement store)."""

from perfcast.profiler.collect import CollectSettings, Sweep, collect, load_spec

__all__ = ["CollectSettings", "Sweep", "collect", "load_spec"]
