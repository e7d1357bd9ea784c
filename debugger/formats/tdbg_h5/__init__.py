"""tdbg's own dump format (HDF5): the one writer any recorder uses, and its reader.

Specification: ``docs/tdbg-h5-format.md``. ``FORMAT`` is the reader the format table imports. The names
below load on first use (PEP 562): recognising a dump (:mod:`.detect`) needs neither h5py nor numpy.
"""
from __future__ import annotations

from ...lazy import lazy_names

__all__ = ["FORMAT", "VERSION", "Digest", "DumpWriter", "H5RankReader", "H5Tensor", "IterationWriter",
           "TdbgH5Format", "digest_of"]

_WHERE = {"VERSION": "layout", "Digest": "layout", "digest_of": "layout", "H5RankReader": "reader",
          "TdbgH5Format": "reader", "FORMAT": "reader", "H5Tensor": "tensor", "DumpWriter": "writer",
          "IterationWriter": "writer"}

__getattr__, __dir__ = lazy_names(__name__, _WHERE, __all__)
