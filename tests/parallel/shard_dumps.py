"""Write real tdbg-h5 dumps of a sharded job (one rank folder per rank, each with its parallel layout in
rank.json) through tdbg's one writer, with the full (logical) tensors kept apart as the truth.

Each parameter P has, on every rank that holds a part of it, a weight node ``P``, its gradient
``P.grad``, its optimizer state ``exp_avg.P`` (all of the shard's local shape) and a scalar
``step.P`` (never sharded); each rank also has an activation ``act`` of its own. The local parts
are cut from the full tensors here with plain numpy, apart from tdbg.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from debugger.formats.parallel import MeshRecord, RankLayout, ShardRecord
from debugger.formats.records import GraphRecord, Kind, NodeRecord, OutputType
from debugger.formats.tdbg_h5.writer import DumpWriter

# (rank, iteration, node, local values) -> the values that rank stores (a planted fault)
Alter = Callable[[int, int, str, np.ndarray], np.ndarray]
# (rank, node) -> the name that rank's graph gives the node (operator names count per rank)
Rename = Callable[[int, str], str]


@dataclass
class Job:
    """A sharded job: meshes, and per parameter its logical shape and each rank's ShardRecord."""

    meshes: dict[str, MeshRecord]
    params: dict[str, tuple[tuple[int, ...], dict[int, ShardRecord]]]
    ranks: Sequence[int]
    truth: dict[tuple[int, str], np.ndarray] = field(default_factory=dict)   # (iteration, node) -> full
    rename: Rename = lambda rank, node: node
    absent: dict[str, set[int]] = field(default_factory=dict)   # parameter -> ranks that record none of it
    rank_meshes: dict[int, dict[str, MeshRecord]] = field(default_factory=dict)   # a rank's own meshes
    stage: dict[int, int] = field(default_factory=dict)          # pipeline stage per rank
    stages: int | None = None
    micro_batches: int | None = None


def local_part(full: np.ndarray, shard: ShardRecord) -> np.ndarray:
    """A rank's part of ``full``, cut with numpy (the truth of what a rank holds)."""
    if shard.flat is not None:
        return full.reshape(-1)[shard.flat[0]:shard.flat[1]].copy()
    if shard.index is None:
        return full.copy()
    rows = [np.concatenate([np.arange(a, b) for a, b in runs]) for runs in shard.index]
    return full[np.ix_(*rows)].copy()


def _graph(job: Job, rank: int) -> GraphRecord:
    nodes = [NodeRecord("act", "Linear", "", outputs=[OutputType("float32", (2, 2))], kind=Kind.ACTIVATION)]
    for name, (_, shards) in job.params.items():
        shard = shards.get(rank)
        if shard is None or rank in job.absent.get(name, ()):
            continue
        local = shard.local_shape
        nodes += [
            NodeRecord(name, "Parameter", "", outputs=[OutputType("float32", local)], is_parameter=True,
                       has_default=True, kind=Kind.WEIGHT, param=name),
            NodeRecord(f"{name}.grad", "Gradient", "", outputs=[OutputType("float32", local)],
                       kind=Kind.GRADIENT, param=name, is_backward=True),
            NodeRecord(f"exp_avg.{name}", "Parameter", "", outputs=[OutputType("float32", local)],
                       is_parameter=True, has_default=True, kind=Kind.OPTIMIZER_STATE, param=name),
            NodeRecord(f"step.{name}", "Parameter", "", outputs=[OutputType("float32", ())],
                       is_parameter=True, has_default=True, kind=Kind.OPTIMIZER_STATE, param=name)]
    for n in nodes:
        n.name = job.rename(rank, n.name)
    return GraphRecord(0, "train_step", nodes, [], "<shard_dumps>", [n.name for n in nodes])


def make_truth(job: Job, iterations: Sequence[int], seed: int = 0) -> None:
    """Full tensors of every parameter's weight, gradient and state per iteration (healthy values)."""
    rng = np.random.default_rng(seed)
    for it in iterations:
        for name, (shape, _) in job.params.items():
            job.truth[(it, name)] = rng.normal(0, 1, shape).astype(np.float32)
            job.truth[(it, f"{name}.grad")] = rng.normal(0, 0.1, shape).astype(np.float32)
            job.truth[(it, f"exp_avg.{name}")] = rng.normal(0, 0.01, shape).astype(np.float32)


def write_job(root: str, job: Job, iterations: Sequence[int] = (0, 1), saved: str = "values",
              alter: Alter | None = None, seed: int = 0) -> Job:
    """Write every rank of ``job`` under ``root``; the full tensors go to ``job.truth``."""
    make_truth(job, iterations, seed)
    for rank in job.ranks:
        params = {n: s[rank] for n, (_, s) in job.params.items() if rank in s}
        dumped = {n: s for n, s in params.items() if rank not in job.absent.get(n, ())}
        layout = RankLayout(job.rank_meshes.get(rank, job.meshes), params, job.stage.get(rank), job.stages,
                            job.micro_batches)
        with DumpWriter(root, rank, saved, framework="PyTorch", layout=layout) as w:
            w.write_graph(_graph(job, rank), run_history=list(iterations))
            for it in iterations:
                with w.iteration(it) as iw:
                    _write_iteration(iw, job, rank, it, dumped, saved, alter)
    return job


def _write_iteration(iw: object, job: Job, rank: int, it: int, params: Mapping[str, ShardRecord], saved: str,
                     alter: Alter | None) -> None:
    tensors = {"act": np.full((2, 2), rank + 1.0, np.float32)}
    for name, shard in params.items():
        for node in (name, f"{name}.grad", f"exp_avg.{name}"):
            tensors[node] = local_part(job.truth[(it, node)], shard)
        tensors[f"step.{name}"] = np.array(float(it + 1), np.float32)
    for node, local in tensors.items():
        if alter is not None:
            local = alter(rank, it, node, local)
        op = "Linear" if node == "act" else "Gradient" if node.endswith(".grad") else "Parameter"
        if saved == "statistics":
            from debugger.stats.core import stats_of_chunks
            st = stats_of_chunks([local.reshape(-1)])[0]
            iw.add(0, job.rename(rank, node), op, "output", 0, stats=st, dtype=local.dtype,  # type: ignore[attr-defined]
                   shape=local.shape)
        else:
            iw.add(0, job.rename(rank, node), op, "output", 0, local)  # type: ignore[attr-defined]


def one_dim(shape: tuple[int, ...], dim: int, n: int, runs: Sequence[Sequence[tuple[int, int]]] | None = None,
            mesh: str = "dp", placement: str | None = None) -> dict[int, ShardRecord]:
    """ShardRecords of ``Shard(dim)`` over ``n`` ranks (torch's chunking: ceil-sized parts, the last ones
    shorter or empty), or of the given per-rank runs along ``dim``."""
    out = {}
    size = shape[dim]
    step = -(-size // n)
    for r in range(n):
        along = tuple(runs[r]) if runs is not None else ((min(r * step, size), min((r + 1) * step, size)),)
        index = tuple(along if d == dim else ((0, s),) for d, s in enumerate(shape))
        out[r] = ShardRecord(mesh, (placement or f"Shard({dim})",), shape, index)
    return out
