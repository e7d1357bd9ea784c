"""Watchpoints on logical tensors: a sharded gradient is judged whole, not shard by shard, and reported
once, by the lowest rank holding a part; on real tdbg-h5 dumps with layouts, truth from numpy."""
from __future__ import annotations

import multiprocessing as mp
import pickle
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
import pytest

from debugger.common.executors import Workers
from debugger.formats.parallel import MeshRecord
from debugger.model import open_dump
from debugger.watch import Watchpoint, scan
from debugger.watch.batch import run_chunk
from debugger.watch.compute import FileTask
from debugger.watch.session import ScanSession

from clirun import run_cli
from shard_dumps import Job, one_dim, write_job

MESH2 = {"dp": MeshRecord(("dp",), (2,), (0, 1))}
VANISHING = Watchpoint.parse("gradient_vanishing:abs_mean_lt=1e-7")
EXPLODING = Watchpoint.parse("gradient_exploding")


def _tiny_on(ranks: set[int], node: str = "up.weight.grad") -> Any:
    """A fault: the gradient's part on ``ranks`` is ~1e-12."""
    def alter(rank: int, it: int, name: str, local: np.ndarray) -> np.ndarray:
        return np.full_like(local, 1e-12) if name == node and rank in ranks and it == 1 else local
    return alter


def _nan_on(rank_: int, node: str = "up.weight.grad") -> Any:
    def alter(rank: int, it: int, name: str, local: np.ndarray) -> np.ndarray:
        if (rank, name, it) == (rank_, node, 1):
            local = local.copy()
            local.reshape(-1)[-1] = np.nan
        return local
    return alter


def _job() -> Job:
    return Job(MESH2, {"up.weight": ((4, 6), one_dim((4, 6), 0, 2))}, [0, 1])


@pytest.mark.parametrize("saved", ["values", "statistics"])
def test_a_vanishing_shard_of_a_healthy_gradient_is_no_hit(tmp_path: Any, saved: str) -> None:
    """Rank 1's half of the gradient is ~1e-12 (a shard-wise check fires there), but the whole gradient's
    mean |g| is ~0.04: the logical tensor is judged, and does not fire."""
    root = str(tmp_path / "d")
    job = write_job(root, _job(), saved=saved, alter=_tiny_on({1}))
    dump = open_dump(root)
    local = dump.rank(1).local_index[(0, 1)]
    shard = next(t for t in local if t.node == "up.weight.grad")
    assert float(np.abs(shard.source.stored_stats()["abs_mean"] if saved == "statistics"
                        else np.abs(shard.value()).mean())) < 1e-7          # the shard alone would fire
    whole = np.concatenate([job.truth[(1, "up.weight.grad")][:2], np.full((2, 6), 1e-12, np.float32)])
    assert np.abs(whole).mean() > 1e-2
    res = scan(dump, [VANISHING], jobs=1)
    assert res.hits == [] and res.errors == []


@pytest.mark.parametrize("saved", ["values", "statistics"])
def test_a_vanishing_logical_gradient_is_reported_once_by_the_owner(tmp_path: Any, saved: str) -> None:
    root = str(tmp_path / "d")
    write_job(root, _job(), saved=saved, alter=_tiny_on({0, 1}))
    res = scan(open_dump(root), [VANISHING], jobs=1)
    assert [(h.rank, h.iteration, h.node, h.shards) for h in res.hits] == [(0, 1, "up.weight.grad", (0, 1))]
    assert res.hits[0].actual["abs_mean_lt"] == pytest.approx(1e-12, rel=1e-5)
    assert res.to_dict()["hits"][0]["shards"] == [0, 1]


@pytest.mark.parametrize("saved", ["values", "statistics"])
def test_a_nan_in_one_shard_is_reported_once_on_the_logical_gradient(tmp_path: Any, saved: str) -> None:
    root = str(tmp_path / "d")
    write_job(root, _job(), saved=saved, alter=_nan_on(1))
    dump = open_dump(root)
    res = scan(dump, [EXPLODING], jobs=1)
    assert [(h.rank, h.node, h.shards) for h in res.hits] == [(0, "up.weight.grad", (0, 1))]
    # a scan of rank 1 alone: rank 1 is the lowest scanned rank holding a part, it reports the whole
    alone = scan(dump, [EXPLODING], ranks=[1], jobs=1)
    assert [(h.rank, h.node, h.shards) for h in alone.hits] == [(1, "up.weight.grad", (0, 1))]


def test_the_web_session_reports_a_logical_tensor_under_its_owner_only(tmp_path: Any) -> None:
    root = str(tmp_path / "d")
    write_job(root, _job(), alter=_nan_on(1))
    session = ScanSession(open_dump(root), watchpoints=[EXPLODING])
    session.check(1, [0, 1])
    assert session.hits(rank=1) == []
    session.check(0, [0, 1])
    assert [(h.hit.rank, h.hit.node) for h in session.hits()] == [(0, "up.weight.grad")]


def test_the_text_report_says_the_tensor_is_logical(tmp_path: Any) -> None:
    root = str(tmp_path / "d")
    write_job(root, _job(), alter=_nan_on(1))
    r = run_cli("scan", root, "--watch", "gradient_exploding", "--jobs", "1", "--no-cache")
    assert r.code == 1, r.err
    assert "[logical: shards on ranks 0-1]" in r.out, r.out


def test_logical_sources_travel_to_worker_processes(tmp_path: Any) -> None:
    """Workers get picklable tasks: a logical source pickles with its parts' sources and is read there,
    as on a Dask cluster; a scan whose every chunk goes to a process pool finds the same hits."""
    root = str(tmp_path / "d")
    params = {f"p{i}.weight": ((4, 6), one_dim((4, 6), 0, 2)) for i in range(8)}
    write_job(root, Job(MESH2, params, [0, 1]), alter=_nan_on(1, "p3.weight.grad"))
    dump = open_dump(root)
    ref = dump.rank(0).tensor(0, 1, "p3.weight.grad")
    task = pickle.loads(pickle.dumps(FileTask(ref.source)))
    got = run_chunk("file", [task]).unpack()[0]
    assert got.stats is not None and got.stats.nan == 1 and got.stats.count == 24
    pool = ProcessPoolExecutor(max_workers=2, mp_context=mp.get_context("fork"))
    with Workers(pool, 2, cluster=True, where="a test pool") as workers:
        res = scan(dump, [EXPLODING, Watchpoint.parse("tensor_too_large:max_gt=100")], workers=workers)
    assert [(h.rank, h.node, h.shards) for h in res.hits] == [(0, "p3.weight.grad", (0, 1))]
    assert res.files_checked > 16
