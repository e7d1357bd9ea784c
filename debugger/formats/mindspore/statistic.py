"""``statistic.csv``: the statistics MindSpore writes per iteration dir when ``saved_data`` is
``statistic`` (instead of .npy files) or ``full`` (beside them), on GPU and Ascend.

The first ten columns are fixed in every version (``Op Type, Op Name, Task ID, Stream ID, Timestamp,
IO, Slot, Data Size, Data Type, Shape``); the statistic columns follow ``statistic_category``
(2.3+: default max, min, l2norm; 2.0-2.2: a fixed set), so they are read from the header:

==========================  ===========================================================
header                      tdbg statistic
==========================  ===========================================================
Max Value, Min Value        max, min
Avg Value                   mean
L2Norm Value                l2norm
Count                       count
NaN Count                   nan
Positive/Negative Inf Count pos_inf / neg_inf
Zero Count                  zeros
Positive/Negative Zero Count positives / negatives (they count the non-zero values of each sign)
MD5, SHA1 (hash columns)    an exact digest
==========================  ===========================================================

tdbg's value statistics are over finite elements: when the row says the tensor holds NaN or Inf,
max/min/mean/l2norm are dropped (MindSpore's treatment of them is not documented). With ``full``,
a tensor whose .npy file is there is read from it (tdbg computes every statistic from the values);
the row stands in for a missing .npy only.
"""
from __future__ import annotations

import csv
import io
import math
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Iterator, Mapping

from ...errors import CorruptFileError
from ..base import TensorHeader, TensorSource
from ..files import is_number, read_text
from .filenames import TensorFileName, dtype_from_field

if TYPE_CHECKING:   # a row's dtype is made when its header is asked for: listing needs no numpy
    import numpy as np

FILE_NAME = "statistic.csv"
FIXED = ("Op Type", "Op Name", "Task ID", "Stream ID", "Timestamp", "IO", "Slot", "Data Size", "Data Type", "Shape")
COLUMNS = {
    "max value": "max", "min value": "min", "avg value": "mean", "l2norm value": "l2norm", "count": "count",
    "nan count": "nan", "positive inf count": "pos_inf", "negative inf count": "neg_inf", "zero count": "zeros",
    "positive zero count": "positives", "negative zero count": "negatives",
}
_DIGESTS = ("md5", "sha1", "hash", "md5 value", "hash value")
_COUNTS = frozenset({"count", "nan", "pos_inf", "neg_inf", "zeros", "positives", "negatives"})


@dataclass(frozen=True)
class StatRow:
    """One row: the tensor it describes and what it says about it."""

    name: TensorFileName
    dtype: str | None
    shape: tuple[int, ...]
    stats: tuple[tuple[str, float], ...]
    digest: str
    where: str          # statistic.csv:<line>


def read_statistic_csv(path: str) -> tuple[list[StatRow], list[str]]:
    """Rows of a statistic.csv and warnings; CorruptFileError when it is not one."""
    st = os.stat(path)
    return _read(path, st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=64)
def _read(path: str, size: int, mtime_ns: int) -> tuple[list[StatRow], list[str]]:
    text = read_text(path, "csv")
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise CorruptFileError(path, "empty statistic.csv (no header)") from None
    except csv.Error as exc:
        raise CorruptFileError(path, f"unreadable csv ({exc})") from exc
    if tuple(header[:len(FIXED)]) != FIXED:
        raise CorruptFileError(path, f"not a MindSpore statistic.csv (header starts {', '.join(header[:4])!r})")
    extra = header[len(FIXED):]
    cols = [(i + len(FIXED), COLUMNS.get(h.lower())) for i, h in enumerate(extra)]
    digests = [i + len(FIXED) for i, h in enumerate(extra) if h.lower() in _DIGESTS or h.lower().startswith("hash")]
    unknown = [h for h, (_, n) in zip(extra, cols) if n is None and h.lower() not in _DIGESTS
               and not h.lower().startswith("hash")]
    warnings = [f"{path}: column(s) {', '.join(unknown)} not known to tdbg; ignored"] if unknown else []
    rows: list[StatRow] = []
    bad = 0
    try:
        for line, rec in enumerate(reader, start=2):
            if not rec or not any(x.strip() for x in rec):
                continue
            row = _row(rec, cols, digests, f"{path}:{line}")
            if row is None:
                bad += 1
                continue
            rows.append(row)
    except csv.Error as exc:
        warnings.append(f"{path}: unreadable csv after {len(rows)} rows ({exc}); the rest ignored")
    if bad:
        warnings.append(f"{path}: {bad} row(s) not understood; skipped")
    return rows, warnings


