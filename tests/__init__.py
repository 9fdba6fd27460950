"""judgegraph's tests; ``tests.kit`` is what tests and benchmarks share (not in the wheel)."""
