"""Records -> plain dicts: the one JSON shape shared by `--json` and the web API."""
from __future__ import annotations

from typing import Any

from .graph import Graph, Node
from ..common.settings import ranks_at_once
from ..common.executors import local_workers, shared_with_forks
from . import Dump, Rank, TensorRef, dump_at
from ..formats.parallel import RankLayout
from ..formats.records import Kind, StackFrame


def frame_dict(f: StackFrame) -> dict[str, Any]:
    """A stack frame."""
    return {"file": f.file, "line": f.line, "end_line": f.end_line, "column": f.column, "code": f.code,
            "is_framework": f.is_framework, "forward_candidate": f.forward_candidate}


def tensor_dict(t: TensorRef) -> dict[str, Any]:
    """A tensor's digest (no values)."""
    return {"rank": t.rank, "graph": t.graph_id, "iteration": t.iteration, "node": t.node, "op_type": t.op_type,
            "io": t.io, "slot": t.slot, "kind": t.kind, "param": t.param, "bytes": t.stored_bytes,
            "file_dtype": t.file_dtype, "matched": t.matched, "location": t.location,
            "has_values": t.source.has_values, "shards": shards_dict(t)}


def shards_dict(t: TensorRef) -> dict[str, Any] | None:
    """How a logical tensor was made: its logical shape, and the part of each rank holding one (its local
    shape, placements, index runs or flat range); None for a rank's own tensor."""
    if not t.is_logical:
        return None
    return {"shape": list(t.shape), "own_rank": t.rank,
            "pieces": [{"rank": p.rank, "local_shape": list(p.shard.local_shape), "mesh": p.shard.mesh,
                        "placements": list(p.shard.placements),
                        "index": [[list(r) for r in runs] for runs in p.shard.index] if p.shard.index else None,
                        "flat": list(p.shard.flat) if p.shard.flat is not None else None} for p in t.pieces]}


def node_dict(n: Node, rank: Rank | None = None) -> dict[str, Any]:
    """A node: kind, op type, inputs, outputs, consumers and stack (user frames first)."""
    g = n.graph
    inputs = []
    for slot, (src, edge) in enumerate(n.inputs):
        src_node = g.get(src)
        src_kind = src_node.kind if src_node is not None else None
        inputs.append({"slot": slot, "node": src or None, "edge": edge, "kind": src_kind})
    out = {
        "graph": g.graph_id, "node": n.name, "op_type": n.op_type, "scope": n.scope, "module": n.module,
        "kind": n.kind,
        "param": n.param, "is_backward": n.is_backward, "execution_index": n.execution_index,
        "inputs": inputs,
        "outputs": [{"slot": i, "dtype": o.dtype, "shape": list(o.shape) if o.shape is not None else None}
                    for i, o in enumerate(n.outputs)],
        "consumers": n.consumers,
        "stack": [frame_dict(f) for f in n.stack_user_first],
    }
    if rank is not None:
        out["rank"] = rank.rank
        out["iterations"] = rank.node_iterations(g.graph_id, n.name)
    return out


def rank_info(r: Rank) -> dict[str, Any]:
    """The `tdbg info --json` object of one rank."""
    graphs = []
    for gid in r.graph_ids:
        g: Graph | None = r.graphs.get(gid)
        graphs.append({"graph": gid, "name": g.name if g else None, "nodes": len(g) if g else 0,
                       "source": g.source_file if g else None, "level": g.level if g else None,
                       "compiled": g.compiled if g else None,
                       "iterations": r.iterations(gid),
                       "run_iterations": r.run_history(gid)})
    run = sorted({i for gid in r.graph_ids for i in r.run_history(gid)})
    meta = r.info
    return {
        "rank": r.rank, "path": r.path, "net": meta.net,
        "framework": meta.framework, "framework_version": meta.framework_version,
        "device_target": meta.device_target, "saved": meta.saved, "metadata": meta.raw, "records": meta.records,
        "iterations": r.iterations(), "run_iterations": run, "graphs": r.graph_ids, "graph_details": graphs,
        "tensor_files": r.tensor_file_count(), "tensor_bytes": r.tensor_bytes(),
        "nodes_by_kind": dict(sorted(r.kind_counts().items())),
        "weights_with_gradient": len(r.gradient_params()),
        "parameters": [{"name": n, "kind": k} for n, k in r.parameters()],
        "series": series_info(r),
        "runs": meta.runs,
    }


def series_info(r: Rank) -> dict[str, Any] | None:
    """What a rank's per-step series holds (None: it has none); ``origin`` "iterations": no series files, the
    recorded iterations read as one."""
    series = r.series
    if series is None:
        return None
    steps = series.steps()
    roles: dict[str, int] = {}
    # a series read from the iterations lists its tensors from every iteration: info counts the first's
    # (a look at every iteration of every rank is the series' work, not info's)
    first_step = getattr(series, "first_step_catalog", None)    # stepseries.IterationSeries's
    catalog = first_step() if first_step is not None else series.catalog()
    for t in catalog:
        roles[t.role] = roles.get(t.role, 0) + 1
    return {"origin": series.origin, "steps": int(len(steps)), "first_step": int(steps[0]) if len(steps) else None,
            "last_step": int(steps[-1]) if len(steps) else None, "tensors_by_role": roles,
            "deep_steps": sorted(set(r.iterations()) & set(steps.tolist()))[:1000]}


