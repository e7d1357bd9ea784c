"""Which ranks must agree on a tensor under a parallel layout (``RankInfo.layout``, ``NodeRecord.group``).

Plain data parallelism makes every rank a replica of every other: today's rule (:mod:`.ranks`).
A layout makes agreement a matter of groups:

- a sharded parameter (a ShardRecord on the rank), its gradient and its optimizer state of the
  local shape agree only with the ranks holding the same indices of it (``ShardRecord.key()``: the
  data-parallel replicas of a TP shard on a 2-D mesh); shards of other indices are parts of one
  logical tensor and are never compared with each other;
- a parameter without a ShardRecord agrees with every rank of its pipeline stage that holds it;
- a collective's outputs agree within its process group (``NodeRecord.group``; when the graph does
  not say: every rank if the layout is one 1-D mesh of every rank, else unknown and not compared);
- a kernel computed only from such values agrees within the intersection of its inputs' groups.

Each rank is compared with the base rank when the base is in the tensor's group, else with the
lowest rank of the group (a rank that is that lowest rank itself is the others' reference).
"""
from __future__ import annotations

import math
from typing import Iterable, Mapping

from ..formats.parallel import RankLayout, ShardRecord
from ..formats.records import Kind, NodeRecord
from ..model import Dump
from ..model.graph import Graph
from .match import NodeMatch

Peers = frozenset[int]
SHARDED_KINDS = frozenset({Kind.WEIGHT, Kind.GRADIENT, Kind.OPTIMIZER_STATE})


def has_layout(d: Dump) -> bool:
    """Whether any rank has a layout or any collective names its group (else plain data parallelism)."""
    for r in d.ranks:
        if r.info.layout is not None:
            return True
        if any(n.record.group for g in r.graphs.values() for n in g.nodes() if n.is_collective):
            return True
    return False


class LayoutPeers:
    """Per rank and graph, the ranks each node's outputs must agree with (None: may differ)."""

    def __init__(self, d: Dump) -> None:
        self.all = frozenset(d.rank_ids)
        self.layouts: dict[int, RankLayout | None] = {r.rank: r.info.layout for r in d.ranks}
        self.params: dict[int, frozenset[str]] = {
            r.rank: frozenset(n.record.param for g in r.graphs.values() for n in g.nodes()
                              if n.is_parameter and n.kind == Kind.WEIGHT and n.record.param)
            for r in d.ranks}
        self._cache: dict[tuple[int, int], dict[str, Peers | None]] = {}
        self.matches: dict[tuple[int, int, int], NodeMatch] = {}     # (rank, reference, graph) -> node pairing
        self.misnamed: dict[tuple[int, int, int], dict] = {}         # ... -> {node: (tensor, reference's)}
        self._replica_index: dict[tuple, Peers] | None = None
        self._holder_index: dict[tuple[int | None, str], Peers] = {}
        self._no_layout = all(lay is None for lay in self.layouts.values())

    def shard(self, rank: int, rec: NodeRecord, slot: int = 0) -> ShardRecord | None:
        """The ShardRecord the node's output is a local shard of on ``rank`` (None: not sharded)."""
        return shard_of(self.layouts.get(rank), rec, slot)

    def _unnamed_group(self, rank: int) -> Peers | None:
        """The group of a collective whose graph names none: every rank under plain data parallelism or
        one 1-D mesh of every rank; unknown (None: not compared) on a larger layout."""
        lay = self.layouts.get(rank)
        if lay is None or not lay.meshes:
            return self.all
        if all(len(m.dims) == 1 and frozenset(m.ranks) == self.all for m in lay.meshes.values()):
            return self.all
        return None

    def _stage(self, rank: int) -> int | None:
        lay = self.layouts.get(rank)
        return lay.stage if lay is not None else None

    def _replicas(self, rank: int, param: str, s: ShardRecord) -> Peers:
        """Ranks holding the same indices of ``param`` (an index built once: ranks x parameters)."""
        if self._replica_index is None:
            index: dict[tuple, set[int]] = {}
            for r, lay in self.layouts.items():
                for name, shard in (lay.params.items() if lay is not None else ()):
                    index.setdefault((name, shard.key()), set()).add(r)
            self._replica_index = {k: frozenset(v) for k, v in index.items()}
        return self._replica_index.get((param, s.key()), frozenset({rank}))

    def _holders(self, rank: int, param: str) -> Peers:
        """Ranks of the same pipeline stage that hold the parameter (every rank without a layout)."""
        if self._no_layout:
            return self.all
        k = (self._stage(rank), param)
        got = self._holder_index.get(k)
        if got is None:
            got = self._holder_index[k] = frozenset(r for r in self.all if self._stage(r) == k[0]
                                                    and param in self.params.get(r, ()))
        return got

    def of_parameter(self, rank: int, rec: NodeRecord) -> Peers:
        """The ranks a weight or optimizer-state node must agree with."""
        s = self.shard(rank, rec)
        if s is not None:
            return self._replicas(rank, rec.param or "", s)
        return self._holders(rank, rec.param) if rec.param else self.all

    def nodes(self, rank: int, gid: int, graph: Graph) -> Mapping[str, Peers | None]:
        """node -> the ranks its outputs must agree with on ``rank`` (absent: may differ)."""
        k = (rank, gid)
        got = self._cache.get(k)
        if got is None:
            got = self._cache[k] = self._build(rank, graph)
        return got

    def _build(self, rank: int, graph: Graph) -> dict[str, Peers | None]:
        out: dict[str, Peers | None] = {}
        for n in graph.nodes():
            if n.is_parameter and n.kind in (Kind.WEIGHT, Kind.OPTIMIZER_STATE):
                if n.record.param and n.record.param not in n.name:
                    continue     # a counter's name (input-28) that another rank may give another tensor
                out[n.name] = self.of_parameter(rank, n.record)
            elif n.kind == Kind.GRADIENT and (s := self.shard(rank, n.record)) is not None:
                # a sharded weight's gradient as the optimizer uses it (reduced): equal on its replicas
                out[n.name] = self._replicas(rank, n.record.param or "", s)
        for k in graph.execution_order:
            a = graph.record_of(k)
            if a.per_rank or k in out:
                continue
            if a.is_collective:
                group = (frozenset(a.group) & self.all) if a.group else self._unnamed_group(rank)
                if group is not None:
                    out[k] = group
                continue
            peers = _from_inputs(graph, a, out, self.all)
            if peers is not None:
                out[k] = peers
        return out


