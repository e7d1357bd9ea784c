"""Helpers of the watchpoint tests: planted values, and node names found in an opened dump by kind, param
and op type (never by spelling them out), so the tests follow the graph the way the engine must."""
from __future__ import annotations

import glob
import os
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pytest

import dumpmaker
from debugger import open_dump
from debugger.model import Dump
from debugger.watch.engine import ErrorRecord, ScanResult, scan
from debugger.watch.registry import Watchpoint

# 16 elements everywhere: the fc1 weight and gradient are (4, 4), the fc1 activation (batch 4, 4 units).
LAYERS = (("fc1", 4, 4, "Sigmoid"), ("fc2", 4, 2, None))
BATCH = 4
F32 = np.float32
OPTIMIZERS = {"ApplyMomentum", "Adam"}


@pytest.fixture(autouse=True)
def _cache_elsewhere(monkeypatch: Any, tmp_path: Any) -> None:
    """The CLI's default statistics cache must not land in the home directory."""
    monkeypatch.setenv("TDBG_CACHE_DIR", str(tmp_path / "cli-cache"))


def up(x: float) -> float:
    """A threshold just above ``x`` (relative 1e-7)."""
    return x + abs(x) * 1e-7 if x else 1e-30


def down(x: float) -> float:
    """A threshold just below ``x`` (relative 1e-7)."""
    return x - abs(x) * 1e-7 if x else -1e-30


