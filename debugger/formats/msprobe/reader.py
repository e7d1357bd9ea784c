"""msprobe dumps (MindStudio Probe, PyTorch and MindSpore) behind the format seam.

Iterations are msprobe's steps, ranks its ``rank{R}`` folders (``proc{PID}``: one process without
torch.distributed), and each rank has one graph (id 0): the ops of every step in call order.
"""
from __future__ import annotations

import os
from functools import cached_property

from ...errors import DumpError, NotADumpError
from ..base import BOTH, STATISTICS, VALUES, DumpSource, Format, RankInfo, RankReader, TensorRecord
from ..files import FileDigest, hash_entries
from ..records import GraphRecord
from . import layout as L
from .detect import why_not
from .dumpjson import Step, read_step
from .sequence import DATAFLOW, StepTensors, build, graph_key

_FRAMEWORKS = {"pytorch": "PyTorch", "mindspore": "MindSpore"}
_TENSOR_SUFFIXES = (".pt", ".npy")


class MsprobeRank(RankReader):
    """One rank: its ``step{N}/rank{R}`` folders, parsed on first use."""

    def __init__(self, rank: int, path: str, steps: dict[int, str]) -> None:
        self.rank = rank
        self.path = path
        self.steps = dict(sorted(steps.items()))
        self.warnings: list[str] = []

    def __repr__(self) -> str:
        return f"MsprobeRank({self.rank}, {self.path!r})"

    def _warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

    @cached_property
    def _parsed(self) -> list[tuple[int, Step]]:
        out = []
        for sn, d in self.steps.items():
            try:
                step = read_step(d)
            except DumpError as exc:
                self._warn(f"{exc}; step {sn} skipped")
                continue
            for w in step.warnings:
                self._warn(w)
            out.append((sn, step))
        return out

    @cached_property
    def _built(self) -> tuple[GraphRecord, dict[int, StepTensors]] | None:
        parsed = self._parsed
        if not parsed:
            return None
        first = parsed[0][1]
        name = f"{_FRAMEWORKS.get(first.framework.lower(), first.framework or '?')} {first.task or '?'} dump, " \
               f"level {first.level or '?'}: call sequence"
        return build(parsed, os.path.join(first.path, L.DUMP_JSON), name)

    @cached_property
    def _files(self) -> dict[int, dict[str, tuple[int, int]]]:
        """step -> tensor file name -> (size, mtime_ns), one scandir per step."""
        out: dict[int, dict[str, tuple[int, int]]] = {}
        for sn, d in self.steps.items():
            files: dict[str, tuple[int, int]] = {}
            try:
                entries = list(os.scandir(os.path.join(d, L.DATA_DIR)))
            except OSError:
                entries = []
            for e in entries:
                if not e.name.endswith(_TENSOR_SUFFIXES):
                    continue
                try:
                    if not e.is_file(follow_symlinks=False):
                        self._warn(f"{e.path}: not a regular file; skipped")
                        continue
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                files[e.name] = (st.st_size, st.st_mtime_ns)
            out[sn] = files
        return out

    def info(self) -> RankInfo:
        """Framework, task and level from dump.json; what the task saved."""
        parsed = self._parsed
        if not parsed:
            return RankInfo(raw={"dataflow": DATAFLOW}, iterations_vary=True, records=_records(None))
        s = parsed[0][1]
        has_files = any(self._files.get(sn) for sn, _ in parsed)
        saved = BOTH if has_files else (STATISTICS if s.task in ("statistics", "") else VALUES)
        return RankInfo(framework=_FRAMEWORKS.get(s.framework.lower(), s.framework or None), saved=saved,
                        net=None, raw={"task": s.task, "level": s.level, "framework": s.framework,
                                       "tool": "msprobe", "folder": os.path.basename(s.path), "dataflow": DATAFLOW},
                        iterations_vary=True, records=_records(s.level))

    def graph_ids(self) -> list[int]:
        """One graph, 0, when any step is readable."""
        return [0] if self._parsed else []

    def graph_key(self, graph_id: int) -> str | None:
        """Digest of the graph's content."""
        b = self._built
        return graph_key(b[0]) if b is not None and graph_id == 0 else None

    def read_graph(self, graph_id: int) -> GraphRecord | None:
        """The call-sequence graph of every step."""
        b = self._built
        return b[0] if b is not None and graph_id == 0 else None

    def iterations(self, graph_id: int) -> list[int]:
        """Readable steps."""
        return [sn for sn, _ in self._parsed] if graph_id == 0 else []

    def tensors(self, graph_id: int, iteration: int, graph: GraphRecord | None) -> list[TensorRecord]:
        """One record per (op, io, slot) of the step; values from the .pt file when it exists."""
        from .tensor import MsprobeTensor   # numpy with it: when tensors are asked for, not on opening

        b = self._built
        if b is None or graph_id != 0 or iteration not in b[1]:
            return []
        names = {n.name: n.op_type for n in graph.nodes} if graph is not None else {}
        st = b[1][iteration]
        out: list[TensorRecord] = []
        seen: set[tuple[str, str, int]] = set()
        missing = 0
        for node, io, slot, item in st.rows:
            if (node, io, slot) in seen:
                continue
            seen.add((node, io, slot))
            # a weight after its update may be the next step's entry: its file lies in that step's folder
            src_step = st.borrowed.get((node, io, slot), iteration)
            d = self.steps[src_step]
            files = self._files.get(src_step, {})
            path, size, mtime = "", 0, 0
            if item.data_name:
                if os.path.basename(item.data_name) != item.data_name or item.data_name not in files:
                    missing += 1
                else:
                    path = os.path.join(d, L.DATA_DIR, item.data_name)
                    size, mtime = files[item.data_name]
            src = MsprobeTensor(path, size, mtime, f"{d}/{L.DUMP_JSON}:{node} {io} {slot}", item.dtype, item.shape,
                                item.stats)
            out.append(TensorRecord(node, names.get(node, ""), io, slot, src, item.dtype or None, node in names))
        if missing:
            self._warn(f"{self.steps[iteration]}/{L.DATA_DIR}: {missing} tensor file(s) named in dump.json are "
                       "missing; their statistics are used")
        return out

    def tensor_file_count(self) -> int:
        """Tensor entries of every readable step."""
        b = self._built
        return sum(len(t.rows) for t in b[1].values()) if b is not None else 0

    def tensor_bytes(self) -> int:
        """Bytes of the tensor files."""
        return sum(size for files in self._files.values() for size, _ in files.values())

    def fingerprint(self) -> str:
        """Names, sizes and mtimes of the rank's files in every step."""
        return self.stamp()[0]

    def stamp(self) -> tuple[str, float | None]:
        """(fingerprint, newest mtime) of the rank's files in every step, in one pass."""
        h = FileDigest()
        for sn, d in self.steps.items():
            for sub in (d, os.path.join(d, L.DATA_DIR)):
                hash_entries(h, sub, prefix=f"{sn}\0")
        return h.stamp()


