"""One step of one rank: ``dump.json`` (ops and their tensors), ``construct.json``, ``stack.json``, parsed.

``dump.json`` maps op keys to entries. Forward entries list ``input_args``, ``input_kwargs`` and
``output`` (module forwards at levels L0/mix also ``parameters``); backward entries ``input`` (the
gradients of the op's outputs) and ``output`` (the gradients of its inputs); ``...parameters_grad.N``
entries map a parameter name to a one-item list. Items nest (lists of tensors); a tensor item has
``type``, ``dtype``, ``shape``, ``Max``, ``Min``, ``Mean``, ``Norm``, and with task tensor ``data_name``.
"""
from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple

from ...errors import CorruptFileError, DumpError
from ..files import read_bytes
from ..records import StackFrame
from .layout import CONSTRUCT_JSON, DUMP_JSON, STACK_JSON
from .stacks import frames

# torch dtype names -> numpy
DTYPES = {
    "torch.float32": "float32", "torch.float": "float32", "torch.float64": "float64", "torch.double": "float64",
    "torch.float16": "float16", "torch.half": "float16", "torch.bfloat16": "float32",
    "torch.int64": "int64", "torch.long": "int64", "torch.int32": "int32", "torch.int": "int32",
    "torch.int16": "int16", "torch.int8": "int8", "torch.uint8": "uint8", "torch.bool": "bool",
    "torch.complex64": "complex64", "torch.complex128": "complex128",
    # MindSpore msprobe dumps
    "Float32": "float32", "Float16": "float16", "Float64": "float64", "BFloat16": "float32", "Int64": "int64",
    "Int32": "int32", "Int16": "int16", "Int8": "int8", "UInt8": "uint8", "Bool": "bool",
}
_MODULE_RE = re.compile(r"^(?:Module|Cell)\.(?P<path>.+)\.(?P<cls>[^.]+)\.(?P<dir>forward|backward|parameters_grad)"
                        r"\.(?P<n>[0-9]+)$")
_API_RE = re.compile(r"^(?P<prefix>[A-Za-z_]+)\.(?P<api>.+)\.(?P<n>[0-9]+)\.(?P<dir>forward|backward)$")
_MAX_DEPTH = 16


class Item(NamedTuple):
    """One tensor of an op as dump.json lists it (a tuple: a large dump lists hundreds of thousands)."""

    io: str                        # "input" | "output"
    slot: int
    dtype: str                     # numpy name ("" when unknown)
    torch_dtype: str
    shape: tuple[int, ...]
    stats: tuple[tuple[str, Any], ...]   # the raw Max/Min/Mean/Norm (and md5) as found
    data_name: str

    @property
    def signature(self) -> tuple:
        """What must agree for two items to be taken for one tensor (dtype, shape, every statistic)."""
        return (self.torch_dtype, self.shape, self.stats)


@dataclass
class Op:
    """One op key of a step: its tensors, and for modules their parameters or parameter gradients."""

    key: str
    items: list[Item] = field(default_factory=list)
    params: dict[str, Item] = field(default_factory=dict)     # module forward: parameter name -> value read
    grads: dict[str, Item] = field(default_factory=dict)      # parameters_grad: parameter name -> gradient


@dataclass
class Step:
    """What one ``step{N}/rank{R}`` folder says."""

    path: str
    task: str
    level: str
    framework: str
    ops: list[Op]
    parents: dict[str, str | None]
    stacks: dict[str, tuple[StackFrame, ...]]   # op key -> stack frames (innermost first)
    warnings: list[str]


def parse_module(key: str) -> tuple[str, str, str, int] | None:
    """(module path, class, direction, call number) of a ``Module.<path>.<Class>.<dir>.<n>`` key."""
    m = _MODULE_RE.match(key)
    return (m.group("path"), m.group("cls"), m.group("dir"), int(m.group("n"))) if m else None


