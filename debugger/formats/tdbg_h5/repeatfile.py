"""An iteration file shaped like the one before, made from that file's image: a long run at one level writes
the same rows every step (the same tensors, dtypes and shapes), and only their numbers, digests, the
iteration and its facts change. Creating the file's tables and attributes anew costs HDF5 about five
times what rewriting their contents in a copy of the last image does; the result is the same file, made
by HDF5 itself (only what a shape key leaves free is written again: see :class:`Shape`)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import h5py
import numpy as np

from ..records import IterationFacts
from . import layout as L

_DIGEST_ONLY = np.dtype([("digest", f"S{2 * L.DIGEST_SIZE}")])
_DIGEST_TYPE = h5py.h5t.py_create(_DIGEST_ONLY)      # the index's digest column alone (HDF5 matches it by name)


@dataclass
class Template:
    """The image of an iteration file and the shape key it was written under."""

    shape: tuple[Any, ...]
    image: bytes
    extra: frozenset[int]       # graphs whose file holds a stats_extra table


def refill(t: Template, iteration: int, stats: dict[int, np.ndarray], extra: dict[int, np.ndarray],
           digests: dict[int, list[bytes]], facts: IterationFacts | None) -> bytes:
    """The image of iteration ``iteration``: ``t``'s file with these statistics, extra statistics and digests
    per graph (in its rows' order), and these facts."""
    fid = h5py.h5f.open_file_image(t.image, h5py.h5f.FILE_IMAGE_OPEN_RW)
    f = h5py.File(fid)
    try:
        f.attrs.modify("iteration", np.int64(iteration))
        if "facts" in f.attrs:
            del f.attrs["facts"]
        if facts is not None:
            f.attrs["facts"] = json.dumps(facts.to_dict(), sort_keys=True)
        for gid, table in stats.items():
            group = f[L.GRAPH_GROUP.format(gid)]
            group["stats"].id.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(table, np.float64))
            if gid in extra:
                group["stats_extra"].id.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(extra[gid], np.float64))
            column = np.empty(len(digests[gid]), _DIGEST_ONLY)
            column["digest"] = digests[gid]
            group["index"].id.write(h5py.h5s.ALL, h5py.h5s.ALL, column, mtype=_DIGEST_TYPE)
        f.flush()
        return bytes(fid.get_file_image())
    finally:
        f.close()
