"""tdbg's own dump format (HDF5): the one writer any recorder uses, and its reader.

Specification: ``docs/tdbg-h5-format.md``. ``FORMAT`` is the reader the format table imports. The names
below load on first use (PEP 562): recognising a dump (:mod:`.detect`) needs neither h5py nor numpy.
"""
from __future__ import annotations

import importlib
from typing import Any

__all__ = ["FORMAT", "VERSION", "Digest", "DumpWriter", "H5RankReader", "H5Tensor", "IterationWriter",
           "TdbgH5Format", "digest_of"]

_WHERE = {"VERSION": "layout", "Digest": "layout", "digest_of": "layout", "H5RankReader": "reader",
          "TdbgH5Format": "reader", "FORMAT": "reader", "H5Tensor": "tensor", "DumpWriter": "writer",
          "IterationWriter": "writer"}


def __getattr__(name: str) -> Any:
    """One of :data:`__all__`, imported from its module on first use."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the lazy ones included."""
    return sorted([*globals(), *__all__])
