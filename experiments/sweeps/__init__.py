"""Sweeps: presets, their claim predicates, the results store, the runner and its execution backends."""
