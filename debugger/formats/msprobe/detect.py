"""Recognising an msprobe dump by its folders alone, without loading its reader (the format table
tries this on every path it is given)."""
from __future__ import annotations

from .layout import root_of

__all__ = ["root_of", "why_not"]


def why_not(path: str) -> str:
    """The one thing an msprobe dump needs."""
    return "no step{N}/rank{R} (or proc{PID}) folder with a dump.json"