def dump_info(d: Dump, jobs: int = 1) -> dict[str, Any]:
    """The `tdbg info --json` object of one dump (``jobs`` not 1: many ranks described on that many processes,
    0 on every core)."""
    ranks, warnings = _ranks_info(d, jobs)
    return {"dump": d.root, "format": d.format, "ranks": ranks, "layout": dump_layout(d),
            "trainable_weights": trainable_weights(d, ranks), "warnings": warnings}


RANKS_AT_ONCE = 64   # ranks listed, described and forgotten together


def _ranks_info(d: Dump, jobs: int) -> tuple[list[dict[str, Any]], list[str]]:
    """:func:`rank_info` of every rank and the warnings of the dump and its ranks, a chunk of ranks at a time
    (on a fork pool when there are several chunks and ``jobs`` is not 1)."""
    at_once = ranks_at_once(RANKS_AT_ONCE)
    chunks = [d.rank_ids[at:at + at_once] for at in range(0, len(d.rank_ids), at_once)]
    if jobs == 1 or len(chunks) < 2:
        parts = [_describe(d, ids) for ids in chunks]
    else:
        d.load_graphs()
        with local_workers(jobs) as pool, shared_with_forks(dump=d):
            futures = [pool.submit(describe_ranks, d.root, ids) for ids in chunks]
            parts = [f.result() for f in futures]
    dump_warnings = list(dict.fromkeys([*d.warnings, *(w for part in parts for w in part[1])]))
    return [i for part in parts for i in part[0]], dump_warnings + [w for part in parts for w in part[2]]


def describe_ranks(root: str, ids: list[int]) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """Worker entry point: :func:`_describe` of some ranks of the dump at ``root``."""
    return _describe(dump_at(root), ids)


def _describe(d: Dump, ids: list[int]) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """(rank_info of each rank, warnings the dump gained meanwhile, the ranks' warnings); each rank is listed
    with the others, indexed (what finds its warnings) and forgotten when the dump has more ranks."""
    seen = len(d.warnings)
    d.list_ranks(ids)
    infos, warnings = [], []
    for r in (d.rank(i) for i in ids):
        infos.append(rank_info(r))
        r.index  # noqa: B018 - building the index is what produces its warnings
        warnings.extend(r.warnings)
        if len(d.rank_ids) > 1:
            r.release()
    return infos, d.warnings[seen:], warnings


def trainable_weights(d: Dump, ranks: list[dict[str, Any]]) -> list[str]:
    """Every weight of the job by its logical (parameter) name: of every rank (``ranks``: their rank_info;
    a pipeline stage holds some), and every parameter a parallel layout shards or replicates (FSDP: a rank
    may record none of one)."""
    names = {p["name"] for info in ranks for p in info["parameters"] if p["kind"] == Kind.WEIGHT}
    names |= {p for r in d.ranks if r.layout is not None for p in r.layout.params}
    return sorted(names)


def dump_layout(d: Dump) -> dict[str, Any] | None:
    """The parallel layout of the job (None when no rank records one): device meshes with their process
    groups along each dimension, pipeline stages, and every parameter's logical shape and placements."""
    layouts = {r.rank: r.layout for r in d.ranks if r.layout is not None}
    if not layouts:
        return None
    meshes: dict[str, Any] = {}
    params: dict[str, dict[str, Any]] = {}
    for rank, lay in sorted(layouts.items()):
        for name, m in lay.meshes.items():
            # a rank's mesh may be its slice of a bigger one (FSDP's "dp" of a 2-D job): the slices merge
            got = meshes.setdefault(name, {"dims": list(m.dims), "shape": list(m.shape), "ranks": set(),
                                           "groups": {dim: set() for dim in m.dims}})
            got["ranks"].update(m.ranks)
            for dim in m.dims:
                got["groups"].setdefault(dim, set()).update(m.group(r, dim) for r in m.ranks)
        for name, s in lay.params.items():
            p = params.setdefault(name, {"name": name, "shape": list(s.shape), "mesh": s.mesh,
                                         "placements": list(s.placements), "ranks": [], "sharded": False})
            p["ranks"].append(rank)
            p["sharded"] = p["sharded"] or not s.covers_whole() or s.local_shape != s.shape
    for m in meshes.values():
        m["ranks"] = sorted(m["ranks"])
        m["groups"] = {dim: [list(g) for g in sorted(groups)] for dim, groups in m["groups"].items()}
    return {"ranks": sorted(layouts), "meshes": meshes, "pipeline": _pipeline(d, layouts),
            "parameters": sorted(params.values(), key=lambda p: p["name"])}


def _pipeline(d: Dump, layouts: dict[int, RankLayout]) -> dict[str, Any] | None:
    """Pipeline stages: how many, micro-batches, and per stage its ranks and the weights they hold."""
    stages = {rank: lay.stage for rank, lay in layouts.items() if lay.stage is not None}
    if not stages:
        return None
    first = layouts[min(layouts)]
    by_stage: dict[str, Any] = {}
    for s in sorted(set(stages.values())):
        ranks = sorted(r for r, st in stages.items() if st == s)
        weights = {p for r in ranks for p, k in d.rank(r).parameters() if k == Kind.WEIGHT}
        by_stage[str(s)] = {"ranks": ranks, "weights": sorted(weights)}
    return {"stages": first.stages, "micro_batches": first.micro_batches, "by_stage": by_stage}
