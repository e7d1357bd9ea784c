"""Scans, comparisons and conversions on a real LocalCluster (2 worker processes) give what a local run gives."""
from __future__ import annotations

import os
import signal
from typing import Any

import pytest

pytest.importorskip("distributed")   # the tdbg[dask] extra (part of the test extra)

from distributed import WorkerPlugin, get_task_stream

from debugger import open_dump
from debugger.stats.cache import StatsCache
from debugger.compare import compare_ranks, compare_runs
from debugger.convert import convert
from debugger.common.executors import client_workers
from debugger.stats.core import tensor_stats
from debugger.watch import preset, scan
from scale_kit import local_scan, multi_rank_dump, same_converted


@pytest.fixture(scope="module")
def multi(tmp_path_factory: Any) -> str:
    """A generated 4-rank dump with a NaN on rank 2."""
    return multi_rank_dump(str(tmp_path_factory.mktemp("multi") / "dump"))


def _ran(ts: Any, prefix: str) -> int:
    """Tasks of ``prefix`` the cluster ran (from Dask's own task stream)."""
    return sum(1 for t in ts.data if t["key"].startswith(prefix))


@pytest.mark.parametrize("which", ["single", "dp2", "multi"])
def test_scan_on_the_cluster_is_the_local_scan(local_cluster: Any, sample_root: str, multi: str, which: str) -> None:
    dump = multi if which == "multi" else os.path.join(sample_root, which)
    want = local_scan(dump)
    with get_task_stream(local_cluster) as ts, client_workers(local_cluster) as workers:
        got = scan(open_dump(dump), preset("recommended"), cache=StatsCache(enabled=False), workers=workers).to_dict()
    assert _ran(ts, "run_chunk") >= 1
    assert got == want
    assert want["hits"]   # same hits in the same order, not two empty lists
    if which == "multi":
        first = want["hits"][0]
        assert (first["rank"], first["iteration"]) == (2, 1)


def test_statistics_computed_on_workers_are_merged_into_the_cache(local_cluster: Any, multi: str, tmp_path: Any) -> None:
    d = open_dump(multi)
    cache = StatsCache.for_dump(d.root, str(tmp_path / "c"))
    seen: list[tuple[int, int]] = []
    with client_workers(local_cluster) as workers:
        scan(d, preset("recommended"), cache=cache, workers=workers, progress=lambda a, b: seen.append((a, b)))
    assert seen and seen[-1][0] == seen[-1][1]           # progress as locally: ends at the total
    fresh = StatsCache.for_dump(d.root, str(tmp_path / "c"))   # what was written to disk, on the client
    refs = [t for r in d.ranks for t in r.tensors() if t.source.header().dtype.kind == "f"]
    assert len(refs) > 100
    for ref in refs[::7]:
        assert fresh.get(ref.identity) == tensor_stats(ref.value())
    assert not os.path.exists(os.path.join(multi, "stats.h5"))


def test_compare_on_the_cluster_is_the_local_compare(local_cluster: Any, sample_root: str, multi: str,
                                                     tmp_path: Any) -> None:
    other = multi_rank_dump(str(tmp_path / "b"), seed=1)
    with client_workers(local_cluster) as workers, get_task_stream(local_cluster) as ts:
        for dump in (os.path.join(sample_root, "dp2"), multi):
            want = compare_ranks(dump, jobs=1).to_dict(all_pairs=True)
            got = compare_ranks(dump, workers=workers).to_dict(all_pairs=True)
            assert got == want
            # passes folded, a chunk of ranks at a time (the CLI without --all): the same report
            folded = compare_ranks(dump, workers=workers, keep_passes=False).to_dict()
            assert folded == compare_ranks(dump, jobs=1).to_dict()
        want = compare_runs(multi, other, jobs=1).to_dict(all_pairs=True)
        got = compare_runs(multi, other, workers=workers).to_dict(all_pairs=True)
    assert got == want and want["first_divergence"] is not None
    assert _ran(ts, "compare_chunk") >= 3


def test_convert_on_the_cluster_writes_what_a_local_convert_writes(local_cluster: Any, multi: str, tmp_path: Any) -> None:
    d = open_dump(multi)
    here = convert(d, str(tmp_path / "here"))
    with client_workers(local_cluster) as workers, get_task_stream(local_cluster) as ts:
        there = convert(d, str(tmp_path / "there"), workers=workers)
    assert _ran(ts, "convert_rank") == len(d.rank_ids)
    h, t = here.to_dict(), there.to_dict()
    assert h.pop("target") != t.pop("target")
    assert h == t and h["tensors"] > 0
    same_converted(str(tmp_path / "here"), str(tmp_path / "there"))


class _KillFirst(WorkerPlugin):
    """Kills its worker process (SIGKILL) when the first task of ``prefix`` starts executing, once per cluster."""

    def __init__(self, marker: str, prefix: str) -> None:
        self.marker = marker
        self.prefix = prefix

    def transition(self, key: Any, start: str, finish: str, **kw: Any) -> None:
        if finish != "executing" or not str(key).startswith(self.prefix):
            return
        try:
            os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
        os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.parametrize("work", ["scan", "convert"])
def test_a_worker_killed_mid_task_loses_and_duplicates_nothing(local_cluster: Any, multi: str, tmp_path: Any,
                                                               work: str) -> None:
    import cloudpickle

    import test_local_cluster

    d = open_dump(multi)
    if work == "scan":
        want = local_scan(multi)
    else:
        want = convert(d, str(tmp_path / "here")).to_dict()
    marker = str(tmp_path / "killed")
    cloudpickle.register_pickle_by_value(test_local_cluster)   # the workers cannot import this test module
    local_cluster.register_plugin(_KillFirst(marker, "run_chunk" if work == "scan" else "convert_rank"), name="kill")
    try:
        with client_workers(local_cluster) as workers:
            if work == "scan":
                got = scan(d, preset("recommended"), cache=StatsCache(enabled=False), workers=workers).to_dict()
            else:
                got = convert(d, str(tmp_path / "there"), workers=workers).to_dict()
    finally:
        local_cluster.unregister_worker_plugin("kill")
        cloudpickle.unregister_pickle_by_value(test_local_cluster)
    assert os.path.exists(marker)          # a worker did die while running a task
    if work == "convert":
        assert want.pop("target") != got.pop("target")
        same_converted(str(tmp_path / "here"), str(tmp_path / "there"))
    assert got == want


def test_a_local_cluster_starts_quietly_beside_another_on_port_8787() -> None:
    """Dask's scheduler serves HTTP on 8787 by default; a second cluster on the machine must not warn or fail."""
    import socket
    import warnings

    from debugger.common.executors import start_local_cluster
    holder = socket.socket()
    try:
        holder.bind(("0.0.0.0", 8787))   # what another cluster on this machine would hold
        holder.listen()
    except OSError:
        pass   # something already holds it, which is the case under test
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            cluster = start_local_cluster(1)
        try:
            http = cluster.scheduler.http_server
            assert http.port != 8787 and http.address == "127.0.0.1", (http.address, http.port)
            assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        finally:
            cluster.close()
    finally:
        holder.close()
