"""A tensor's statistics have one source (debugger/stats/service.py): the scan, the web's tensor view, `tdbg node`
and convert give the same bits for the same tensor, and no other module runs the statistics pass over a dump's
tensor (read with ``ast``)."""
from __future__ import annotations

import ast
import math
import os
from typing import Any

import pytest

from clirun import run_cli
from debugger import open_dump
from debugger.common.executors import Workers
from debugger.stats import service
from debugger.stats.cache import StatsCache
from debugger.watch.batch import Batch
from tdbg_web import create_app

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Where the statistics pass may run outside debugger/stats/, and why: each of these reads no dump tensor
ALLOWED = {
    ("debugger/formats/tdbg_h5/writer.py", "stats_of_chunks"): "the writer's pass over the chunks it stores",
    ("debugger/torch/devstats.py", "tensor_stats"): "a live tensor of the training, not a dump's",
    ("debugger/torch/devstats.py", "stats_in_threads"): "a big live tensor, two threads",
    ("debugger/query/tensors.py", "tensor_stats"): "the difference of two tensors, which no dump stores",
    ("debugger/model/stepseries.py", "tensor_stats"): "a weight's update, a difference too",
}
PASSES = ("stats_of_chunks", "compute_stats", "tensor_stats", "stats_in_threads")


def _calls(root: str) -> set[tuple[str, str]]:
    """(file, function) of each call of a statistics pass outside debugger/stats/."""
    found = set()
    for folder in ("debugger", "web"):
        for d, _, names in os.walk(os.path.join(root, folder)):
            for n in names:
                path = os.path.join(d, n)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                if not n.endswith(".py") or rel.startswith("debugger/stats/"):
                    continue
                with open(path, encoding="utf-8") as f:
                    tree = ast.parse(f.read(), rel)
                for node in ast.walk(tree):
                    if isinstance(node, ast.Call):
                        name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                        if name in PASSES:
                            found.add((rel, name))
    return found


def test_no_other_module_computes_a_dump_tensors_statistics():
    assert _calls(ROOT) <= set(ALLOWED), sorted(_calls(ROOT) - set(ALLOWED))


def test_the_call_check_sees_a_new_call(tmp_path: Any):
    (tmp_path / "debugger" / "watch").mkdir(parents=True)
    (tmp_path / "web").mkdir()
    (tmp_path / "debugger" / "watch" / "own.py").write_text("from ..stats.core import tensor_stats\nx = tensor_stats(a)\n")
    assert _calls(str(tmp_path)) == {("debugger/watch/own.py", "tensor_stats")}


@pytest.fixture(scope="module")
def big_dump(tmp_path_factory: Any) -> str:
    """A MindSpore-layout dump (no statistics stored) whose fc1 weight (300,000 float32) spans two CHUNKs."""
    import dumpmaker

    return dumpmaker.make_dump(str(tmp_path_factory.mktemp("service") / "dump"), iterations=2,
                               layers=(("fc1", 600, 500, "Sigmoid"), ("fc2", 500, 2, None)))


def _weight(dump_root: str) -> Any:
    rank = open_dump(dump_root).rank(0)
    return next(r for r in rank.tensors(iteration=1) if r.node.endswith("fc1.weight") and math.prod(r.shape) > 1 << 18)


def test_scan_web_node_and_convert_give_the_same_bits(big_dump: str, tmp_path: Any):
    ref = _weight(big_dump)
    truth = service.statistics(ref.source).to_dict()
    assert truth["count"] == math.prod(ref.shape) and truth["min"] is not None

    batch = Batch(StatsCache(enabled=False))          # the scan: planned, read by its workers, merged
    batch.want_stats(ref)
    batch.finish(batch.start(Workers(None, 1)))
    scanned, err = batch.stats(ref)
    assert err is None and scanned is not None and scanned.to_dict() == truth

    app = create_app(big_dump, {"TESTING": True, "CACHE_DIR": str(tmp_path / "cache")})
    with app.test_client() as c:                      # the web's tensor view, through its cache, twice
        url = (f"/api/ranks/0/graphs/{ref.graph_id}/tensor?node={ref.node}&io={ref.io}&slot={ref.slot}"
               f"&iteration={ref.iteration}")
        for _ in range(2):
            got = c.get(url, headers={"Host": "127.0.0.1"})
            assert got.status_code == 200, got.get_data(as_text=True)[:500]
            assert got.get_json()["stats"] == truth

    out = str(tmp_path / "converted")                 # convert: the writer's pass over the chunks it stores
    assert run_cli("convert", big_dump, out, "--statistics").code == 0
    converted = next(r for r in open_dump(out).rank(0).tensors(iteration=1) if r.node == ref.node and r.io == ref.io)
    stored = service.stored(converted.source)
    assert stored is not None and stored.to_dict() == truth


def test_the_histogram_comes_from_the_service_in_chunks_equal_to_numpy_over_the_whole(tmp_path: Any):
    """The web's histogram is the service's, binned chunk by chunk over the statistics' range: the very counts
    and edges of one numpy histogram over every finite value (a tensor over two CHUNKs, with NaN and Inf
    planted); a range that leaves values out (rounded stored statistics) is measured again, never cuts them."""
    import dataclasses

    import numpy as np

    from debugger.stats.core import histogram

    import dumpmaker

    def planted(rank: int, iteration: int, node: str, io: str, slot: int, default: Any) -> Any:
        if node.endswith("fc1.weight") and default is not None and default.size > 1 << 18:
            default = default.copy()
            default.reshape(-1)[[5, 1 << 18, -3]] = (np.nan, np.inf, -np.inf)
        return default

    dump = dumpmaker.make_dump(str(tmp_path / "planted"), iterations=2, values=planted,
                               layers=(("fc1", 600, 500, "Sigmoid"), ("fc2", 500, 2, None)))
    ref = _weight(dump)
    whole = np.array(ref.value(), dtype=np.float32).reshape(-1)
    stats = service.statistics(ref.source)
    assert stats.nan == 1 and stats.pos_inf == 1 and stats.neg_inf == 1
    assert service.histogram(ref.source, stats, 37) == histogram(whole, 37)
    narrow = dataclasses.replace(stats, min=float(np.sort(whole)[10]))     # 10 values below "min"
    assert service.histogram(ref.source, narrow, 37) == histogram(whole, 37)

    app = create_app(dump, {"TESTING": True, "CACHE_DIR": str(tmp_path / "cache")})
    with app.test_client() as c:
        url = (f"/api/ranks/0/graphs/{ref.graph_id}/tensor?node={ref.node}&io={ref.io}&slot={ref.slot}"
               f"&iteration={ref.iteration}")
        got = c.get(url, headers={"Host": "127.0.0.1"}).get_json()
    bins = len(got["histogram"]["counts"])
    assert got["histogram"] == histogram(whole, bins)
