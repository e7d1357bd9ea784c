"""The `overflow` watchpoint finds where non-finite values start: the first kernel in execution
order whose inputs are finite and whose outputs are not (file timestamps do not follow execution
order), or a data input that arrives non-finite."""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import pytest

from watch_kit import BATCH, F32, LAYERS, Layout, Plant, file_timestamp, hit_keys, make, ref_of, run, wp

import dumpmaker
from debugger import open_dump
from debugger.watch.registry import preset


def diverge(lay: Layout, origin: str, k: int, *, bad: float = math.nan, inputs: bool = False,
            rank: int | None = None) -> Callable[..., Any]:
    """values= for a run that goes non-finite at ``origin`` in iteration ``k``: from there on every kernel
    output is ``bad`` (and, as real training does, the weights the updates write). With ``inputs`` every
    float kernel input after the origin is ``bad`` too; otherwise inputs follow from their producers (the
    weights forward kernels read in iteration k are still finite)."""
    pos = lay.position(origin)

    def values(r: int, it: int, node: str, io: str, slot: int, default: np.ndarray) -> np.ndarray | None:
        if (rank is not None and r != rank) or node not in lay.order or default.dtype.kind != "f":
            return None
        late = it > k or (it == k and lay.position(node) >= pos)
        if io == "output" and late:
            return np.full(default.shape, bad, default.dtype)
        if io == "input" and inputs and (it > k or (it == k and lay.position(node) > pos)):
            return np.full(default.shape, bad, default.dtype)
        return None

    return values


def origins(lay: Layout) -> dict[str, str]:
    return {"forward": lay.producer(lay.activation(), 0),          # fc1's BiasAdd
            "loss": lay.loss,
            "backward": lay.gradient("fc1.weight")}                # the last gradient kernel


@pytest.mark.parametrize("where", ["forward", "loss", "backward"])
@pytest.mark.parametrize("inputs", [False, True])
def test_the_first_hit_is_the_kernel_where_nan_starts(tmp_path, layout, where, inputs):
    lay = layout()
    origin = origins(lay)[where]
    root = make(tmp_path, plant=diverge(lay, origin, 1, inputs=inputs), iterations=4)
    res = run(root, "overflow")
    # Every later kernel has NaN outputs and (when inputs follow their producers) a NaN input, unless it
    # reads nothing the origin made: the loss gradient reads the logits, not the loss, so when the loss
    # is the origin that kernel is a second one, later in execution order.
    second = [(1, lay.by_op(lay.graph.node(lay.loss).op_type)[1])] if where == "loss" and not inputs else []
    assert hit_keys(res) == [(1, origin)] + second
    assert hit_keys(res) == _origins_from_files(root, lay)
    f = res.first
    assert (f.rank, f.iteration, f.node, f.io, f.slot, f.position) == (0, 1, origin, "output", 0, lay.position(origin))
    n = int(np.prod(ref_of(open_dump(root), 1, origin).shape))
    assert f.actual == {"nan": float(n), "pos_inf": 0.0, "neg_inf": 0.0}
    assert res.errors == []


def _origins_from_files(root: str, lay: Layout) -> list[tuple[int, str]]:
    """The rule computed from the files themselves: kernels with finite inputs and non-finite outputs."""
    dump = open_dump(root)
    out = []
    for it in dump.rank(0).iterations():
        refs = [r for r in dump.rank(0).tensors(0, it) if r.dtype.kind == "f"]
        for k in lay.order:
            mine = [r for r in refs if r.node == k]
            ok_in = all(np.isfinite(np.load(r.location)).all() for r in mine if r.io == "input")
            bad_out = any(not np.isfinite(np.load(r.location)).all() for r in mine if r.io == "output")
            if ok_in and bad_out:
                out.append((it, k))
    return out


def test_file_timestamps_do_not_decide(tmp_path, layout):
    lay = layout()
    origin = origins(lay)["forward"]
    root = make(tmp_path, plant=diverge(lay, origin, 1), iterations=3)
    dump = open_dump(root)
    nan_kernels = [n for n in lay.order[lay.position(origin):]
                   if any(r.node == n and r.io == "output" and r.dtype.kind == "f"
                          for r in dump.rank(0).tensors(0, 1))]
    stamps = {n: file_timestamp(ref_of(dump, 1, n).location) for n in nan_kernels}
    assert min(stamps, key=stamps.get) != origin       # the test means something: a later kernel was written first
    assert run(dump, "overflow").first.node == origin


