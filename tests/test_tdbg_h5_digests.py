"""tdbg-h5 values are checked against their stored digest where they are read (issue 37, item 8): an edit in
place is named, a dataset moved by one is read through HDF5, and a statistics-only row is never read."""
from __future__ import annotations

import os
from typing import Any

import h5py
import numpy as np
import pytest

from clirun import run_cli
from debugger.errors import CorruptFileError
from debugger.formats.base import ValuesUnavailableError
from debugger.formats.records import GraphRecord, NodeRecord, OutputType
from debugger.formats.tdbg_h5 import layout
from debugger.formats.tdbg_h5.reader import FORMAT
from debugger.formats.tdbg_h5.writer import DumpWriter

SMALL = {f"t{k}": np.arange(12, dtype=np.float32).reshape(4, 3) + k for k in range(3)}
BIG = np.random.default_rng(0).standard_normal((600, 1000)).astype(np.float32)   # 2.4 MB: chunked
CHANGED = "changed since it was written: its digest does not match"


def _graph() -> GraphRecord:
    """Every tensor a weight, so a scan reads each one's values."""
    nodes = [NodeRecord(name, "Parameter", "Default", outputs=[OutputType("float32", a.shape)], is_parameter=True,
                        has_default=True, kind="weight", param=name) for name, a in {**SMALL, "big": BIG}.items()]
    return GraphRecord(0, "g", nodes, [], "", [])


def _dump(root: str) -> str:
    """A one-iteration dump of SMALL (contiguous, read at their offsets) and BIG (chunked); its file."""
    with DumpWriter(root, rank=0, framework="PyTorch") as w:
        w.write_graph(_graph())
        with w.iteration(0) as it:
            for name, a in {**SMALL, "big": BIG}.items():
                it.add(0, name, "Parameter", "output", 0, values=a)
    return os.path.join(root, "rank_0", layout.iteration_file_name(0))


def _sources(root: str) -> dict[str, Any]:
    rank = FORMAT.open(root, root).ranks[0]
    return {t.node: t.source for t in rank.tensors(0, 0, None)}


def _drained(src: Any, n: int = 5) -> np.ndarray:
    return np.concatenate([c.copy() for c in src.chunks(n)])


def _edit(path: str, dataset: str, new: np.ndarray) -> None:
    """``f[dataset][...] = new``: the bytes change where they are, the index stays as written."""
    with h5py.File(path, "r+") as f:
        f[dataset][...] = new


def test_values_edited_in_place_are_named_not_read(tmp_path: Any) -> None:
    path = _dump(str(tmp_path / "d"))
    _edit(path, "graph_0/values/1", np.full((4, 3), np.nan, np.float32))
    src = _sources(str(tmp_path / "d"))
    for read in (lambda s: s.array(), _drained):
        with pytest.raises(CorruptFileError, match=CHANGED) as err:
            read(src["t1"])
        assert f"{path}:/graph_0/values/1" in str(err.value)
        assert np.array_equal(read(src["t0"]).reshape(4, 3), SMALL["t0"])    # the others still read


def test_a_chunked_dataset_edited_in_place_fails_before_its_last_piece(tmp_path: Any) -> None:
    """Streamed through HDF5, hashed as it comes; the error comes in place of the last piece, so a
    consumer zipping two tensors of the same size (compare) meets it too."""
    path = _dump(str(tmp_path / "d"))
    with h5py.File(path, "r+") as f:
        f["graph_0/values/3"][599, 999] = 7.0
    src = _sources(str(tmp_path / "d"))
    with pytest.raises(CorruptFileError, match=CHANGED):
        src["big"].array()
    n = 0
    with pytest.raises(CorruptFileError, match=CHANGED):
        for c in src["big"].chunks(100_000):
            n += c.size
    assert n < BIG.size
    clean = _dump(str(tmp_path / "clean"))
    other = _sources(os.path.dirname(os.path.dirname(clean)))["big"]
    with pytest.raises(CorruptFileError, match=CHANGED):
        for _ in zip(other.chunks(100_000), src["big"].chunks(100_000)):
            pass


def test_a_dataset_moved_by_an_edit_is_read_through_hdf5(tmp_path: Any) -> None:
    """Deleted and written again with its values: the stored offset now points at other bytes."""
    path = _dump(str(tmp_path / "d"))
    with h5py.File(path, "r+") as f:
        old = f["graph_0/values/1"].id.get_offset()
        del f["graph_0/values/1"]
        f["graph_0/filler"] = np.full((4, 3), -7.0, np.float32)   # takes the freed bytes
        f["graph_0/values/1"] = SMALL["t1"]
        assert f["graph_0/values/1"].id.get_offset() != old == f["graph_0/filler"].id.get_offset()
    src = _sources(str(tmp_path / "d"))
    assert np.array_equal(_drained(src["t1"]).reshape(4, 3), SMALL["t1"])    # the offset, then HDF5
    assert np.array_equal(src["t1"].array(), SMALL["t1"])                     # HDF5 at once: the offset is stale
    assert np.array_equal(src["t2"].array(), SMALL["t2"])


def test_a_dataset_replaced_with_other_values_is_named(tmp_path: Any) -> None:
    path = _dump(str(tmp_path / "d"))
    with h5py.File(path, "r+") as f:
        del f["graph_0/values/2"]
        f["graph_0/values/2"] = np.zeros((4, 3), np.float32)
    with pytest.raises(CorruptFileError, match=CHANGED):
        _sources(str(tmp_path / "d"))["t2"].array()


def test_a_version_1_file_is_checked_with_its_own_digest(tmp_path: Any) -> None:
    """Version 1 digests (blake2b) are checked too: a good one reads, an edited dataset is named."""
    from test_tdbg_h5 import _as_version_1

    root = str(tmp_path / "d")
    path = _dump(root)
    _as_version_1(root)
    _edit(path, "graph_0/values/0", np.zeros((4, 3), np.float32))
    src = _sources(root)
    assert np.array_equal(src["big"].array(), BIG)
    assert src["t0"].digest().startswith(layout.V1_DIGEST_PREFIX)
    with pytest.raises(CorruptFileError, match=CHANGED):
        src["t0"].array()
    assert np.array_equal(src["t1"].array(), SMALL["t1"])


def test_a_statistics_only_row_is_never_read_for_values(tmp_path: Any) -> None:
    root = str(tmp_path / "s")
    with DumpWriter(root, rank=0, saved="statistics") as w:
        with w.iteration(0) as it:
            it.add(0, "t", "Op", "output", 0, values=SMALL["t0"])
    src = _sources(root)["t"]
    assert not src.has_values and src.digest() and src.stored_stats()
    for read in (lambda s: s.array(), lambda s: next(s.chunks(4))):
        with pytest.raises(ValuesUnavailableError):
            read(src)


def test_a_scan_reports_the_changed_tensor_and_judges_none_of_its_bytes(tmp_path: Any) -> None:
    """The NaNs written into t1 would be an overflow hit; the scan says instead that t1 could not be checked."""
    root = str(tmp_path / "d")
    _edit(_dump(root), "graph_0/values/1", np.full((4, 3), np.nan, np.float32))
    r = run_cli("scan", root)
    assert "overflow: 1 hit" not in r.out and CHANGED in r.out, r.out
    assert r.code != 1