def parse_api(key: str) -> tuple[str, str, int, str] | None:
    """(prefix, api, call number, direction) of an ``<Prefix>.<api>.<n>.<forward|backward>`` key."""
    m = _API_RE.match(key)
    return (m.group("prefix"), m.group("api"), int(m.group("n")), m.group("dir")) if m else None


def _json(path: str, required: bool) -> Any:
    if not os.path.exists(path):
        if required:
            raise CorruptFileError(path, "missing")
        return None
    raw = read_bytes(path, "graph")   # dump.json of a large model runs to hundreds of MiB
    try:
        return json.loads(raw.decode("utf-8"))
    except RecursionError as exc:
        raise CorruptFileError(path, "not valid JSON (nested too deeply)") from exc
    except ValueError as exc:
        raise CorruptFileError(path, f"not valid JSON ({exc}); truncated or still being written?") from exc


_STAT_KEYS = ("Max", "Min", "Mean", "Norm", "md5")


def _item(d: Any, io: str, slot: int) -> Item | None:
    if type(d) is not dict or "dtype" not in d:
        return None
    shape = d.get("shape")
    if type(shape) is not list:
        return None
    for x in shape:
        if type(x) is not int or not 0 <= x < (1 << 62):
            return None
    tdt = str(d["dtype"])
    stats = tuple([(k, d[k]) for k in _STAT_KEYS if k in d])
    name = d.get("data_name")
    return Item(io, slot, DTYPES.get(tdt, ""), tdt, tuple(shape), stats, name if type(name) is str else "")


def _leaves(v: Any, out: list, depth: int = 0) -> None:
    """Items in order, nested lists flattened; every leaf (None, a number) takes a slot."""
    if isinstance(v, list) and depth < _MAX_DEPTH:
        for x in v:
            _leaves(x, out, depth + 1)
    elif isinstance(v, dict) and "type" not in v and "dtype" not in v and depth < _MAX_DEPTH:
        for x in v.values():      # a dict argument: its values in order
            _leaves(x, out, depth + 1)
    else:
        out.append(v)


def _op(key: str, entry: Any) -> Op:
    op = Op(key)
    if not isinstance(entry, dict):
        return op
    mod = parse_module(key)
    if mod is not None and mod[2] == "parameters_grad":
        for name, v in entry.items():
            leaves: list = []
            _leaves(v, leaves)
            it = _item(leaves[0], "output", 0) if leaves else None
            if it is not None:
                op.grads[str(name)] = it
        return op
    groups = (("input", ("input_args", "input_kwargs", "input")), ("output", ("output",)))
    for io, names in groups:
        leaves = []
        for n in names:
            if n in entry:
                _leaves(entry[n], leaves)
        for slot, v in enumerate(leaves):
            it = _item(v, io, slot)
            if it is not None:
                op.items.append(it)
    params = entry.get("parameters")
    if isinstance(params, dict):
        for name, v in params.items():
            leaves = []
            _leaves(v, leaves)
            it = _item(leaves[0], "output", 0) if leaves else None
            if it is not None:
                op.params[str(name)] = it
    return op


def _stacks(raw: Any) -> dict[str, tuple[StackFrame, ...]]:
    out: dict[str, tuple[StackFrame, ...]] = {}
    if not isinstance(raw, dict):
        return out
    for v in raw.values():
        # 26.x: {"0": [[keys...], [frames...]]}; older: {key: [frames...]}
        if isinstance(v, list) and len(v) == 2 and isinstance(v[0], list) and isinstance(v[1], list):
            text = frames(v[1])
            for k in v[0]:
                if isinstance(k, str):
                    out[k] = text
    if not out:
        for k, v in raw.items():
            if isinstance(v, list):
                out[str(k)] = frames(v)
    return out


