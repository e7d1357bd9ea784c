"""msprobe (MindStudio Probe) dumps: step{N}/rank{R}/dump.json with .pt tensors or statistics only.

``FORMAT`` loads its reader on first use (PEP 562): recognising a dump (:mod:`.detect`) needs none of it.
"""
from __future__ import annotations

from typing import Any

__all__ = ["FORMAT"]


def __getattr__(name: str) -> Any:
    """``FORMAT``, its reader imported on first use."""
    if name == "FORMAT":
        from .reader import FORMAT
        return FORMAT
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
