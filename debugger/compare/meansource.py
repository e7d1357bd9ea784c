"""The loss of a run across its ranks: the mean of each rank's scalar loss, as one tensor source.

Data-parallel ranks each see an equal share of the global batch, so the mean of their losses is the
loss one process would compute on the whole batch; tensor-parallel replicas hold the same value,
which the mean leaves unchanged. Values when every rank stored them, else the statistics (a scalar's
mean is its value).
"""
from __future__ import annotations

import hashlib
import math
from typing import TYPE_CHECKING, Iterator, Mapping, Sequence

from ..formats.base import TensorHeader, TensorSource

if TYPE_CHECKING:
    import numpy as np


class MeanSource(TensorSource):
    """The mean of scalar tensors held by several ranks."""

    def __init__(self, name: str, parts: Sequence[TensorSource]) -> None:
        if not parts:
            raise ValueError(f"{name}: a mean needs at least one part")
        self.name = name
        self.parts = tuple(parts)

    @property
    def identity(self) -> str:
        """Changes when any part does."""
        h = hashlib.blake2b(digest_size=16)
        for p in self.parts:
            h.update(p.identity.encode() + b"\n")
        return "mean:" + h.hexdigest()

    @property
    def location(self) -> str:
        """The parts' locations, for messages."""
        more = f" and {len(self.parts) - 1} more" if len(self.parts) > 1 else ""
        return f"{self.name} (mean over ranks; {self.parts[0].location}{more})"

    @property
    def stored_bytes(self) -> int:
        """Bytes of every part."""
        return sum(p.stored_bytes for p in self.parts)

    @property
    def has_values(self) -> bool:
        """Values when every part has them."""
        return all(p.has_values for p in self.parts)

    def header(self) -> TensorHeader:
        """A scalar of the first part's dtype."""
        return TensorHeader(self.parts[0].header().dtype, ())

    def array(self, mmap: bool = True) -> "np.ndarray":
        """The mean of the parts' values, in the parts' dtype."""
        import numpy as np
        if not self.has_values:
            raise self._no_values()
        vals = [float(np.asarray(p.array(mmap=False), np.float64).reshape(-1).mean()) for p in self.parts]
        return np.asarray(math.fsum(vals) / len(vals), dtype=self.header().dtype)

    def chunks(self, n: int) -> Iterator["np.ndarray"]:
        """The one value."""
        yield self.array().reshape(-1)

    def stored_stats(self) -> Mapping[str, float] | None:
        """The statistics of the mean (None when a part stores no finite mean)."""
        means = []
        for p in self.parts:
            st = p.stored_stats()
            m = st.get("mean") if st else None
            if m is None or not math.isfinite(m):
                return None
            means.append(float(m))
        v = math.fsum(means) / len(means)
        return {"count": 1, "nan": 0, "pos_inf": 0, "neg_inf": 0, "zeros": int(v == 0), "positives": int(v > 0),
                "negatives": int(v < 0), "min": v, "max": v, "mean": v, "abs_mean": abs(v), "std": 0.0,
                "l2norm": abs(v)}
