"""The web session's watchpoints name the same first hit as `tdbg scan`."""
from __future__ import annotations

import numpy as np

import dumpmaker
from tdbg_web.session import Workspace
from debugger import open_dump
from debugger.watch import Watchpoint, scan


def test_hits_follow_the_scan_order_a_relayed_collective_after_its_origin(tmp_path):
    """Rank 1's local gradient goes NaN in iteration 1; rank 0 sees it only through the AllReduce.
    Rank 0 sorts first by rank, but its AllReduce only relays the NaN: the origin on rank 1 comes first."""
    layers = (("fc1", 4, 4, "Sigmoid"), ("fc2", 4, 2, None))
    probe = open_dump(dumpmaker.make_dump(str(tmp_path / "probe"), layers=layers, iterations=1, batch=4, ranks=2))
    g = probe.ranks[0].graph(0)
    (local,) = [n.name for n in g.nodes("gradient") if n.param == "fc1.weight" and n.op_type == "MatMul"]
    shape = g.node(local).outputs[0].shape

    def values(rank, it, node, io, slot, default):
        if (rank, it, node, io) == (1, 1, local, "output"):
            return np.full(shape, np.nan, default.dtype)
        return None

    root = dumpmaker.make_dump(str(tmp_path / "d"), layers=layers, iterations=2, batch=4, ranks=2, values=values)
    ws = Workspace(root, use_cache=False)
    watch = ws.watch(None)
    watch.add([Watchpoint.parse("overflow")])
    for rank in (0, 1):
        watch.check(rank, [1])
    got = [(h.hit.rank, h.hit.node, h.hit.op_type) for h in watch.hits()]
    assert (0, "AllReduce") in {(r, op) for r, _, op in got}
    assert got[0] == (1, local, "MatMul")
    want = scan(open_dump(root), [Watchpoint.parse("overflow")], iterations={1}, jobs=1)
    assert got == [(h.rank, h.node, h.op_type) for h in want.hits]
