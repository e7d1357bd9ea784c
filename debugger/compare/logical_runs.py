"""Run A against run B across parallel layouts (TP=2 against one process, FSDP against DDP): logical
parameters, gradients and optimizer state, and the loss, per iteration, matched by name and kind.

Each side's tensor is the logical one, assembled from every rank's shard (:class:`LogicalSource`:
values placed by the shards' indices, statistics combined exactly); a tensor no rank shards is read
from the lowest rank that holds it. The loss is the mean of the ranks' losses (:mod:`.meansource`).
Activations are left out: their shapes and data split differ between layouts. Pairs are graded as
in every comparison, against the coarser precision of the two runs' weights (:mod:`.precision`).
The first divergence is the earliest iteration with an error, and in it the first tensor in the
order an iteration makes them: the loss, the gradients, the optimizer state, the weights (the value
after the step), parameters in the order the run uses them.
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

from ..stats.cache import StatsCache
from ..errors import QueryError
from ..common.executors import Workers
from ..formats.parallel import REPLICATE, ShardRecord
from ..formats.records import Kind
from ..model import Dump, Rank, TensorRef
from ..model.graph import Graph
from ..model.logical import LogicalSource, Piece, distinct_pieces
from ..model.shards import shard_of
from ..common.selection import ranges_text
from .evaluate import finish
from .grades import ERROR, GradeThresholds, as_grade_thresholds
from .localize import localize
from .meansource import MeanSource
from .localmap import local_map
from .pairs import CompareResult, Pair, Progress, Side, iteration_set, open_any
from .precision import coarser, thresholds_for, weight_precision

LOGICAL_KINDS = (Kind.LOSS, Kind.GRADIENT, Kind.OPTIMIZER_STATE, Kind.WEIGHT)   # the order an iteration makes them
LOSS_NAME = "loss"

Key = tuple[str, str]            # (kind, name)


def compare_logical(dump_a: "Dump | str", dump_b: "Dump | str", iterations: "Iterable[int] | str | None" = None,
                    thresholds: "GradeThresholds | Mapping[str, Any] | str | None" = None, jobs: int | None = None,
                    cache: StatsCache | None = None, *, fast: bool = True, progress: Progress | None = None,
                    workers: Workers | None = None) -> CompareResult:
    """Compare the logical parameters, gradients, optimizer state and loss of run A with run B's."""
    da, db = open_any(dump_a), open_any(dump_b)
    th = as_grade_thresholds(thresholds)
    sel = iteration_set(iterations)
    result = CompareResult("logical", da.root, db.root, sorted(set(da.rank_ids) | set(db.rank_ids)), [], th)
    its_a, its_b = _iterations(da), _iterations(db)
    common = its_a & its_b if sel is None else its_a & its_b & sel
    if sel is not None and not common:
        raise QueryError(da.root, f"no selected iteration ({ranges_text(sel)}) was dumped on both sides")
    for only, d in ((its_a - its_b, da), (its_b - its_a, db)):
        only = only if sel is None else only & sel
        if only:
            result.warnings.append(f"{d.root}: iteration(s) {ranges_text(only)} dumped on this side only; not compared")
    precision = coarser(weight_precision(da), weight_precision(db))
    for it in sorted(common):
        _iteration_pairs(result, da, db, it, precision)
    if not common:
        result.empty_reason = (f"no iteration was dumped on both sides (a has {ranges_text(its_a)}, "
                               f"b has {ranges_text(its_b)})")
    finish(result, common, jobs, cache, fast, progress, workers)
    result.pairs.sort(key=lambda p: (p.iteration, p.position))
    result.first_divergence = _first_error(result.pairs)
    if result.first_divergence is not None:
        localize(result.first_divergence, thresholds_for(th, precision), {r.rank: r.info.layout for r in da.ranks})
    return result