def wp(name: str, **params: float | str) -> Watchpoint:
    """``Watchpoint.parse`` of ``name:k=v,...`` (floats written with repr, so they round-trip exactly)."""
    text = ",".join(f"{k}={v!r}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items())
    return Watchpoint.parse(f"{name}:{text}" if text else name)


class Layout:
    """Node names of one made dump layout, looked up in its graph by kind, param and op type."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.dump = open_dump(root)
        self.graph = self.dump.ranks[0].graph(0)
        self.order: list[str] = list(self.graph.execution_order)

    def _attr(self, n: str, key: str) -> Any:
        return getattr(self.graph.record_of(n), key)

    def of_kind(self, kind: str, param: str | None = None, op_type: str | None = None) -> list[str]:
        """Nodes of a kind (and param, op type), sorted by name."""
        return sorted(x.name for x in self.graph.nodes(kind)
                      if (param is None or x.param == param) and (op_type is None or x.op_type == op_type))

    def one(self, nodes: Sequence[str]) -> str:
        assert len(nodes) == 1, nodes
        return nodes[0]

    @property
    def weights(self) -> list[str]:
        """Trainable weights (Parameters the optimizer updates)."""
        return self.of_kind("weight")

    def gradient(self, param: str) -> str:
        """The backward kernel that computes a weight's gradient (kind gradient, param the weight); in data
        parallel the AllReduce (and Mul) after it are gradients of the weight too."""
        return self.one([n for n in self.of_kind("gradient", param) if n.startswith("Gradients/")])

    def state(self, param: str) -> list[str]:
        """Optimizer-state Parameters of a weight (moments...)."""
        return [n for n in self.of_kind("optimizer_state", param) if self._attr(n, "is_parameter")]

    @property
    def hyper(self) -> list[str]:
        """Optimizer Parameters that belong to no weight (learning rate, momentum): constant over a run."""
        return [n for n in self.of_kind("optimizer_state") if self._attr(n, "param") == n]

    def _source(self, src: str) -> str:
        while src in self.graph and self._attr(src, "op_type") == "Load":
            src = self._attr(src, "inputs")[0][0]
        return src

    def reader(self, param: str) -> tuple[str, int]:
        """(kernel, input slot) of the first forward kernel that reads a Parameter (through its Load)."""
        for k in self.order:
            if k.startswith("Gradients/") or self._attr(k, "op_type") in OPTIMIZERS:
                continue
            for slot, (src, _) in enumerate(self._attr(k, "inputs") or ()):
                if src and self._source(src) == param:
                    return k, slot
        raise AssertionError(f"no forward reader of {param}")

    def optimizer(self, param: str) -> str:
        """The optimizer kernel whose first input is the weight."""
        for k in self.order:
            if self._attr(k, "op_type") in OPTIMIZERS and self._source(self._attr(k, "inputs")[0][0]) == param:
                return k
        raise AssertionError(f"no optimizer kernel of {param}")

    def activation(self, op_type: str | None = None) -> str:
        """The forward activation kernel (of one op type)."""
        return self.one(self.of_kind("activation", op_type=op_type))

    @property
    def loss(self) -> str:
        """The loss kernel."""
        return self.one(self.of_kind("loss"))

    @property
    def data(self) -> str:
        """The float data input Parameter (inputs0)."""
        return self.one([n for n in self.of_kind("input") if self.output_dtype(n) == "float32"])

    def by_op(self, op_type: str) -> list[str]:
        """Kernels of an op type, in execution order."""
        return [k for k in self.order if self._attr(k, "op_type") == op_type]

    def producer(self, kernel: str, slot: int) -> str:
        """The kernel whose output feeds input ``slot`` of ``kernel``."""
        return self._source(self._attr(kernel, "inputs")[slot][0])

    def output_dtype(self, n: str) -> str | None:
        outs = self._attr(n, "outputs") or []
        return outs[0].dtype if outs else None

    def position(self, kernel: str) -> int:
        return self.order.index(kernel)


@pytest.fixture(scope="session")
def layout(tmp_path_factory: Any) -> Callable[..., Layout]:
    """``layout(layers=LAYERS, **make_dump options)``: the names of that layout, from a probe dump."""
    cache: dict[Any, Layout] = {}

    def get(layers: Sequence[tuple] = LAYERS, **opts: Any) -> Layout:
        key = (tuple(layers), tuple(sorted(opts.items())))
        if key not in cache:
            root = str(tmp_path_factory.mktemp("probe") / "d")
            cache[key] = Layout(dumpmaker.make_dump(root, layers=layers, iterations=1, batch=BATCH, **opts))
        return cache[key]

    return get


class Plant:
    """``values=`` for make_dump: arrays planted by (node, io, slot), iteration and rank (None: any)."""

    def __init__(self) -> None:
        self.table: dict[tuple, Any] = {}

    def set(self, node: str, value: Any, *, io: str = "output", slot: int = 0, it: int | None = None,
            rank: int | None = None) -> "Plant":
        """Plant ``value`` (array-like, or fn(default) -> array) at one tensor."""
        self.table[(rank, it, node, io, slot)] = value
        return self

    def weight(self, lay: Layout, param: str, before: Any, seq: Sequence[Any], rank: int | None = None) -> "Plant":
        """A weight's history as a real dump holds it: ``before`` is read by the forward kernel of
        iteration 0; ``seq[i]`` is Parameter(i), the optimizer's in-place input/output of iteration i
        and what the forward kernel of iteration i + 1 reads."""
        kernel, slot = lay.reader(param)
        opt = lay.optimizer(param)
        for i, v in enumerate(seq):
            self.set(param, v, it=i, rank=rank)
            self.set(opt, v, io="input", slot=0, it=i, rank=rank)
            self.set(opt, v, io="output", slot=0, it=i, rank=rank)
            self.set(kernel, before if i == 0 else seq[i - 1], io="input", slot=slot, it=i, rank=rank)
        return self

    def __call__(self, rank: int, it: int, node: str, io: str, slot: int, default: np.ndarray) -> np.ndarray | None:
        for key in ((rank, it, node, io, slot), (None, it, node, io, slot), (rank, None, node, io, slot),
                    (None, None, node, io, slot)):
            if key in self.table:
                v = self.table[key]
                v = v(default) if callable(v) else v
                if v is None:
                    return None
                a = v if isinstance(v, np.ndarray) else np.asarray(v, dtype=default.dtype)
                return a.reshape(default.shape)
        return None


def full(value: float, n: int = 16, dtype: Any = F32) -> np.ndarray:
    """n copies of value."""
    return np.full(n, value, dtype)


def make(tmp_path: Any, name: str = "d", *, plant: Plant | None = None, layers: Sequence[tuple] = LAYERS,
         **opts: Any) -> str:
    """A dump under tmp_path with the planted values."""
    opts.setdefault("iterations", 3)
    return dumpmaker.make_dump(str(tmp_path / name), layers=layers, batch=BATCH, values=plant, **opts)


def run(root: str | Dump, *watch: str | Watchpoint, **kw: Any) -> ScanResult:
    """Scan a dump with watchpoints (given as text or Watchpoint), one process unless told."""
    wps = [w if isinstance(w, Watchpoint) else Watchpoint.parse(w) for w in watch]
    kw.setdefault("jobs", 1)
    return scan(root if isinstance(root, Dump) else open_dump(root), wps, **kw)


def hits(result: ScanResult, name: str | None = None) -> list[tuple]:
    """(iteration, node, actual, threshold) of the hits, in the engine's order."""
    return [(h.iteration, h.node, h.actual, h.threshold) for h in result.hits if name is None or h.watchpoint == name]


def watched(result: ScanResult) -> list:
    """The hits of the scan's watchpoints (the always-on non-finite sweep's left out)."""
    return [h for h in result.hits if h.watchpoint != "nonfinite_sweep"]


def hit_keys(result: ScanResult, name: str | None = None) -> list[tuple[int, str]]:
    """(iteration, node) of the hits."""
    return [(h.iteration, h.node) for h in result.hits if name is None or h.watchpoint == name]


def errors(result: ScanResult, name: str | None = None) -> list[tuple[int, str, str]]:
    """(iteration, node, message) of the error records."""
    return [(e.iteration, e.node, e.error) for e in result.errors if name is None or e.watchpoint == name]


def said(result: ScanResult) -> list[ErrorRecord]:
    """Every check that did not give a verdict, one record each: the error records and, expanded, the
    checks the summary counts as not applicable."""
    return list(result.errors) + [ErrorRecord(s.watchpoint, r, i, n, s.reason) for s in result.skipped
                                  for r, i, n in s.where]


def said_keys(result: ScanResult, name: str | None = None) -> list[tuple[int, str, str]]:
    """(iteration, node, message) of :func:`said`."""
    return [(e.iteration, e.node, e.error) for e in said(result) if name is None or e.watchpoint == name]


def tensor_file(root: str, it: int, op_name_part: str, io: str = "output", slot: int = 0, rank: int = 0) -> str:
    """The one tensor file of an iteration whose op name contains ``op_name_part``."""
    pat = os.path.join(root, f"rank_{rank}", "Net", "0", str(it), f"*.{op_name_part}.*.{io}.{slot}.*npy")
    found = glob.glob(pat)
    assert len(found) == 1, (pat, found)
    return found[0]


def ref_of(dump: Dump, it: int, node: str, io: str = "output", slot: int = 0, rank: int = 0) -> Any:
    """The TensorRef of one tensor."""
    return dump.rank(rank).tensor(0, it, node, io, slot)


def file_timestamp(path: str) -> int:
    """The timestamp field of a tensor file name (counted from the right)."""
    return int(os.path.basename(path).split(".")[-6])


def only(items: Iterable[Any]) -> Any:
    items = list(items)
    assert len(items) == 1, items
    return items[0]
