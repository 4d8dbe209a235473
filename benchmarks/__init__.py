"""Measurements: speed and memory side by side with peers (see BENCHMARKS.md).

Each runnable file works as `python benchmarks/X.py` and as `python -m benchmarks.X`.
"""