def test_inf_is_an_overflow_too_and_the_recommended_preset_copes(tmp_path, layout):
    lay = layout()
    origin = origins(lay)["forward"]
    root = make(tmp_path, plant=diverge(lay, origin, 1, bad=math.inf), iterations=4)
    res = run(root, "overflow")
    assert hit_keys(res) == [(1, origin)] and res.first.actual == {"nan": 0.0, "pos_inf": 16.0, "neg_inf": 0.0}
    # weights become -Inf in two iterations in a row: comparing them must not break the scan
    res = run(root, *preset("recommended"))
    assert res.first.watchpoint == "overflow" and (res.first.iteration, res.first.node) == (1, origin)
    assert res.errors and all("Inf" in e.error for e in res.errors)


def test_a_nan_in_the_data_input_is_reported_at_the_input_parameter(tmp_path, layout):
    lay = layout()
    data = lay.data
    first = lay.order[0]
    assert lay.producer(first, 0) == data

    def values(r, it, node, io, slot, default):
        if it != 1 or default.dtype.kind != "f":
            return None
        if node == data or (node in lay.order and (io == "output" or (node == first and slot == 0))):
            return np.full(default.shape, np.nan, default.dtype)     # the batch and everything computed from it
        return None

    root = make(tmp_path, plant=values)
    res = run(root, "overflow")
    assert hit_keys(res) == [(1, data)]
    f = res.first
    assert (f.kind, f.param, f.io, f.slot, f.op_type, f.position) == ("input", data, "output", 0, "Parameter", 0)
    assert f.actual == {"nan": float(BATCH * 4), "pos_inf": 0.0, "neg_inf": 0.0}


def test_origins_per_rank_in_iteration_then_rank_order(tmp_path, layout):
    lay = layout()
    o = origins(lay)
    d0, d1 = diverge(lay, o["backward"], 2, rank=0), diverge(lay, o["forward"], 1, rank=1)

    def values(r, *a):
        return (d0 if r == 0 else d1)(r, *a)

    root = make(tmp_path, plant=values, ranks=2, data_parallel=False, iterations=4)
    res = run(root, "overflow")
    assert [(h.iteration, h.rank, h.node) for h in res.hits] == [(1, 1, o["forward"]), (2, 0, o["backward"])]
    assert (res.first.rank, res.first.node) == (1, o["forward"])
    assert [(h.iteration, h.node) for h in run(root, "overflow", ranks=[0]).hits] == [(2, o["backward"])]


def test_overflow_honours_node_and_scope_filters(tmp_path, layout):
    lay = layout()
    origin = origins(lay)["forward"]
    scope = lay.graph.node(origin).scope
    other = lay.graph.node(lay.reader("fc2.weight")[0]).scope
    assert scope != other
    root = make(tmp_path, plant=diverge(lay, origin, 1))
    assert hit_keys(run(root, wp("overflow", scope=scope))) == [(1, origin)]
    assert hit_keys(run(root, wp("overflow", node=origin))) == [(1, origin)]
    # downstream of the origin every kernel has a NaN input: a search limited to them finds no origin, and
    # the sweep of that region tells the first NaN it holds, said to come from outside what was scanned
    for narrowed in (wp("overflow", scope=other), wp("overflow", node="*fc2-Dense*")):
        [hit] = run(root, narrowed).hits
        assert (hit.watchpoint, hit.iteration, hit.io) == ("nonfinite_sweep", 1, "input")
        assert "fc2" in hit.node and "outside the scan's --node/--scope/--where" in hit.note


def test_no_nan_no_overflow_hit(tmp_path):
    root = dumpmaker.make_dump(str(tmp_path / "d"), layers=LAYERS, iterations=2)
    res = run(root, "overflow")
    assert res.hits == [] and res.errors == []


def test_data_parallel_nan_is_traced_to_the_rank_that_made_it(tmp_path, layout):
    """Rank 1's local gradient goes NaN; rank 0 sees it only through the AllReduce."""
    lay = layout(ranks=2)
    (local,) = lay.of_kind("gradient", param="fc1.weight", op_type="MatMul")
    nan = np.full(lay.graph.node(local).outputs[0].shape, np.nan, dtype=F32)
    root = make(tmp_path, plant=Plant().set(local, nan, it=1, rank=1), ranks=2, iterations=2)
    res = run(root, "overflow", iterations="1")
    got = [(h.rank, h.op_type) for h in res.hits]
    assert (1, "MatMul") in got and (0, "AllReduce") in got
    assert (res.first.rank, res.first.node) == (1, local)