def shard_of(layout: RankLayout | None, rec: NodeRecord, slot: int = 0) -> ShardRecord | None:
    """The ShardRecord a node's output is a local shard of under ``layout`` (None: not sharded)."""
    if layout is None or rec.param is None or rec.kind not in SHARDED_KINDS:
        return None
    s = layout.params.get(rec.param)
    if s is None or rec.kind == Kind.WEIGHT:
        return s
    # a gradient or state of the local shard's size is sharded like the weight; a scalar (Adam's step)
    # is not (sizes, not shapes: a recorder may keep a shard flattened or padded, as FSDP2 does)
    shape = rec.outputs[slot].shape if slot < len(rec.outputs) else None
    return s if shape is None or math.prod(shape) > 1 or math.prod(shape) == s.local_size else None


def _from_inputs(graph: Graph, a: NodeRecord, known: Mapping[str, Peers | None], everyone: Peers) -> Peers | None:
    """The intersection of the data inputs' groups (None: an input may differ, or no real input)."""
    peers, real = everyone, 0
    for src, edge in a.inputs:
        if edge == "control" or not src:
            continue
        s = graph.value_source(src)
        if s not in graph:
            return None
        sa = graph.record_of(s)
        if sa.is_constant or sa.is_routing:
            continue
        got = known.get(s)
        if got is None:
            return None
        peers &= got
        real += 1
    return peers if real else None


def input_value(graph: Graph, node: str, slot: int) -> str | None:
    """The node whose value arrives at an input slot, through routing nodes ("": the input has no source,
    None: the node has no such slot)."""
    ins = graph.record_of(node).inputs
    if slot >= len(ins):
        return None
    src = ins[slot][0]
    return graph.value_source(src) if src else ""


def input_peers(graph: Graph, node: str, slot: int, known: Mapping[str, Peers | None],
                everyone: Peers) -> Peers | None:
    """The group of the value arriving at an input slot (a constant agrees everywhere)."""
    s = input_value(graph, node, slot)
    if s is None:
        return None
    if s == "":
        return everyone
    if s in known:
        return known[s]
    return everyone if s in graph and graph.record_of(s).is_constant else None


def reference(rank: int, peers: Peers, base: int) -> int:
    """The rank ``rank`` is compared with: the base when in the group, else the group's lowest rank."""
    return base if base in peers else min(peers)


def shard_text(s: ShardRecord, layout: RankLayout | None = None) -> str:
    """``shard [0:6, 0:8] of [12, 8], Shard(0)`` (FSDP1: ``elements [0:48] of [12, 8] flattened``)."""
    shape = ", ".join(str(n) for n in s.shape)
    mesh = layout.meshes.get(s.mesh) if layout is not None else None
    dims: Iterable[str] = mesh.dims if mesh is not None and len(mesh.dims) == len(s.placements) else ()
    dims = list(dims)
    place = ", ".join(f"{d}={p}" if dims else p for d, p in zip(dims or [""] * len(s.placements), s.placements))
    if s.flat is not None:
        return f"elements [{s.flat[0]}:{s.flat[1]}] of [{shape}] flattened, {place}"
    if s.index is None:
        return f"whole [{shape}], {place}"
    runs = ", ".join("+".join(f"{a}:{b}" for a, b in runs) for runs in s.index)
    return f"shard [{runs}] of [{shape}], {place}"
