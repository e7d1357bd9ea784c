"""Fixtures of tests/compare; the shared helpers live in compare_kit.py (a unique module name)."""
from compare_kit import _cache_elsewhere, sample_copy  # noqa: F401