def _first_error(pairs: list[Pair]) -> Pair | None:
    """The earliest iteration's first error in the order an iteration makes its tensors (whatever ranks hold
    them: a pipeline's loss lives on its last stage); a tensor missing on one side only when nothing else is."""
    errors = [p for p in pairs if p.grade == ERROR]
    real = [p for p in errors if not p.missing] or errors
    return min(real, key=lambda p: (p.iteration, p.position), default=None)


def _iterations(d: Dump) -> set[int]:
    return {it for r in d.ranks for it in r.iterations()}


def _iteration_pairs(result: CompareResult, da: Dump, db: Dump, it: int, precision: str | None) -> None:
    side_a, side_b = _collect(da, it, result.warnings), _collect(db, it, result.warnings)
    if side_a.loss_skipped or side_b.loss_skipped:
        for side in (side_a, side_b):
            side.refs.pop((Kind.LOSS, LOSS_NAME), None)
    order = {k: i for i, k in enumerate(side_a.order + [k for k in side_b.order if k not in side_a.order])}
    for key in sorted(set(side_a.refs) | set(side_b.refs), key=lambda k: (LOGICAL_KINDS.index(k[0]), order.get(k, 0))):
        ra, rb = side_a.refs.get(key), side_b.refs.get(key)
        ref = ra or rb
        assert ref is not None
        pos = LOGICAL_KINDS.index(Kind(key[0])) * (1 << 20) + order.get(key, 0)
        p = Pair(it, Side(da.root, ra.rank if ra else -1), Side(db.root, rb.rank if rb else -1), key[1], ref.param,
                 key[0], "output", 0, ref.graph_id, ref.op_type, match="logical" if ra and rb else "",
                 position=pos, ref_a=ra, ref_b=rb, precision=precision)
        result.pairs.append(p)


class _Side:
    """One run's logical tensors of one iteration."""

    def __init__(self) -> None:
        self.pieces: dict[Key, list[tuple[Rank, TensorRef]]] = {}
        self.losses: dict[int, list[TensorRef]] = {}
        self.order: list[Key] = []
        self.refs: dict[Key, TensorRef] = {}
        self.loss_skipped = False         # the ranks' losses could not be made one (several per rank)


def _collect(d: Dump, it: int, warnings: list[str]) -> _Side:
    """Every rank's share of the iteration's logical tensors, and the logical tensor of each."""
    side = _Side()
    for r in d.ranks:
        for gid in r.graph_ids:
            g = r.graphs.get(gid)
            if g is None or it not in r.iterations(gid):
                continue
            grads = _gradient_nodes(g)
            for t in local_map(r, gid, it).values():
                key = _key_of(g, t, grads)
                if key is None:
                    continue
                if key[0] == Kind.LOSS:
                    side.losses.setdefault(r.rank, []).append(t)
                    continue
                held = side.pieces.setdefault(key, [])
                if key not in side.order:
                    side.order.append(key)
                if all(rank.rank != r.rank for rank, _ in held):    # a second graph's copy in one iteration: the first
                    held.append((r, t))
    for key, held in side.pieces.items():
        ref = _logical_ref(d, key, held, warnings)
        if ref is not None:
            side.refs[key] = ref
    loss = _loss_ref(d, it, side.losses, warnings)
    side.loss_skipped = bool(side.losses) and loss is None
    if loss is not None:
        side.refs[(Kind.LOSS, LOSS_NAME)] = loss
        side.order.insert(0, (Kind.LOSS, LOSS_NAME))
    return side


def _key_of(g: Graph, t: TensorRef, grads: frozenset[str]) -> Key | None:
    """(kind, name) of a tensor that has a logical counterpart in any layout; None for the rest."""
    if t.io != "output" or t.node not in g:
        return None
    if t.kind == Kind.LOSS:
        return (Kind.LOSS, LOSS_NAME)
    if t.kind not in (Kind.WEIGHT, Kind.GRADIENT, Kind.OPTIMIZER_STATE) or not t.param or t.param not in t.node:
        return None      # named after its weight, or a kernel's or counter's name that differs between layouts
    rec = g.record_of(t.node)
    if t.kind == Kind.GRADIENT:
        return (t.kind, t.node) if t.node in grads or rec.op_type == "Gradient" else None
    return (t.kind, t.node) if rec.is_parameter else None