def _records(level: str | None) -> str:
    """What an msprobe dump holds and what it does not, for `tdbg info`."""
    calls = {"L0": "module calls", "L1": "API calls", "mix": "module and API calls"}.get(level or "", "calls")
    return (f"msprobe level {level or '?'}: the {calls} of each step, with their inputs' and outputs' "
            f"statistics (and tensors where the task saved them), forward and backward, and the stack of each "
            f"call; not recorded: the framework version, the device and the network's name; {DATAFLOW}")


class MsprobeFormat(Format):
    """msprobe's dump tree: ``step{N}/rank{R}/dump.json``."""

    name = "msprobe"
    description = "msprobe (MindStudio Probe) dump (step{N}/rank{R}|proc{PID}/dump.json, dump_tensor_data/*.pt)"

    def root_of(self, path: str) -> str | None:
        """The folder holding ``step{N}`` folders: ``path`` itself, or above a step or rank folder."""
        return L.root_of(path)

    def why_not(self, path: str) -> str:
        """The one thing an msprobe dump needs."""
        return why_not(path)

    def open(self, root: str, path: str) -> DumpSource:
        """Every rank of ``root``, or the one ``path`` names (a rank folder: that rank in every step)."""
        listing = L.list_root(root)
        if not listing.ranks:
            raise NotADumpError(root, f"not an msprobe dump ({self.why_not(root)})")
        p = os.path.abspath(path)
        ranks = sorted(listing.ranks)
        if L.is_rank_dir(p):
            name = os.path.basename(p)
            ranks = [r for r in ranks if listing.names.get(r) == name] or ranks
        readers = [MsprobeRank(r, os.path.join(root, listing.names[r]), listing.ranks[r]) for r in ranks]
        return DumpSource(root, self.name, list(readers), list(listing.warnings))


FORMAT = MsprobeFormat()
