"""MindSpore's dump layout (1.3 to 2.10) behind the format seam: rank_N/<net>/<graph>/<iteration>/*.npy."""
from __future__ import annotations

import hashlib
import os
from functools import cached_property

from ...errors import CorruptFileError, DumpError
from ..base import BOTH, STATISTICS, VALUES, DumpSource, Format, RankInfo, RankReader, TensorRecord
from ..files import FileDigest, hash_tree, read_bytes
from ..records import GraphRecord
from . import exec_order as eo
from .graph_ir import read_graph_ir
from .graph_pb import read_graph_pb
from .matching import file_key, match_files
from .semantics import annotate, mark_weights, weights_of
from .statistic import StatRow, StatTensor, read_statistic_csv
from .tree import (RANK_RE, RankListing, TensorFile, graph_pb_name, is_rank_dir, list_rank, list_ranks,
                   net_names, outline_rank, rank_dirs, read_metadata)

_SAVED = {"tensor": VALUES, "statistic": STATISTICS, "full": BOTH}


class MindSporeRank(RankReader):
    """One ``rank_N`` directory, listed on first use (directory listings and small files only)."""

    def __init__(self, rank: int, path: str) -> None:
        self.rank = rank
        self.path = path
        self.warnings: list[str] = []
        self.config, self.dump_config = read_metadata(path, self.warnings)

    def __repr__(self) -> str:
        return f"MindSporeRank({self.rank}, {self.path!r})"

    @cached_property
    def listing(self) -> RankListing:
        """What the rank dir holds."""
        try:
            lst = list_rank(self.rank, self.path)
        except DumpError as exc:
            return self._take(exc)
        return self._take(lst)

    def _take(self, got: RankListing | DumpError) -> RankListing:
        """``got`` as this rank's listing, its warnings (or the error) among the rank's."""
        if isinstance(got, DumpError):
            got = RankListing(self.rank, self.path, warnings=[str(got)])
        self._warn_once(got.warnings)     # listed again after release(), or after the outline
        self.__dict__["listing"] = got     # what the cached property would have kept
        return got

    @property
    def outline(self) -> RankListing:
        """The listing when made, else the rank's outline (graphs, execution orders, the tensor folders' keys
        without their files): enough for graphs and iterations, at a few folders' cost."""
        got = self.__dict__.get("listing") or self.__dict__.get("_outline")
        if got is None:
            try:
                got = outline_rank(self.rank, self.path)
            except DumpError:
                return self.listing        # says what is wrong, as a rank's warning
            self.__dict__["_outline"] = got
            self._warn_once(got.warnings)
        return got

    def _warn_once(self, warnings: list[str]) -> None:
        """Add the ``warnings`` the rank has not said yet."""
        known = set(self.warnings)
        self.warnings.extend(w for w in warnings if w not in known)

    def release(self) -> None:
        """Forget the listing and what was read from it (listed again on next use)."""
        for name in ("listing", "_orders", "_kept_graphs"):
            self.__dict__.pop(name, None)

    def info(self) -> RankInfo:
        """MindSpore version, device and what was saved, from ``.dump_metadata``."""
        settings = self.dump_config.get("common_dump_settings", {})
        # the net folders' names only: a rank's info does not list its tensor folders
        nets = self.listing.nets if "listing" in self.__dict__ else net_names(self.path)
        return RankInfo(
            framework="MindSpore", framework_version=self.config.get("ms_version"),
            device_target=self.config.get("device_target"),
            saved=_SAVED.get(str(settings.get("saved_data"))) if isinstance(settings, dict) else None,
            net=nets[0] if len(nets) == 1 else nets,
            raw={"config": self.config, "dump_config": self.dump_config})

    def graph_ids(self) -> list[int]:
        """Graphs with a graph file or a tensor dir."""
        lst = self.outline
        return sorted(set(lst.graph_pb) | set(lst.graph_ir) | {g for g, _ in lst.tensors})

    @cached_property
    def _orders(self) -> dict[int, list[str]]:
        out: dict[int, list[str]] = {}
        for gid, path in self.outline.exec_order.items():
            try:
                out[gid] = eo.read_execution_order(path)
            except DumpError as exc:
                self.warnings.append(str(exc))
        return out

    def graph_key(self, graph_id: int) -> str | None:
        """Digest of the graph file (.pb, else .ir) and the execution order; with several graphs, of every
        graph file too (a graph's weights are known from the other graphs' optimizers: mark_weights)."""
        order = "\n".join(self._orders.get(graph_id, []))
        digest = self._file_digest(graph_id)
        if digest is None:
            return None
        key = f"{digest}|{hashlib.blake2b(order.encode(), digest_size=16).hexdigest()}"
        return key if len(self.graph_ids()) < 2 else f"{key}|{self._rank_graphs_digest}"

    def _file_digest(self, graph_id: int) -> str | None:
        """Which graph file is read (.pb, else .ir) and a digest of its bytes; None when neither is readable."""
        for path in (self.outline.graph_pb.get(graph_id), self.outline.graph_ir.get(graph_id)):
            if not path:
                continue
            try:
                digest = hashlib.blake2b(read_bytes(path, "graph"), digest_size=16).hexdigest()
            except CorruptFileError:
                continue   # read_graph reports it
            return f"{path.endswith('.pb')}|{digest}"
        return None

    @cached_property
    def _rank_graphs_digest(self) -> str:
        """A digest of every graph file of the rank (what the weights of each graph depend on)."""
        return hashlib.blake2b("\n".join(str(self._file_digest(g)) for g in self.graph_ids()).encode(),
                               digest_size=16).hexdigest()

    @cached_property
    def _rank_weights(self) -> frozenset[str]:
        """The parameters an optimizer kernel of any graph of the rank updates; each graph read once here,
        kept for read_graph."""
        kept: dict[int, GraphRecord | None] = {}
        for gid in self.graph_ids():
            kept[gid] = self._read_one_graph(gid)
        self.__dict__["_kept_graphs"] = kept
        return frozenset(w for r in kept.values() if r is not None for w in weights_of(r))

    def read_graph(self, graph_id: int) -> GraphRecord | None:
        """The .pb, falling back to the .ir; hints from MindSpore's conventions, the weights from every
        graph of the rank (control flow splits a step into several graphs)."""
        if len(self.graph_ids()) < 2:
            return self._read_one_graph(graph_id)
        weights = self._rank_weights
        kept = self.__dict__.get("_kept_graphs", {})
        record = kept.pop(graph_id) if graph_id in kept else self._read_one_graph(graph_id)
        return mark_weights(record, weights) if record is not None else None

    def _read_one_graph(self, graph_id: int) -> GraphRecord | None:
        """One graph: the .pb, falling back to the .ir; hints from MindSpore's conventions."""
        pb, ir = self.outline.graph_pb.get(graph_id), self.outline.graph_ir.get(graph_id)
        if ir and not pb:
            # MindSpore writes both; the text form can hold fewer nodes (93 of 122 in one real dump)
            self.warnings.append(f"{os.path.join(os.path.dirname(ir), graph_pb_name(graph_id))}: missing; graph {graph_id} "
                                 f"is read from {ir} instead, which can hold fewer nodes")
        for path, reader in ((pb, read_graph_pb), (ir, read_graph_ir)):
            if not path:
                continue
            try:
                record = reader(path, graph_id)
            except CorruptFileError as exc:
                fallback = f"; using the .ir text instead ({ir})" if reader is read_graph_pb and ir else ""
                self.warnings.append(f"{exc}{fallback}")
                continue
            names = {n.name for n in record.nodes}
            order = self._orders.get(graph_id, [])
            record.execution_order = [k for k in order if k in names]
            if len(record.execution_order) < len(order):
                self.warnings.append(f"{self.outline.exec_order.get(graph_id)}: {len(order) - len(record.execution_order)} "
                                     f"name(s) match no node of graph {graph_id}; ignored")
            return annotate(record, self.config.get("device_target"))
        if any(g == graph_id for g, _ in self.outline.tensors):
            self.warnings.append(f"{self.path}/graphs: no readable graph for graph {graph_id}; its tensors are "
                                 "listed without kinds or source")
        return None

    def iterations(self, graph_id: int) -> list[int]:
        """Iterations with a tensor dir."""
        return sorted(it for g, it in self.outline.tensors if g == graph_id)

    @cached_property
    def _run_histories(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for gid, path in self.outline.run_history.items():
            try:   # data-parallel runs list each iteration once per device: keep each once
                out[gid] = sorted(set(eo.read_run_history(path)))
            except DumpError as exc:
                self.warnings.append(str(exc))
        return out

    def run_history(self, graph_id: int) -> list[int]:
        """From ``ms_global_execution_order_graph_N.csv``."""
        return self._run_histories.get(graph_id, [])

    def tensors(self, graph_id: int, iteration: int, graph: GraphRecord | None) -> list[TensorRecord]:
        """One record per (node, io, slot): the newest file wins; names matched to the graph."""
        from ..npy import NpyTensor   # numpy with it: the first tensor asked for loads it, opening does not

        files = self.listing.tensors.get((graph_id, iteration), [])
        rows = self._stat_rows(graph_id, iteration)
        names = match_files(graph, list(files) + [TensorFile(r.where, r.name, 0) for r in rows])
        # the newest file of each (node, io, slot) first, then one record per winner
        best: dict[tuple[str, str, int], tuple[int, TensorFile, str | None]] = {}
        get = names.get
        for f in files:
            n = f.name
            node = get(n.op_name)
            k = (node or n.op_name, n.io, n.slot)
            old = best.get(k)
            if old is None or n.timestamp > old[0]:
                best[k] = (n.timestamp, f, node)
        newest: dict[tuple[str, str, int], tuple[int, TensorRecord]] = {
            k: (ts, TensorRecord(k[0], f.name.op_type, k[1], k[2], NpyTensor(f.path, f.size, f.mtime_ns), f.name.dtype,
                                 node is not None))
            for k, (ts, f, node) in best.items()}
        # saved_data statistic: a row is the tensor; full: the .npy beside it wins (its values give every statistic)
        stat_newest: dict[tuple[str, str, int], tuple[int, StatRow]] = {}
        for r in rows:
            node = names.get(r.name.op_name)
            k = (node or r.name.op_name, r.name.io, r.name.slot)
            if k not in stat_newest or r.name.timestamp > stat_newest[k][0]:
                stat_newest[k] = (r.name.timestamp, r)
        for k, (ts, r) in stat_newest.items():
            if k in newest:
                continue
            rec = TensorRecord(k[0], r.name.op_type, r.name.io, r.name.slot,
                               StatTensor(r.where, r.dtype, r.shape, r.stats, r.digest), r.dtype,
                               names.get(r.name.op_name) is not None)
            newest[k] = (ts, rec)
        return [r for _, r in newest.values()]

    def _stat_rows(self, graph_id: int, iteration: int) -> list[StatRow]:
        path = self.listing.statistics.get((graph_id, iteration))
        if path is None:
            return []
        try:
            rows, warnings = read_statistic_csv(path)
        except (DumpError, OSError) as exc:
            self.warnings.append(f"{exc}; its statistics are not used" if isinstance(exc, DumpError)
                                 else f"{path}: cannot read ({exc}); its statistics are not used")
            return []
        for w in warnings:
            if w not in self.warnings:
                self.warnings.append(w)
        return rows

    def node_alias(self, graph: GraphRecord, name: str) -> str | None:
        """A node's full name from a tensor-file spelling such as ``fc1_weight``."""
        return file_key(graph, name)

    def tensor_file_count(self) -> int:
        """Every tensor file, before newest-timestamp de-duplication."""
        return sum(len(files) for files in self.listing.tensors.values())

    def tensor_bytes(self) -> int:
        """Total size of the tensor files."""
        return sum(f.size for files in self.listing.tensors.values() for f in files)

    def fingerprint(self) -> str:
        """Names, sizes and mtimes of every file under the rank dir."""
        return self.stamp()[0]

    def stamp(self) -> tuple[str, float | None]:
        """(fingerprint, newest mtime) of every file under the rank dir, in one walk."""
        h = FileDigest()
        hash_tree(h, self.path)
        return h.stamp()


def list_readers(readers: list[RankReader]) -> None:
    """Every rank not listed yet, listed in one go (tree.list_ranks: the work shared between ranks)."""
    todo = [r for r in readers if isinstance(r, MindSporeRank) and "listing" not in r.__dict__]
    if len(todo) < 2:
        return
    for reader, got in zip(todo, list_ranks([(r.rank, r.path) for r in todo])):
        reader._take(got)


class MindSporeFormat(Format):
    """MindSpore's dump tree: a root holding ``rank_N`` dirs."""

    name = "mindspore"
    description = "MindSpore dump (rank_N/<net>/<graph>/<iteration>/*.npy, graphs/*.pb)"

    def root_of(self, path: str) -> str | None:
        """``path`` when it holds rank_N dirs; its parent when it is one."""
        if rank_dirs(path):
            return path
        if is_rank_dir(path):
            return os.path.dirname(os.path.normpath(path))
        return None

    def why_not(self, path: str) -> str:
        """The one thing a MindSpore dump needs."""
        return "no rank_N directory found"

    def open(self, root: str, path: str) -> DumpSource:
        """Every rank of ``root``, or only ``path`` when it is a rank dir."""
        if is_rank_dir(path) and os.path.normpath(path) != os.path.normpath(root):
            m = RANK_RE.match(os.path.basename(os.path.normpath(path)))
            assert m is not None
            ranks = [MindSporeRank(int(m.group(1)), path)]
        else:
            ranks = [MindSporeRank(r, p) for r, p in rank_dirs(root)]
        # In multi-rank CPU runs only rank_0 may have .dump_metadata: the others share it.
        donor = next((rk for rk in ranks if rk.config), None)
        for rk in ranks:
            if donor is not None and not rk.config:
                rk.config, rk.dump_config = dict(donor.config), dict(donor.dump_config)
        return DumpSource(root, self.name, list(ranks), list_together=list_readers)


FORMAT = MindSporeFormat()