def _gradient_nodes(g: Graph) -> frozenset[str]:
    """Nodes whose value an optimizer kernel takes as a gradient."""
    def build(graph: Graph) -> frozenset[str]:
        out: set[str] = set()
        for n in graph.nodes():
            roles = n.record.input_roles
            if "gradient" in roles:
                vi = graph.value_inputs(n.name)
                out.update(vi[i] for i, role in enumerate(roles) if role == "gradient" and i < len(vi) and vi[i])
        return frozenset(out)
    return g.derived(_gradient_nodes, build)


def _logical_ref(d: Dump, key: Key, held: list[tuple[Rank, TensorRef]], warnings: list[str]) -> TensorRef | None:
    """The logical tensor of one key: a LogicalSource over the ranks' shards (one rank's tensor when none is sharded)."""
    pieces = []
    for rank, t in sorted(held, key=lambda h: h[0].rank):
        shard = _shard(rank, t)
        pieces.append(Piece(rank.rank, t.source, shard))
    first = held[0][1]
    if all(not p.shard.mesh for p in pieces):     # no rank shards it: every rank holds it whole
        return min((t for _, t in held), key=lambda t: t.rank)
    covered = sum(p.shard.local_size for p in distinct_pieces(pieces))
    total = math.prod(pieces[0].shard.shape)
    if covered < total:
        warnings.append(f"{d.root}: {key[1]}: the shards of ranks {ranges_text({p.rank for p in pieces})} hold {covered} "
                        f"of its {total} elements; not compared")
        return None
    src = LogicalSource(key[1], pieces)
    return TensorRef(src.owner_rank, first.graph_id, first.iteration, key[1], first.op_type, "output", 0, src,
                     first.kind, first.param)


def _shard(rank: Rank, t: TensorRef) -> ShardRecord:
    """The tensor's ShardRecord (by its parameter), or a whole replica when the rank does not shard it."""
    s = shard_of(t, rank.info.layout)
    return s if s is not None else ShardRecord("", (REPLICATE,), tuple(t.shape))


def _loss_ref(d: Dump, it: int, losses: dict[int, list[TensorRef]], warnings: list[str]) -> TensorRef | None:
    """The run's loss: the mean over the ranks that hold one (None with a warning when a rank holds several)."""
    if not losses:
        return None
    several = {r: len(ts) for r, ts in losses.items() if len(ts) != 1}
    if several:
        warnings.append(f"{d.root}: rank(s) {ranges_text(several)} record {max(several.values())} losses an iteration "
                        "(one per backward: micro-batches or accumulation); the loss is not compared")
        return None
    refs = [losses[r][0] for r in sorted(losses)]
    first = refs[0]
    src = MeanSource(LOSS_NAME, [t.source for t in refs]) if len(refs) > 1 else first.source
    return TensorRef(first.rank, first.graph_id, it, LOSS_NAME, first.op_type, "output", 0, src, Kind.LOSS, None)


def logical_layouts_differ(da: Dump, db: Dump) -> bool:
    """Whether two runs were laid out differently: either records a parallel layout (RankInfo.layout) and their
    rank counts or any rank's layout differ. Then ``compare`` compares logical tensors; dumps that record no
    layout (a framework's own dump) are compared rank by rank, as they always were."""
    layouts_a = {r: da.rank(r).info.layout for r in da.rank_ids}
    layouts_b = {r: db.rank(r).info.layout for r in db.rank_ids}
    if all(v is None for v in (*layouts_a.values(), *layouts_b.values())):
        return False
    return layouts_a != layouts_b

