"""One msprobe tensor: statistics from dump.json, values from its ``.pt`` file (PyTorch) or ``.npy`` file
(MindSpore) when the task saved one.

What msprobe's statistics can answer (``dumpjson.stored_stats``): ``count`` from the shape; ``max``,
``min``, ``mean`` and ``l2norm`` as recorded when max and min are finite (tdbg's value statistics are
over finite elements, msprobe's over all: they agree exactly then); NaN and Inf counts are 0 when
max and min are finite (torch.max and torch.min propagate NaN and show an Inf), and a lower bound of
1 when max or min is NaN or infinite (the exact count is not recorded). The sign counts are known
only when every element lies on one side of zero. ``std`` and ``abs_mean`` are never known.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Iterator, Mapping

import numpy as np

from ...errors import CorruptFileError
from ..base import TensorHeader, TensorSource
from ..npy import NpyTensor
from .dumpjson import tdbg_stats
from .ptfile import cached_layout, read_array, read_chunks


@dataclass(frozen=True)
class MsprobeTensor(TensorSource):
    """A tensor of dump.json: ``path`` is its ``.pt`` file ("" for statistics only). Plain fields: it pickles."""

    path: str
    size: int
    mtime_ns: int
    where: str                               # dump.json:<op key> <io> <slot>, for messages
    dtype_name: str                          # numpy dtype name ("" when msprobe's is unknown)
    shape: tuple[int, ...]
    raw: tuple[tuple[str, Any], ...]         # msprobe's Max/Min/Mean/Norm/md5 as recorded

    @cached_property
    def identity(self) -> str:  # type: ignore[override]
        """The .pt file's path, size and mtime; for statistics only, the entry and its statistics."""
        if self.path:
            return f"{self.path}|{self.size}|{self.mtime_ns}"
        return f"{self.where}|{self.raw!r}"

    def current_identity(self) -> str:
        """As :attr:`identity`, from a fresh stat of the .pt file."""
        if not self.path:
            return self.identity
        try:
            st = os.stat(self.path)
        except OSError:
            return self.identity
        return f"{self.path}|{st.st_size}|{st.st_mtime_ns}"

    @property
    def location(self) -> str:
        """The .pt file, or the dump.json entry."""
        return self.path or self.where

    @property
    def stored_bytes(self) -> int:
        """Bytes of the .pt file (0 for statistics only)."""
        return self.size if self.path else 0

    @property
    def has_values(self) -> bool:
        """Whether a .pt file holds the values."""
        return bool(self.path)

    def header(self) -> TensorHeader:
        """dtype and shape: from the .pt file when there is one (it is the truth), else from dump.json."""
        if self.path:
            if self._npy is not None:
                return self._npy.header()
            lay = cached_layout(self.path, self.size, self.mtime_ns)
            return TensorHeader(lay.np_dtype, lay.shape)
        if not self.dtype_name:
            raise CorruptFileError(self.where, "dtype not one tdbg reads")
        return TensorHeader(np.dtype(self.dtype_name), self.shape)

    def whole(self) -> tuple[TensorHeader, np.ndarray] | None:
        """A small .npy file's header and values from one read (a .pt file is read in chunks)."""
        npy = self._npy if self.path else None
        return None if npy is None else npy.whole()

    def stored_stats(self) -> Mapping[str, float] | None:
        """What msprobe recorded, in tdbg's names (see the module notes); None when the values are there
        (every statistic is then computed from them, msprobe's four add nothing)."""
        return None if self.path else self.recorded_stats()

    def recorded_stats(self) -> dict[str, float]:
        """msprobe's statistics in tdbg's names, whether or not the values are stored."""
        return tdbg_stats(self.raw, self.dtype_name, self.shape)

    def digest(self) -> str | None:
        """msprobe's checksum (summary_mode md5) with dtype and shape, when recorded."""
        md5 = dict(self.raw).get("md5")
        return f"{self.dtype_name}|{self.shape}|{md5}" if md5 else None

    @property
    def _npy(self) -> NpyTensor | None:
        """MindSpore's msprobe dumps save .npy files: the shared .npy reader."""
        return NpyTensor(self.path, self.size, self.mtime_ns) if self.path.endswith(".npy") else None

    def _layout(self) -> Any:
        if not self.path:
            raise self._no_values()
        try:
            st = os.stat(self.path)
        except OSError as exc:
            raise CorruptFileError(self.path, f"cannot read: {exc.strerror or exc}") from exc
        return cached_layout(self.path, st.st_size, st.st_mtime_ns)

    def array(self, mmap: bool = True) -> np.ndarray:
        """All values (read; a .pt storage is not memory-mapped)."""
        if self._npy is not None:
            return self._npy.array(mmap)
        return read_array(self.path, self._layout())

    def chunks(self, n: int) -> Iterator[np.ndarray]:
        """Elements in C order, at most ``n`` at a time."""
        if self._npy is not None:
            yield from self._npy.chunks(n)
            return
        yield from read_chunks(self.path, self._layout(), n)
