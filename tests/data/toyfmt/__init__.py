"""A toy format (tests/test_new_format.py copies it in as debugger/formats/toyfmt/): one folder holding
``toy.json`` (a graph of named nodes) and one ``<node>.npy`` per output tensor, iteration 0, rank 0."""
from __future__ import annotations

import hashlib
import json
import os

from ..base import DumpSource, Format, RankInfo, RankReader, TensorRecord
from ..files import hash_entries
from ..npy import NpyTensor
from ..records import GraphRecord, Kind, NodeRecord

MARKER = "toy.json"


class ToyRank(RankReader):
    """The one rank of a toy dump."""

    def __init__(self, root: str) -> None:
        self.rank, self.root, self.path, self.warnings = 0, root, root, []

    def info(self) -> RankInfo:
        return RankInfo(framework="toy")

    def graph_ids(self) -> list[int]:
        return [0]

    def graph_key(self, graph_id: int) -> str | None:
        return self.fingerprint()

    def read_graph(self, graph_id: int) -> GraphRecord | None:
        with open(os.path.join(self.root, MARKER)) as f:
            spec = json.load(f)
        nodes = [NodeRecord(n["name"], n["op"], "", inputs=[(i, "data") for i in n.get("inputs", [])],
                            kind=Kind(n.get("kind", "other")), is_parameter=n.get("kind") == "weight")
                 for n in spec["nodes"]]
        return GraphRecord(0, "toy", nodes, [nodes[-1].name], os.path.join(self.root, MARKER))

    def iterations(self, graph_id: int) -> list[int]:
        return [0]

    def tensors(self, graph_id: int, iteration: int, graph: GraphRecord | None) -> list[TensorRecord]:
        out = []
        for name in sorted(os.listdir(self.root)):
            if name.endswith(".npy"):
                st = os.stat(os.path.join(self.root, name))
                out.append(TensorRecord(name[:-4], "", "output", 0,
                                        NpyTensor(os.path.join(self.root, name), st.st_size, st.st_mtime_ns)))
        return out

    def tensor_file_count(self) -> int:
        return sum(n.endswith(".npy") for n in os.listdir(self.root))

    def tensor_bytes(self) -> int:
        return sum(os.path.getsize(os.path.join(self.root, n)) for n in os.listdir(self.root) if n.endswith(".npy"))

    def fingerprint(self) -> str:
        h = hashlib.blake2b(digest_size=16)
        hash_entries(h, self.root)
        return h.hexdigest()


class ToyFormat(Format):
    """A folder with toy.json."""

    name, description = "toy", "a toy format (test only)"

    def root_of(self, path: str) -> str | None:
        return path if os.path.isfile(os.path.join(path, MARKER)) else None

    def why_not(self, path: str) -> str:
        return f"no {MARKER}"

    def open(self, root: str, path: str) -> DumpSource:
        return DumpSource(root, self.name, [ToyRank(root)])


FORMAT = ToyFormat()
