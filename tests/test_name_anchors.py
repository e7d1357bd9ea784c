"""A name that only looks like a dump's own (a trailing newline: ``iteration_00000001.h5\\n``) is not read
as it: file and folder names are matched whole (``\\Z``, not ``$``, which also matches before a final
newline). Checked on a copy of each committed sample with such a decoy beside the real file."""
from __future__ import annotations

import os
import shutil

import hashlib

import numpy as np
import pytest

from debugger.model import open_dump

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = os.path.join(os.path.dirname(HERE), "dumps_sample")


def _copy(tmp_path, name: str) -> str:
    dst = str(tmp_path / name)
    shutil.copytree(os.path.join(SAMPLES, name), dst)
    return dst


def _hash(source) -> str:
    return hashlib.sha1(np.ascontiguousarray(source.array()).tobytes()).hexdigest()


def _values(root: str, it: int) -> dict:
    r = open_dump(root).rank(0)
    out = {}
    for gid in r.graph_ids:
        if it in r.iterations(gid):
            for key, ref in r.tensor_map(gid, it).items():
                out[(gid, *key)] = _hash(ref.source) if ref.source.has_values else ref.source.stored_stats()
    return out


@pytest.mark.parametrize("decoy", ["iteration_00000001.h5\n", "graph_1.h5\n"])
def test_tdbg_h5_decoy_with_a_newline_is_not_read(tmp_path, decoy: str) -> None:
    root = _copy(tmp_path, "torch_single")
    before = _values(root, 1)
    shutil.copy(os.path.join(root, "rank_0", "iteration_00000000.h5" if "iteration" in decoy else "graph_0.h5"),
                os.path.join(root, "rank_0", decoy))
    dump = open_dump(root)
    assert _values(root, 1) == before
    assert dump.rank(0).iterations() == list(range(8))


def test_mindspore_iteration_folder_with_a_newline_is_not_read(tmp_path) -> None:
    root = _copy(tmp_path, "single")
    net = os.path.join(root, "rank_0", "Net", "0")          # net name, graph id, then the iterations
    its = sorted(int(d) for d in os.listdir(net))
    before = _values(root, its[-1])
    shutil.copytree(os.path.join(net, str(its[0])), os.path.join(net, f"{its[-1]}\n"))
    assert open_dump(root).rank(0).iterations() == its
    assert _values(root, its[-1]) == before


def test_msprobe_step_folder_with_a_newline_is_not_read(tmp_path) -> None:
    root = str(tmp_path / "ms")
    shutil.copytree(os.path.join(SAMPLES, "msprobe", "mindspore_pynative_tensor"), root)
    steps = sorted(int(d[4:]) for d in os.listdir(root) if d.startswith("step"))
    before = _values(root, steps[-1])
    shutil.copytree(os.path.join(root, f"step{steps[0]}"), os.path.join(root, f"step{steps[-1]}\n"))
    assert open_dump(root).rank(0).iterations() == steps
    assert _values(root, steps[-1]) == before
