"""Which rank's shard of a diverging logical tensor differs: each distinct shard of side a compared with
the same indices of side b.

With values on both sides the shard is compared with side b's logical tensor at the shard's indices;
with statistics only, with a shard of side b that holds the same indices (the same sharding on both
runs); otherwise the shard cannot be told and the pair says so.
"""
from __future__ import annotations

from typing import Mapping

from ..formats.base import TensorSource
from ..formats.parallel import RankLayout
from ..model.logical import LogicalSource, Piece, distinct_pieces
from .grades import ERROR, GradeThresholds, grade
from .outcome import Outcome
from .pairs import Pair, Side
from .peers import shard_text
from .statistics_only import compare_statistics
from .values import compare_arrays


def localize(p: Pair, th: GradeThresholds | None = None, layouts: Mapping[int, RankLayout | None] | None = None) -> None:
    """Name the rank(s) of side a whose shard differs in ``p.shard`` (side a's rank: the first of them;
    ``layouts``: side a's ranks' layouts, for the mesh dimensions' names)."""
    src_a = p.ref_a.source if p.ref_a is not None else None
    if p.ref_b is None or not isinstance(src_a, LogicalSource):
        return
    th = th or GradeThresholds()
    src_b = p.ref_b.source
    bad: list[Piece] = []
    unknown = 0
    for piece in distinct_pieces(src_a.pieces):
        verdict = _piece_differs(piece, src_b, th)
        if verdict is None:
            unknown += 1
        elif verdict:
            bad.append(piece)
    if bad:
        ranks = sorted({q.rank for q in src_a.pieces if q.shard.key() == bad[0].shard.key()})
        more = f" (and {len(bad) - 1} other shard(s))" if len(bad) > 1 else ""
        lay = (layouts or {}).get(ranks[0])
        p.shard = f"{shard_text(bad[0].shard, lay)} on rank{'s' * (len(ranks) > 1)} {', '.join(map(str, ranks))}{more}"
        p.a = Side(p.a.dump, ranks[0])
    elif unknown:
        p.shard = (f"logical tensor of {len(src_a.pieces)} shard(s); which one differs needs values on both sides "
                   "or the same sharding on side b")


def _piece_differs(piece: Piece, src_b: TensorSource, th: GradeThresholds) -> bool | None:
    """Whether side a's shard differs from side b at its indices (None: cannot tell)."""
    if piece.source.has_values and src_b.has_values:
        import numpy as np
        whole = np.asarray(src_b.array(mmap=False))
        local = np.asarray(piece.source.array(mmap=False))
        if piece.shard.flat is not None:
            region = whole.reshape(-1)[slice(*piece.shard.flat)]
        elif piece.shard.index is not None:
            region = whole[np.ix_(*[np.concatenate([np.arange(a, b) for a, b in runs]) for runs in piece.shard.index])]
        else:
            region = whole
        local = local.reshape(region.shape)
        return grade(compare_arrays(local, region), th, True)[0] == ERROR
    if isinstance(src_b, LogicalSource):
        for q in src_b.pieces:
            if q.shard.key() == piece.shard.key():
                sa, sb = piece.source.stored_stats(), q.source.stored_stats()
                out = Outcome()
                if sa and sb and compare_statistics(sa, sb, out) and out.stat_diff is not None:
                    return grade(out, th, True)[0] == ERROR
    return None

