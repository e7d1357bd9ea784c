"""msprobe (MindStudio Probe) dumps: step{N}/rank{R}/dump.json with .pt tensors or statistics only.

``FORMAT`` loads its reader on first use (PEP 562): recognising a dump (:mod:`.detect`) needs none of it.
"""
from __future__ import annotations

from ...lazy import lazy_names

__all__ = ["FORMAT"]

__getattr__, __dir__ = lazy_names(__name__, {"FORMAT": "reader"}, __all__)