def _row(rec: list[str], cols: list[tuple[int, str | None]], digests: list[int], where: str) -> StatRow | None:
    if len(rec) < len(FIXED):
        return None
    op_type, op_name, task, stream, ts, io_, slot = (x.strip() for x in rec[:7])
    io_ = io_.lower()
    if io_ not in ("input", "output") or not all(is_number(x) for x in (task, stream, ts, slot)) or not op_name:
        return None
    dtype = dtype_from_field(rec[8].strip().replace("DT_", "")) if len(rec) > 8 else None
    shape = tuple(int(d) for d in re.findall(r"[0-9]+", rec[9])) if len(rec) > 9 else ()
    values: dict[str, float] = {}
    for i, name in cols:
        if name is None or i >= len(rec) or not rec[i].strip():
            continue
        try:
            v = float(rec[i])
        except ValueError:
            continue
        values[name] = int(v) if name in _COUNTS and math.isfinite(v) else v
    values.setdefault("count", math.prod(shape))
    if any(values.get(n) for n in ("nan", "pos_inf", "neg_inf")) or any(
            not math.isfinite(values[n]) for n in ("max", "min", "mean", "l2norm") if n in values):
        for n in ("max", "min", "mean", "l2norm"):
            values.pop(n, None)
    digest = next((rec[i].strip() for i in digests if i < len(rec) and rec[i].strip()), "")
    fname = TensorFileName(op_type, op_name, int(task), int(stream), int(ts), io_, int(slot), "DefaultFormat", dtype)
    return StatRow(fname, dtype, shape, tuple(sorted(values.items())), digest, where)


@dataclass(frozen=True)
class StatTensor(TensorSource):
    """A tensor known only by its statistic.csv row."""

    where: str
    dtype_name: str | None
    shape: tuple[int, ...]
    stats: tuple[tuple[str, float], ...]
    hash: str = ""

    @property
    def identity(self) -> str:
        """The row and what it says."""
        return f"{self.where}|{self.stats!r}|{self.hash}"

    @property
    def location(self) -> str:
        """``statistic.csv:<line>``."""
        return self.where

    @property
    def stored_bytes(self) -> int:
        """No values are stored."""
        return 0

    @property
    def has_values(self) -> bool:
        """Statistics only."""
        return False

    def header(self) -> TensorHeader:
        """dtype and shape from the row."""
        import numpy as np

        try:
            return TensorHeader(np.dtype(self.dtype_name or ""), self.shape)
        except TypeError:
            raise CorruptFileError(self.where, f"data type {self.dtype_name or '?'} is not one tdbg reads") from None

    def stored_stats(self) -> Mapping[str, float] | None:
        """The row's statistics in tdbg's names."""
        return dict(self.stats)

    def digest(self) -> str | None:
        """The row's hash column, with dtype and shape."""
        return f"{self.dtype_name}|{self.shape}|{self.hash}" if self.hash else None

    def array(self, mmap: bool = True) -> np.ndarray:
        """Never: statistics only."""
        raise self._no_values()

    def chunks(self, n: int) -> Iterator[np.ndarray]:
        """Never: statistics only."""
        raise self._no_values()
