"""Helpers of tests/scale (a unique module name): the generated dumps, and results compared exactly."""
from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

import dumpmaker
from debugger import open_dump
from debugger.stats.cache import StatsCache
from debugger.watch import preset, scan

LAYERS = (("fc1", 64, 32, "ReLU"), ("fc2", 32, 16, "Sigmoid"), ("fc3", 16, 4, None))


def _nan_on_rank2(rank: int, iteration: int, node: str, io: str, slot: int, default: np.ndarray) -> Optional[np.ndarray]:
    """Rank 2 goes wrong at iteration 1: a NaN in fc2's output (a hit, and a first divergence)."""
    if rank == 2 and iteration == 1 and "fc2" in node and "MatMul" in node and io == "output":
        a = np.array(default, copy=True)
        a.flat[3] = np.nan
        return a
    return None


def multi_rank_dump(root: str, ranks: int = 4, iterations: int = 4, seed: int = 0) -> str:
    """A data-parallel dump in MindSpore's layout, one rank of which produces a NaN."""
    return dumpmaker.make_dump(root, ranks=ranks, iterations=iterations, layers=LAYERS, batch=8,
                               values=_nan_on_rank2, seed=seed)


def local_scan(dump: str) -> dict[str, Any]:
    """The reference: the recommended preset scanned in this process, no cache."""
    return scan(open_dump(dump), preset("recommended"), jobs=1, cache=StatsCache(enabled=False)).to_dict()


def same_converted(a: str, b: str) -> None:
    """Two converted dumps hold the same ranks, graphs, tensors, values and statistics."""
    da, db = open_dump(a), open_dump(b)
    assert da.rank_ids == db.rank_ids
    n = 0
    for r in da.rank_ids:
        ra, rb = da.rank(r), db.rank(r)
        assert ra.graph_ids == rb.graph_ids and ra.iterations() == rb.iterations()
        for it in ra.iterations():
            ta = sorted(ra.tensors(iteration=it), key=lambda t: (t.graph_id, t.node, t.io, t.slot))
            tb = sorted(rb.tensors(iteration=it), key=lambda t: (t.graph_id, t.node, t.io, t.slot))
            assert [(t.graph_id, t.node, t.io, t.slot) for t in ta] == [(t.graph_id, t.node, t.io, t.slot) for t in tb]
            for x, y in zip(ta, tb):
                assert np.array_equal(x.value(), y.value(), equal_nan=x.value().dtype.kind in "fc")
                assert _same(x.source.stored_stats(), y.source.stored_stats())
                n += 1
    assert n > 0


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)
