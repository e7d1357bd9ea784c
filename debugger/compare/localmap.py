"""A rank's tensors as the rank stored them: a shard of a sharded parameter as the shard itself.

Comparison works on shards (a shard against its replicas, each rank's shard of a logical tensor placed by
its index), while the model may hand out a sharded parameter as its whole logical tensor
(``Rank.local_index`` then keeps the rank's own parts).
"""
from __future__ import annotations

import weakref
from typing import Mapping

from ..model import Rank, TensorRef

Key = tuple[str, str, int]
_MAPS: "weakref.WeakKeyDictionary[Rank, dict[tuple[int, int], dict[Key, TensorRef]]]" = weakref.WeakKeyDictionary()


def local_map(rank: Rank, graph_id: int, iteration: int) -> Mapping[Key, TensorRef]:
    """The rank's own tensors of one graph and iteration keyed by (node, io, slot) (built once)."""
    local = getattr(rank, "local_index", None)
    if local is None:                 # a model that hands out each rank's tensors as stored
        return rank.tensor_map(graph_id, iteration)
    maps = _MAPS.setdefault(rank, {})
    got = maps.get((graph_id, iteration))
    if got is None:
        got = maps[(graph_id, iteration)] = {t.key: t for t in local.get((graph_id, iteration), ())}
    return got
