"""A scan of logical tensors (a sharded parameter's parts on two ranks) on a real LocalCluster gives what a
local scan gives: the workers unpickle the logical sources and read every rank's part themselves."""
from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np
import pytest

pytest.importorskip("distributed")   # the tdbg[dask] extra (part of the test extra)

from distributed import get_task_stream  # noqa: E402

from debugger import open_dump  # noqa: E402
from debugger.stats.cache import StatsCache  # noqa: E402
from debugger.common.executors import client_workers  # noqa: E402
from debugger.formats.parallel import MeshRecord  # noqa: E402
from debugger.watch import Watchpoint, scan  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "parallel"))
from shard_dumps import Job, one_dim, write_job  # noqa: E402


def test_a_logical_scan_on_the_cluster_is_the_local_scan(local_cluster: Any, tmp_path: Any) -> None:
    def nan_on_rank_1(rank: int, it: int, node: str, local: np.ndarray) -> np.ndarray:
        if (rank, it, node) == (1, 1, "p5.weight.grad"):
            local = local.copy()
            local.reshape(-1)[0] = np.nan
        return local

    params = {f"p{i}.weight": ((6, 4), one_dim((6, 4), 0, 2)) for i in range(12)}
    root = str(tmp_path / "d")
    write_job(root, Job({"dp": MeshRecord(("dp",), (2,), (0, 1))}, params, [0, 1]), alter=nan_on_rank_1)
    wps = [Watchpoint.parse("gradient_exploding"), Watchpoint.parse("weight_too_large:max_gt=1e9")]
    want = scan(open_dump(root), wps, jobs=1, cache=StatsCache(enabled=False)).to_dict()
    with get_task_stream(local_cluster) as ts, client_workers(local_cluster) as workers:
        got = scan(open_dump(root), wps, cache=StatsCache(enabled=False), workers=workers).to_dict()
    assert sum(1 for t in ts.data if t["key"].startswith("run_chunk")) >= 1
    assert got == want
    assert [(h["rank"], h["node"], h["shards"]) for h in want["hits"]] == [(0, "p5.weight.grad", [0, 1])]
