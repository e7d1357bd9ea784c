"""The web API shows a sharded parameter as its logical tensor (over real HTTP, the waitress server `tdbg
serve` runs), on a real tdbg-h5 dump of two ranks with their layouts; truth from numpy."""
from __future__ import annotations

import io
import json
import os
import sys
import urllib.parse
import urllib.request
from typing import Any, Iterator

import numpy as np
import pytest

from liveserver import LiveServer
from tdbg_web import create_app

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "parallel"))
from shard_dumps import Job, one_dim, write_job  # noqa: E402

from debugger.formats.parallel import MeshRecord  # noqa: E402


@pytest.fixture
def served(tmp_path: Any) -> Iterator[tuple[str, Job]]:
    """A two-rank job (``w`` (5, 4) Shard(0), ``b`` (6,) Shard(0)) served on 127.0.0.1."""
    job = Job({"dp": MeshRecord(("dp",), (2,), (0, 1))},
              {"w": ((5, 4), one_dim((5, 4), 0, 2)), "b": ((6,), one_dim((6,), 0, 2))}, [0, 1])
    root = str(tmp_path / "d")
    write_job(root, job)
    srv = LiveServer(create_app(root, {"CACHE_DIR": str(tmp_path / "cache")}))
    try:
        yield srv.url, job
    finally:
        srv.stop()


def _get(url: str, path: str, **query: Any) -> bytes:
    with urllib.request.urlopen(url + path.lstrip("/") + "?" + urllib.parse.urlencode(query), timeout=30) as r:
        assert r.status == 200
        return r.read()


def test_a_sharded_tensor_has_its_logical_shape_statistics_and_values(served: tuple[str, Job]) -> None:
    url, job = served
    full = job.truth[(1, "w.grad")]
    got = json.loads(_get(url, "api/ranks/1/graphs/0/tensor", node="w.grad", iteration=1))
    t = got["tensor"]
    assert t["shape"] == [5, 4] and t["size"] == 20 and t["rank"] == 1
    assert t["shards"]["shape"] == [5, 4] and t["shards"]["own_rank"] == 1
    assert [(p["rank"], p["local_shape"], p["index"]) for p in t["shards"]["pieces"]] == [
        (0, [3, 4], [[[0, 3]], [[0, 4]]]), (1, [2, 4], [[[3, 5]], [[0, 4]]])]
    assert got["stats"]["count"] == 20
    assert got["stats"]["mean"] == pytest.approx(float(full.astype(np.float64).mean()), rel=1e-6, abs=1e-7)
    values = json.loads(_get(url, "api/ranks/0/graphs/0/tensor/values", node="w.grad", iteration=1))
    np.testing.assert_array_equal(np.asarray(values["values"], np.float32), full)
    npy = np.load(io.BytesIO(_get(url, "api/ranks/1/graphs/0/tensor/npy", node="exp_avg.b", iteration=0)))
    np.testing.assert_array_equal(npy, job.truth[(0, "exp_avg.b")])


def test_the_node_view_lists_the_logical_tensor(served: tuple[str, Job]) -> None:
    url, _ = served
    node = json.loads(_get(url, "api/ranks/1/graphs/0/node", node="w", iteration=1))
    out = [t for t in node["tensors"] if t["io"] == "output"]
    assert out[0]["shape"] == [5, 4] and out[0]["shards"]["pieces"][1]["rank"] == 1
    act = json.loads(_get(url, "api/ranks/1/graphs/0/tensor", node="act", iteration=1))["tensor"]
    assert act["shards"] is None and act["shape"] == [2, 2]          # a rank's own tensor, as before
