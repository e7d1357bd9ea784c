"""tdbg's own dump format (HDF5): the one writer any recorder uses, and its reader.

Specification: ``docs/tdbg-h5-format.md``. ``FORMAT`` is the reader the format table imports.
"""
from __future__ import annotations

from .layout import VERSION, Digest, digest_of
from .reader import H5RankReader, TdbgH5Format
from .tensor import H5Tensor
from .writer import DumpWriter, IterationWriter

FORMAT = TdbgH5Format()

__all__ = ["FORMAT", "VERSION", "Digest", "DumpWriter", "H5RankReader", "H5Tensor", "IterationWriter",
           "TdbgH5Format", "digest_of"]