def read_step(path: str) -> Step:
    """Parse one rank folder of one step (DumpError naming the file when dump.json is unusable)."""
    try:
        st = os.stat(os.path.join(path, DUMP_JSON))
    except OSError as exc:
        raise DumpError(os.path.join(path, DUMP_JSON), f"cannot read: {exc.strerror or exc}") from exc
    return _read_step(path, st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=64)
def _read_step(path: str, size: int, mtime_ns: int) -> Step:
    dpath = os.path.join(path, DUMP_JSON)
    raw = _json(dpath, True)
    if not isinstance(raw, dict) or not isinstance(raw.get("data"), dict):
        raise CorruptFileError(dpath, "not an msprobe dump.json (no \"data\" object)")
    warnings: list[str] = []
    ops = [_op(str(k), v) for k, v in raw["data"].items()]
    parents: dict[str, str | None] = {}
    stacks: dict[str, tuple[StackFrame, ...]] = {}
    for name, target in ((CONSTRUCT_JSON, "parents"), (STACK_JSON, "stacks")):
        p = os.path.join(path, name)
        try:
            got = _json(p, False)
        except DumpError as exc:
            warnings.append(f"{exc}; read without it")
            continue
        if target == "parents" and isinstance(got, dict):
            parents = {str(k): (str(v) if isinstance(v, str) else None) for k, v in got.items()}
        elif target == "stacks":
            stacks = _stacks(got)
    return Step(path, str(raw.get("task", "")), str(raw.get("level", "")), str(raw.get("framework", "")),
                ops, parents, stacks, warnings)


def tdbg_stats(stats: tuple[tuple[str, Any], ...], dtype: str, shape: tuple[int, ...]) -> dict[str, float]:
    """tdbg's statistics from msprobe's Max/Min/Mean/Norm (see the module notes in tensor.py), by name."""
    return dict(sorted(_convert(dict(stats), dtype, shape).items()))


def _convert(raw: dict, dtype: str, shape: tuple[int, ...]) -> dict[str, float]:
    n = math.prod(shape)
    out: dict[str, float] = {"count": n}
    mx, mn = _num(raw.get("Max")), _num(raw.get("Min"))
    if n == 0:
        return {"count": 0, "nan": 0, "pos_inf": 0, "neg_inf": 0}
    if dtype == "bool" or dtype.startswith(("int", "uint")):
        out.update(nan=0, pos_inf=0, neg_inf=0)   # integers hold no NaN or Inf
    if mx is None or mn is None:
        return out
    if math.isnan(mx) or math.isnan(mn):
        # torch.max and torch.min propagate NaN: at least one element is NaN. The counts are lower
        # bounds here (how many NaN, and whether Infs hide behind them, is not recorded)
        out.update(nan=1, pos_inf=0, neg_inf=0)
        return out
    if math.isinf(mx) or math.isinf(mn):
        # no NaN (max and min would be NaN); +Inf shows as the max, -Inf as the min (at least one each)
        out.update(nan=0, pos_inf=int(mx == math.inf), neg_inf=int(mn == -math.inf))
        return out
    out.update(nan=0, pos_inf=0, neg_inf=0, max=mx, min=mn)
    return _finite_extras(out, raw, n, mx, mn)


def _finite_extras(out: dict[str, float], raw: dict, n: int, mx: float, mn: float) -> dict[str, float]:
    mean, norm = _num(raw.get("Mean")), _num(raw.get("Norm"))
    if mean is not None and math.isfinite(mean):
        out["mean"] = mean
    if norm is not None and math.isfinite(norm):
        out["l2norm"] = norm
    if mn > 0 or mx < 0:   # every element on one side of zero: the sign counts are exact
        out.update(zeros=0, positives=n if mn > 0 else 0, negatives=n if mx < 0 else 0)
    elif mn == 0 and mx == 0:
        out.update(zeros=n, positives=0, negatives=0)
    return out


def _num(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):   # json has no NaN/Inf literal in every writer: "nan", "inf"
        try:
            return float(v)
        except ValueError:
            return None
    return None
