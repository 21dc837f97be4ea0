"""Benchmarks (not part of the test suite): python -m bench.<name>."""
