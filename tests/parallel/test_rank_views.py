"""A rank's view is that rank's data (issue 37 item 6): a logical tensor opened on a rank is assembled from
that rank's own replicas, so the replica that diverged is seen where it diverged."""
from __future__ import annotations

import os

from clirun import run_cli

from debugger import open_dump

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "dumps_sample", "torch_2d")
PLANTED = "layers.0.down.bias"      # rank 1's tensor-parallel replica diverges from iteration 1 (make_torch_sample.py)


def test_each_rank_reads_its_own_replica_of_a_logical_tensor() -> None:
    dump = open_dump(SAMPLE)
    views = {}
    for r in dump.ranks:
        gid = max(r.graph_ids, key=lambda g: max(r.iterations(g), default=-1))
        t = r.tensor(gid, 1, PLANTED)
        assert t.is_logical and r.rank in {p.rank for p in t.source.parts}
        views[r.rank] = t.source.stored_stats()
    assert views[1] != views[0]                       # the planted replica, seen on its own rank
    assert views[2] == views[0] or views[3] == views[0]   # the other dp shard's replicas agree


def test_node_on_a_rank_shows_that_ranks_values() -> None:
    out = {r: run_cli("node", SAMPLE, PLANTED, "--rank", str(r)).out for r in (0, 1)}
    stats = {r: next(ln for ln in text.splitlines() if ln.strip().startswith("count")) for r, text in out.items()}
    assert stats[0] != stats[1] and "rank 1 holds" in out[1]
