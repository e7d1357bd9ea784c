"""Dumps of parallel layouts written with tdbg-h5's own DumpWriter (the real on-disk layout): each rank
holds its local shards of logical tensors that the test builds with numpy, so the truth (which shard is
where, what the whole tensor is) is known apart from tdbg."""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from debugger.formats.parallel import MeshRecord, RankLayout, ShardRecord
from debugger.formats.records import GraphRecord, Kind, NodeRecord, OutputType
from debugger.formats.tdbg_h5.writer import DumpWriter

Index = tuple[tuple[tuple[int, int], ...], ...]


def local_of(full: np.ndarray, shard: ShardRecord | None) -> np.ndarray:
    """The part of ``full`` a shard holds (numpy slicing, apart from tdbg)."""
    if shard is None or shard.index is None and shard.flat is None:
        return full
    if shard.flat is not None:
        return full.reshape(-1)[shard.flat[0]:shard.flat[1]].copy()
    assert shard.index is not None
    idx = np.ix_(*[np.concatenate([np.arange(a, b) for a, b in runs]) for runs in shard.index])
    return full[idx].copy()


def _graph(shapes: Mapping[str, tuple[int, ...]], group: tuple[int, ...], dtype: str) -> GraphRecord:
    """Per parameter P: a weight P, its gradient P.grad and Adam state exp_avg.P; an input x, a MatMul
    reading the first weight, an all-reduce over ``group`` and the loss computed from it, and a
    reduce-scatter over ``group`` (each rank its own part: per_rank)."""
    nodes = [NodeRecord("x", "Input", "", outputs=[OutputType("float32", (4, 8))], is_parameter=True,
                        kind=Kind.INPUT)]
    first = next(iter(shapes))
    for p, shape in shapes.items():
        nodes += [
            NodeRecord(p, "Parameter", "", outputs=[OutputType(dtype, shape)], is_parameter=True, has_default=True,
                       kind=Kind.WEIGHT, param=p),
            NodeRecord(f"exp_avg.{p}", "Parameter", "", outputs=[OutputType(dtype, shape)], is_parameter=True,
                       has_default=True, kind=Kind.OPTIMIZER_STATE, param=p),
            NodeRecord(f"{p}.grad", "Gradient", "", outputs=[OutputType(dtype, shape)], kind=Kind.GRADIENT, param=p)]
    nodes += [
        NodeRecord("mm", "MatMul", "", inputs=[("x", "data"), (first, "data")], outputs=[OutputType("float32", (4, 4))],
                   kind=Kind.ACTIVATION, value_inputs=("x", first)),
        NodeRecord("allreduce", "AllReduce", "", inputs=[("mm", "data")], outputs=[OutputType("float32", (4, 4))],
                   is_collective=True, group=group, value_inputs=("mm",)),
        NodeRecord("loss", "Loss", "", inputs=[("allreduce", "data")], outputs=[OutputType("float32", ())],
                   kind=Kind.LOSS, value_inputs=("allreduce",)),
        NodeRecord("reducescatter", "ReduceScatter", "", inputs=[("mm", "data")], outputs=[OutputType("float32", (2, 4))],
                   is_collective=True, per_rank=True, group=group, value_inputs=("mm",))]
    order = ["mm", "allreduce", "loss", "reducescatter"] + [f"{p}.grad" for p in shapes]
    return GraphRecord(0, "train_step", nodes, ["loss"], "", execution_order=order)


def write_rank(root: str, rank: int, iterations: Sequence[Mapping[str, np.ndarray]], *,
               layout: RankLayout | None = None, group: tuple[int, ...] = (), saved: str = "values",
               dtype: str = "float32") -> None:
    """One rank: ``iterations[i]`` maps every node (P, P.grad, exp_avg.P, x, mm, allreduce, loss) to its local
    value in iteration i; the graph's shapes are those of iteration 0 (``dtype``: what the graph says the
    parameters are, e.g. bfloat16 stored as float32 as the PyTorch recorder does)."""
    shapes = {n: tuple(np.shape(v)) for n, v in iterations[0].items()
              if "." in n and not n.endswith(".grad") and not n.startswith("exp_avg.")}
    with DumpWriter(root, rank, saved, framework="PyTorch", layout=layout) as w:
        w.write_graph(_graph(shapes, group, dtype), run_history=range(len(iterations)))
        for it, tensors in enumerate(iterations):
            with w.iteration(it) as iw:
                for node, value in tensors.items():
                    op = {"x": "Input", "mm": "MatMul", "allreduce": "AllReduce", "loss": "Loss",
                          "reducescatter": "ReduceScatter"}.get(node)
                    op = op or ("Gradient" if node.endswith(".grad") else "Parameter")
                    iw.add(0, node, op, "output", 0, np.asarray(value, np.float32))


def truth(seed: int, shapes: Mapping[str, tuple[int, ...]], iterations: int = 2) -> list[dict[str, np.ndarray]]:
    """Logical tensors of a small run: per iteration every P, P.grad, exp_avg.P, and x, mm, allreduce, loss."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(iterations):
        it: dict[str, np.ndarray] = {}
        for p, shape in shapes.items():
            it[p] = rng.standard_normal(shape).astype(np.float32)
            it[f"{p}.grad"] = (rng.standard_normal(shape) * 1e-2).astype(np.float32)
            it[f"exp_avg.{p}"] = (rng.standard_normal(shape) * 1e-3).astype(np.float32)
        it["x"] = rng.standard_normal((4, 8)).astype(np.float32)
        it["mm"] = rng.standard_normal((4, 4)).astype(np.float32)
        it["allreduce"] = rng.standard_normal((4, 4)).astype(np.float32)
        it["loss"] = np.float32(abs(rng.standard_normal()) + 1.0)
        it["reducescatter"] = rng.standard_normal((2, 4)).astype(np.float32)
        out.append(it)
    return out


def shard_run(root: str, logical: list[dict[str, np.ndarray]], layouts: Mapping[int, RankLayout | None], *,
              per_rank: Mapping[int, Mapping[int, Mapping[str, np.ndarray]]] | None = None, groups: Mapping[int, tuple[int, ...]] = {},
              saved: str = "values", dtype: str = "float32", recorded: bool = True) -> str:
    """Write every rank's shards of ``logical`` under ``layouts``; ``per_rank[r][i]`` overrides rank r's own
    values of x, mm, allreduce and loss in iteration i (data shards differ per rank). ``recorded=False``
    cuts the shards but keeps the layout and the groups out of the dump."""
    for rank, layout in layouts.items():
        its = []
        for i, full in enumerate(logical):
            local = {}
            for node, value in full.items():
                param = node[:-5] if node.endswith(".grad") else node[8:] if node.startswith("exp_avg.") else node
                shard = layout.params.get(param) if layout is not None else None
                local[node] = local_of(value, shard)
            local.update((per_rank or {}).get(rank, {}).get(i, {}))
            its.append(local)
        write_rank(root, rank, its, layout=layout if recorded else None, group=groups.get(rank, ()) if recorded else (),
                   saved=saved, dtype=dtype)
    return root


def rows(shape: tuple[int, ...], start: int, stop: int) -> Index:
    """Index runs of rows [start, stop) of every column."""
    return (((start, stop),),) + tuple(((0, n),) for n in shape[1:])


def mesh(dims: tuple[str, ...], shape: tuple[int, ...]) -> MeshRecord:
    """A mesh over ranks 0..N-1, row-major."""
    return MeshRecord(dims, shape, tuple(range(math.prod(shape))))
