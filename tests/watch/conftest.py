"""Fixtures of tests/watch; the shared helpers live in watch_kit.py (a unique module name)."""
from watch_kit import _cache_elsewhere, layout  # noqa: F401
