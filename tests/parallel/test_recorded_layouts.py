"""The recorder under every PyTorch parallel layout (spawned gloo ranks): training is bit-for-bit what
it is without the recorder, the dump holds the layout, and the logical parameters and gradients
assembled from the ranks' shards equal what torch itself gathers (values, and statistics combined
from the shards' statistics)."""
from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from realruns import run_layouts

from debugger.formats.parallel import ShardRecord
from debugger.model.dump import open_dump
from debugger.model.logical import LogicalSource, Piece
from debugger.stats.core import tensor_stats

WORLD = {"ddp": 2, "fsdp2": 2, "fsdp1": 2, "fsdp1-units": 2, "tp": 2, "pp": 2, "2d": 4}
STEPS = 3


def _run(layout: str, tmp: str, *extra: str) -> tuple[str, list[dict]]:
    dump, out = os.path.join(tmp, "dump"), os.path.join(tmp, "facts.json")
    shutil.rmtree(dump, ignore_errors=True)
    res = run_layouts([layout, out, "--dump", dump, "--save", "both", "--both", "--steps", str(STEPS), *extra])
    assert "tdbg recorder" not in res.stderr, res.stderr[-3000:]     # no iteration dropped, layout read
    facts = []
    for r in range(WORLD[layout]):
        with open(f"{out}.{r}") as f:
            facts.append(json.load(f))
    return dump, facts


def _graph_of(rank: object, iteration: int) -> int:
    return next(g for g in rank.graph_ids if iteration in rank.iterations(g))


def _logical(dump: object, node: str, param: str, iteration: int) -> LogicalSource | None:
    """``node`` (a weight or its gradient) of every rank that holds a part of ``param``, as one tensor."""
    pieces = []
    for rank in dump.ranks:
        layout = rank.info.layout
        gid = _graph_of(rank, iteration)
        try:
            ref = rank.tensor(gid, iteration, node)
        except Exception:           # this rank does not hold it (another pipeline stage, an empty FSDP1 part)
            continue
        shard = layout.params.get(param) if layout is not None else None
        if shard is None:
            shard = ShardRecord("", (), ref.shape)       # the whole tensor on this rank
        # the rank's own part as it stored it (the model reads a sharded tensor whole: ref.source)
        pieces.append(Piece(rank.rank, ref.shard.source if ref.shard is not None else ref.source, shard))
    return LogicalSource(param, pieces) if pieces else None


@pytest.mark.parametrize("layout,level", [(k, "ops") for k in sorted(WORLD)] +
                         [("fsdp2", "modules"), ("2d", "parameters")])
def test_layout_recorded_unchanged_and_assembled(tmp_path: object, layout: str, level: str) -> None:
    """Losses and parameters bit-for-bit equal with and without the recorder; every logical weight and
    gradient of the last iteration, assembled from the shards, equals torch's gathered tensor exactly,
    and its statistics combined from the shards' equal numpy's on it."""
    dump_path, facts = _run(layout, str(tmp_path), "--level", level)
    for f in facts:
        assert f["recorded"]["losses"] == f["plain"]["losses"]
        assert f["recorded"]["params"] == f["plain"]["params"]
    dump = open_dump(dump_path)
    assert len(dump.ranks) == WORLD[layout]
    layouts = [r.info.layout for r in dump.ranks]
    assert all(lay is not None for lay in layouts), "every rank records its layout"
    if layout == "pp":
        assert sorted(lay.stage for lay in layouts) == [0, 1] and {lay.stages for lay in layouts} == {2}
        assert {lay.micro_batches for lay in layouts} == {2}
        for rank in dump.ranks:         # each micro-batch's forward and backward operators are one part
            names = [n.name for n in rank.graph(0).record.nodes]
            for k in (0, 1):
                assert any(n.startswith(f"micro-{k}/") for n in names)
                assert any(n.startswith(f"backward/micro-{k}/") for n in names)
    else:       # tensor parallelism alone leaves inp and head plain parameters of each rank: no shard
        expect = {n for n in facts[0]["recorded"]["params"] if layout != "tp" or n.startswith("layers.")}
        assert set(layouts[0].params) == expect
    if layout == "2d" and level == "ops":   # tensor parallelism's all-reduces: within each TP pair
        groups = {n.group for r in dump.ranks for n in r.graph(0).record.nodes if n.is_collective}
        assert {(0, 1), (2, 3)} <= groups
    truth_params = {k: v for f in facts for k, v in f["recorded"]["params"].items()}
    truth_grads = {k: v for f in facts for k, v in f["recorded"]["grads"].items()}
    last = STEPS - 1
    for param, full in truth_params.items():
        for node, truth in ((param, full), (f"{param}.grad", truth_grads.get(param))):
            if truth is None:
                continue
            src = _logical(dump, node, param, last)
            assert src is not None, f"{node}: on no rank"
            expect = np.asarray(truth, dtype=np.float32)
            got = src.array()
            assert got.shape == expect.shape and np.array_equal(got, expect), f"{layout} {node}"
            combined, direct = src.stored_stats(), tensor_stats(expect)
            assert combined is not None
            for k in ("count", "zeros", "positives", "negatives", "min", "max"):
                assert combined[k] == getattr(direct, k), (node, k)
            for k in ("mean", "abs_mean", "std", "l2norm"):
                assert combined[k] == pytest.approx(getattr(direct, k), rel=1e-5, abs=1e-7), (node, k)


def test_fsdp2_weights_are_weights_on_every_rank(tmp_path: object) -> None:
    """FSDP2's DTensor parameters are weights with their gradients and Adam state on every rank (the
    recorder used to find none), and its iterations repeat a graph."""
    dump_path, _ = _run("fsdp2", str(tmp_path), "--steps", "5")
    dump = open_dump(dump_path)
    # FSDP frees and re-allocates its unsharded parameters each step: the steady steps still repeat one
    # graph (a new input per re-used address), so replay engages
    assert max(len(r) for r in (dump.ranks[0].iterations(g) for g in dump.ranks[0].graph_ids)) >= 2
    for rank in dump.ranks:
        kinds = rank.kind_counts()
        assert kinds.get("weight", 0) >= 12 and kinds.get("gradient", 0) >= 12
        shard = rank.info.layout.params["head.weight"]
        assert shard.placements == ("Shard(0)",) and shard.shape == (3, 8)
        assert shard.local_shape == ((2, 8) if rank.rank == 0 else (1, 8))      # torch.chunk: 2 + 1 rows


@pytest.mark.parametrize("save", ["statistics", "tensors"])
def test_recorded_storages_stay_resizable(tmp_path: object, save: str) -> None:
    """The recorder reads tensors without marking their storage unresizable (Tensor.numpy() does, for
    good): FSDP's free_storage resizes its parameters' storage to 0, and an out= argument of another size
    is resized (``resize_``); both must work on tensors the recorder has read."""
    import torch
    from debugger.torch import Recorder
    torch.manual_seed(0)
    net = torch.nn.Linear(4, 3)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    buf = torch.zeros(2)
    with Recorder(str(tmp_path / "d"), net, opt, save=save) as rec:
        for _ in range(2):
            x = torch.randn(5, 4)
            y = net(x)
            torch.add(y.detach()[0, :2], 1.0, out=buf)      # buf is an output the recorder reads
            y.sum().backward()
            opt.step()
            opt.zero_grad()
            rec.step()
    for t in (net.weight, net.bias, buf, x):
        assert t.untyped_storage().resizable()
    buf.resize_(7)                                # as an out= of another size is resized
    assert buf.shape == (7,)
    net.weight.untyped_storage().resize_(0)      # what FSDP's free_storage does
