"""Ranks of one dump with a parallel layout: each tensor compared with a rank of its own group
(:mod:`.peers`), never a shard with another shard."""
from __future__ import annotations

from ..formats.records import Kind
from ..model import Dump, Rank, TensorRef
from .gathered import gathered_params
from ..common.selection import ranges_text
from .match import match_graphs
from .localmap import local_map
from .pairs import CompareResult, Pair, Side, make_pair
from .peers import LayoutPeers, input_peers, reference, shard_text


def layout_pairs(d: Dump, base: int, others: list[int], sel: set[int] | None, all_tensors: bool,
                 result: CompareResult) -> set[int]:
    """Add to ``result`` every pair of ``others``' tensors with their reference rank; the iterations seen."""
    peers = LayoutPeers(d)
    seen: set[int] = set()
    for r in others:
        ra = d.rank(r)
        for gid in ra.graph_ids:
            graph = ra.graphs.get(gid)
            if graph is None:
                result.warnings.append(f"{d.root}: rank {r} graph {gid} could not be read: which of its tensors "
                                       "must agree is unknown; not compared")
                continue
            its = set(ra.iterations(gid)) if sel is None else set(ra.iterations(gid)) & sel
            based = set(d.rank(base).iterations(gid)) - set(ra.iterations(gid))
            based = based if sel is None else based & sel
            if based:
                result.warnings.append(f"{d.root}: rank {r} has no dump of graph {gid} iteration(s) {ranges_text(based)} "
                                       f"(base rank {base} has): its tensors are missing")
            for it in sorted(its):
                seen.add(it)
                refs = _rank_pairs(d, peers, ra, gid, it, base, all_tensors, result)
                for ref in sorted(refs):
                    _missing_on_a(d, peers, ra, d.rank(ref), gid, it, base, result)
    for (r, ref, gid), names in sorted(peers.misnamed.items()):
        node, (t, tb) = next(iter(names.items()))
        result.warnings.append(
            f"{d.root}: {len(names)} node name(s) of rank {r} graph {gid} name another tensor on rank {ref} (e.g. {node}: "
            f"{t.kind} of {t.param or 'no parameter'} vs {tb.kind} of {tb.param or 'no parameter'}); not compared")
    if not any(p.counted for p in result.pairs):
        result.empty_reason = (f"no tensor of ranks {ranges_text(others)} has a replica on another rank: the layout "
                               "shards every parameter (FSDP, tensor or pipeline parallel) and no collective result "
                               "with a known group was dumped; compare the run with another run (tdbg compare RUN_A "
                               "RUN_B) to check its values")
    return seen


def _rank_pairs(d: Dump, peers: LayoutPeers, ra: Rank, gid: int, it: int, base: int, all_tensors: bool,
                result: CompareResult) -> set[int]:
    """Pair each of the rank's tensors with its reference rank's; the reference ranks used."""
    graph = ra.graphs[gid]
    refs: set[int] = set()
    known = peers.nodes(ra.rank, gid, graph)
    lacking: set[int] = set()
    for t in local_map(ra, gid, it).values():
        group = known.get(t.node) if t.io == "output" else input_peers(graph, t.node, t.slot, known, peers.all)
        if group is None or len(group) < 2:
            if all_tensors and group is None and base != ra.rank:
                _pair(d, peers, ra, t, base, it, result, lacking, counted=False)
            continue
        ref = reference(ra.rank, group, base)
        if ref != ra.rank:
            refs.add(ref)
            _pair(d, peers, ra, t, ref, it, result, lacking, counted=True)
    if lacking:
        result.warnings.append(f"{d.root}: rank(s) {ranges_text(lacking)} have no dump of graph {gid} iteration {it} "
                               f"that rank {ra.rank}'s tensors must agree with: they are missing")
    return refs - lacking


def _missing_on_a(d: Dump, peers: LayoutPeers, ra: Rank, rb: Rank, gid: int, it: int, base: int,
                  result: CompareResult) -> None:
    """Tensors of the reference rank that ``ra`` must agree on but did not dump: missing on a."""
    gb = rb.graphs.get(gid)
    nm = peers.matches.get((ra.rank, rb.rank, gid))
    if gb is None or nm is None:
        return
    known = peers.nodes(rb.rank, gid, gb)
    mine = local_map(ra, gid, it)
    renamed = nm.taken | {b for b, _ in nm.pairs.values()}
    for tb in local_map(rb, gid, it).values():
        if tb.key in mine or tb.node in renamed:
            continue
        group = known.get(tb.node) if tb.io == "output" else input_peers(gb, tb.node, tb.slot, known, peers.all)
        if group is not None and ra.rank in group and reference(ra.rank, group, base) == rb.rank:
            result.pairs.append(make_pair(it, Side(d.root, ra.rank), Side(d.root, rb.rank), gid, None, tb, "",
                                          ra.graphs.get(gid), gb, True))


def _pair(d: Dump, peers: LayoutPeers, ra: Rank, t: TensorRef, ref: int, it: int, result: CompareResult,
          lacking: set[int], counted: bool) -> None:
    rb = d.rank(ref)
    gid = t.graph_id
    ga, gb = ra.graphs.get(gid), rb.graphs.get(gid)
    if it not in rb.iterations(gid):
        lacking.add(ref)
    # node names with run-specific counters (input-16) are paired as in plain data parallelism
    nm = peers.matches.get((ra.rank, ref, gid))
    if nm is None:
        nm = peers.matches[(ra.rank, ref, gid)] = match_graphs(ga, gb, None, result.warnings)
    node_b, method = nm.partner(t.node)
    tb = local_map(rb, gid, it).get((node_b, t.io, t.slot)) if node_b is not None and it in rb.iterations(gid) else None
    if tb is not None and (tb.kind, tb.param) != (t.kind, t.param):
        # the same name for another tensor (a counter that runs differently on each rank): not a replica
        peers.misnamed.setdefault((ra.rank, ref, gid), {}).setdefault(t.node, (t, tb))
        return
    p: Pair = make_pair(it, Side(d.root, ra.rank), Side(d.root, ref), gid, t, tb,
                        method if tb is not None else "", ga, gb, counted)
    rec = ga.record_of(t.node) if ga is not None and t.node in ga and t.io == "output" else None
    s = peers.shard(ra.rank, rec, t.slot) if rec is not None else None
    if s is not None and not s.covers_whole():
        p.shard = shard_text(s, peers.layouts.get(ra.rank))
    gathered = gathered_params(ga).get(t.node) if rec is not None and ga is not None else None
    if gathered is not None:     # a parameter all-gathered whole (FSDP): named after it
        p.kind, p.param, p.shard = Kind.WEIGHT, gathered, "all-gathered (unsharded)"
    result.pairs.append(p)

