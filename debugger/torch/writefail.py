"""What the recorder does when the dump cannot be written (a full disk, a quota, a folder removed):
recording stops and training goes on, told once with what is safe on disk."""
from __future__ import annotations

import os
import warnings

from ..formats.tdbg_h5.series import SEGMENT_RE, SERIES_DIR


def last_series_step(rank_dir: str) -> int | None:
    """The last step of the series segments on disk (None: none), from their names."""
    try:
        names = os.listdir(os.path.join(rank_dir, SERIES_DIR))
    except OSError:
        return None
    lasts = [int(m.group(2)) for n in names if (m := SEGMENT_RE.match(n))]
    return max(lasts, default=None)


def say_writing_stopped(rank_dir: str, exc: BaseException, last: int | None, series: bool) -> None:
    """The one warning: the path, the error, the last iteration (and series step) written whole."""
    whole = f"iterations up to {last} are whole on disk" if last is not None else "no iteration reached the disk"
    if series:
        step = last_series_step(rank_dir)
        whole += f", the series up to step {step}" if step is not None else ", no step of the series"
    warnings.warn(f"tdbg recorder: writing {rank_dir} failed ({type(exc).__name__}: {exc}); {whole}. Recording "
                  "stops here; training goes on unrecorded", RuntimeWarning, stacklevel=4)
