"""tdbg-h5: an iteration file made from the last one's image (formats/tdbg_h5/repeatfile.py) is the file a
writer makes from nothing, object for object and value for value, whatever changes from one iteration to
the next (numbers, non-finite values, digests, facts) and whenever the rows change shape."""
from __future__ import annotations

import math
import os
from typing import Any

import h5py
import numpy as np
import pytest

from debugger.formats.records import IterationFacts
from debugger.formats.tdbg_h5 import layout, repeatfile
from debugger.formats.tdbg_h5.writer import DumpWriter
from debugger.stats.core import STAT_NAMES


def _rows(i: int, shape: tuple[int, ...] = (3, 4), extra: bool = False) -> list[tuple[Any, ...]]:
    """Iteration ``i``'s statistics rows: two graphs' worth of tensors, numbers that change every time."""
    rng = np.random.default_rng(i)
    out = []
    for gid, node, dims in ((0, "fc.weight", shape), (0, "fc.weight.grad", shape), (0, "loss", ()), (1, "head.bias", (4,))):
        stats: dict[str, float | None] = {n: float(v) for n, v in zip(STAT_NAMES, rng.normal(size=len(STAT_NAMES)))}
        if i % 3 == 1 and node == "loss":
            stats.update(min=None, max=None, mean=None, nan=1.0)     # a non-finite loss: no finite value
        digest = None if (i + len(node)) % 4 == 0 else f"{i:02x}{len(node):02x}".ljust(2 * layout.DIGEST_SIZE, "a")
        more = {"update_abs_mean": float(rng.random()), "update_rtol": 1e-7} if extra and node == "fc.weight" else None
        out.append((gid, node, "Parameter", "output", 0, stats, digest, "float32", dims, more))
    return out


def _facts(i: int) -> IterationFacts | None:
    return [None, IterationFacts(loss_scaler=True), IterationFacts(frozenset({"fc.weight", "head.bias"}))][i % 3]


# each iteration's rows: the shape stays, then a row's shape changes (in an iteration with facts, the next one
# without), then extra statistics appear, then back
PLAN = [dict()] * 4 + [dict(shape=(4, 4))] * 3 + [dict(extra=True)] * 3 + [dict()] * 2


def _write(root: str, iterations: range, fresh: bool) -> None:
    """The PLAN's iterations through one writer, or (``fresh``) each through a writer of its own."""
    w = None
    for i in iterations:
        if w is None or fresh:
            if w is not None:
                w.close()
            w = DumpWriter(root, rank=0, saved="statistics", in_memory=True)
        with w.iteration(i, replace=True) as it:
            it.ran(2)
            it.add_statistics(_rows(i, **PLAN[i]))
            facts = _facts(i)
            if facts is not None:
                it.facts(facts)
    assert w is not None
    w.close()


def _contents(path: str) -> dict[str, Any]:
    """Every object of an HDF5 file by name: its attributes and a dataset's values."""
    out: dict[str, Any] = {}
    with h5py.File(path, "r") as f:
        def visit(name: str, obj: Any) -> None:
            out[name] = (dict(obj.attrs), obj[()] if isinstance(obj, h5py.Dataset) else None)
        out["/"] = (dict(f.attrs), None)
        f.visititems(visit)
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) and a.dtype.names:
        return a.dtype == b.dtype and all(_same(a[n], b[n]) for n in a.dtype.names)
    if isinstance(a, np.ndarray) and a.dtype == object:
        return a.shape == b.shape and all(_same(x, y) for x, y in zip(a.ravel(), b.ravel()))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return bool(a == b)


def test_a_file_made_from_the_last_image_is_the_file_made_from_nothing(tmp_path: Any, monkeypatch: Any) -> None:
    refilled: list[int] = []
    real = repeatfile.refill
    monkeypatch.setattr(repeatfile, "refill", lambda t, i, *a: refilled.append(i) or real(t, i, *a))
    steps = range(len(PLAN))
    _write(str(tmp_path / "steady"), steps, fresh=False)
    assert refilled == [1, 2, 3, 5, 6, 8, 9, 11]      # every iteration shaped like the one before
    refilled.clear()
    _write(str(tmp_path / "fresh"), steps, fresh=True)
    assert refilled == []
    for i in steps:
        name = os.path.join("rank_0", layout.iteration_file_name(i))
        steady, fresh = _contents(str(tmp_path / "steady" / name)), _contents(str(tmp_path / "fresh" / name))
        assert _same(steady, fresh), f"iteration {i}"
        assert ("facts" in steady["/"][0]) == (_facts(i) is not None)


@pytest.mark.parametrize("change", ["node", "dtype", "ran"])
def test_a_file_of_another_shape_is_made_from_nothing(tmp_path: Any, monkeypatch: Any, change: str) -> None:
    refilled: list[int] = []
    real = repeatfile.refill
    monkeypatch.setattr(repeatfile, "refill", lambda t, i, *a: refilled.append(i) or real(t, i, *a))
    root = str(tmp_path / "d")
    with DumpWriter(root, rank=0, saved="statistics", in_memory=True) as w:
        for i in range(2):
            with w.iteration(i) as it:
                rows = _rows(i)
                if i == 1 and change == "node":
                    rows[0] = (0, "fc.bias", *rows[0][2:])
                elif i == 1 and change == "dtype":
                    rows[0] = (*rows[0][:7], "float64", *rows[0][8:])
                elif i == 1:
                    it.ran(7)
                it.add_statistics(rows)
    assert refilled == []
    with h5py.File(os.path.join(root, "rank_0", layout.iteration_file_name(1)), "r") as f:
        index = f["graph_0/index"][()]
        assert index["node"][0] == (b"fc.bias" if change == "node" else b"fc.weight")
        assert index["dtype"][0] == (b"float64" if change == "dtype" else b"float32")
        assert list(f.attrs["ran"]) == ([0, 1, 7] if change == "ran" else [0, 1])
