"""What a dump holds, as tdbg sees it, whatever its format. Layers, each importing only those above it:

- ``source``  framework-free code about source stacks (SourceIndex, user_first, statements, layer lines)
- ``graph``   Graph (a rank's node records and their topology, one cache of derived facts) and Node
- ``locate``, ``layers``  facts derived from one graph (execution position, user line, a layer's nodes)
- ``logical``  LogicalSource: a tensor whole from its shards on several ranks
- ``tensors`` TensorRef
- ``stepseries``  a rank's recorded iterations read as its per-step series (one step each)
- ``shards``  ShardIndex: which ranks' tensors are parts of one logical tensor (dumps with a parallel layout)
- ``rank``    Rank and GraphCache; ``dump``: Dump and opening dumps
- ``history`` the one notion of a tensor's previous value
"""
from __future__ import annotations

from .dump import Dump, dump_at, find_dump_roots, open_dump, open_dumps, shard_pieces
from .graph import Graph, Node
from .rank import GraphCache, Rank
from .tensors import TensorRef

__all__ = ["Dump", "dump_at", "Graph", "GraphCache", "Node", "Rank", "TensorRef", "find_dump_roots", "open_dump", "open_dumps",
           "shard_pieces"]
