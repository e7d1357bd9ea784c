"""A node and its tensors for a view: digests first, statistics, capped values, slices, differences."""
from __future__ import annotations

import io
import math
import re
from typing import Any, Sequence

import numpy as np

from ..errors import InvalidQueryError, NoEarlierValue, QueryError
from ..model.graph import Graph
from ..model.history import Previous, previous_value
from ..model import Rank, TensorRef
from ..model.serialize import node_dict, tensor_dict
from .slices import parse_slice
from ..stats import service
from ..stats.cache import StatsCache
from ..stats.core import Stats, tensor_stats
from .pages import Page, page
from .scopes import FOLD, place_of, short_name

VALUE_CAP = 100_000     # tensor values in one response at most


def tensor_digest(t: TensorRef) -> dict[str, Any]:
    """A tensor without values: :func:`debugger.model.serialize.tensor_dict` plus shape and dtype."""
    d = tensor_dict(t)
    d["shape"] = list(t.shape)
    d["dtype"] = str(t.dtype)
    d["size"] = int(math.prod(t.shape))
    return d


def find_tensor(rank: Rank, graph_id: int, iteration: int, node: str, io: str = "output", slot: int = 0) -> TensorRef:
    """One dumped tensor (QueryError naming what is missing)."""
    if io not in ("input", "output"):
        raise InvalidQueryError(f"bad io {io!r}: expected input or output")
    return rank.tensor(graph_id, iteration, node, io, slot)


def node_detail(rank: Rank, graph: Graph, name: str, iteration: int | None = None, *, fold: int = FOLD,
                framework: bool = False) -> dict[str, Any]:
    """A node with its stack (user frames first) and, for ``iteration``, its dumped tensors."""
    if name not in graph:
        raise QueryError(rank.path, f"no node {name!r} in graph {graph.graph_id}")
    n = graph.node(name)
    d = node_dict(n)
    d["rank"] = rank.rank
    d["name"] = short_name(name, n.scope)
    d["place"] = place_of(graph, name, fold=fold, framework=framework)
    for i in d["inputs"]:
        src = i["node"]
        s = graph.get(src) if src else None
        i["name"] = short_name(src, s.scope) if s is not None else src
        i["op_type"] = s.op_type if s is not None else None
    gid = graph.graph_id
    d["iterations"] = rank.node_iterations(gid, name)
    d["iteration"] = iteration
    tensors: list[dict[str, Any]] = []
    if iteration is not None:
        tmap = rank.tensor_map(gid, iteration)
        for side, n_slots in (("input", len(d["inputs"])), ("output", max(1, len(d["outputs"])))):
            slot = 0
            while slot < n_slots or (name, side, slot) in tmap:
                ref = tmap.get((name, side, slot))
                if ref is not None:
                    t = tensor_digest(ref) | {"dumped": True}
                else:
                    t = {"node": name, "io": side, "slot": slot, "dumped": False, "shape": None, "dtype": None}
                    if side == "output" and slot < len(d["outputs"]):
                        t["shape"], t["dtype"] = d["outputs"][slot]["shape"], d["outputs"][slot]["dtype"]
                if side == "input" and slot < len(d["inputs"]):
                    t["source"] = d["inputs"][slot]["node"]
                tensors.append(t)
                slot += 1
    d["tensors"] = tensors
    return d


def _stats(ref: TensorRef, cache: StatsCache | None = None) -> Stats:
    return service.statistics(ref.source, cache)


def tensor_summary(ref: TensorRef, cache: StatsCache | None = None, bins: int | None = None) -> dict[str, Any]:
    """A tensor's digest, statistics (the `--json` Stats shape) and histogram of finite values
    (``bins`` None: about the square root of the element count, 10 to 50 bins)."""
    stats = _stats(ref, cache)
    if bins is None:
        bins = min(50, max(10, math.ceil(math.sqrt(max(stats.count, 1)))))
    # a statistics-only dump has no values to draw: the histogram is None, the statistics are stored
    hist = service.histogram(ref.source, stats, bins) if ref.has_values else None
    return {"tensor": tensor_digest(ref), "stats": stats.to_dict(), "histogram": hist}


def tensor_history(rank: Rank, ref: TensorRef, cache: StatsCache | None = None, begin: int = 0,
                   end: int | None = None) -> Page:
    """Statistics of the same tensor (node, io, slot) in every iteration of the rank, each from the graph
    that ran it (the tensor's own graph first: a PyTorch run's first step is a graph of its own, and its
    nodes keep their names); None where absent."""
    gid = ref.graph_id
    ran = {it: gid for it in rank.iterations(gid)}     # absent from its own graph's iterations: None
    ran.update({it: g for it, g in rank.node_runs(gid, ref.node).items() if it not in ran})
    pg = page(sorted(ran), begin, end)
    items = []
    for it in pg.items:
        r = rank.tensor_map(ran[it], it).get(ref.key)
        items.append({"iteration": it, "graph": ran[it],
                      "stats": _stats(r, cache).to_dict() if r is not None else None})
    return Page(pg.begin, pg.end, pg.total, items)


def default_slice(shape: Sequence[int]) -> str:
    """``[0, ..., 0, :, :]``: the last two dimensions of the first of everything else."""
    if len(shape) == 0:
        return "[]"
    if len(shape) == 1:
        return "[:]"
    return "[" + ", ".join(["0"] * (len(shape) - 2) + [":", ":"]) + "]"


def _index(text: str | None, shape: Sequence[int]) -> tuple[str, tuple[Any, ...]]:
    text = (text or "").strip() or default_slice(shape)
    try:
        idx = parse_slice(text, len(shape))
    except QueryError as exc:
        raise InvalidQueryError(exc.problem) from None
    for i, (k, n) in enumerate(zip([k for k in idx if k is not Ellipsis], shape)):
        if isinstance(k, int) and not -n <= k < n:
            raise InvalidQueryError(f"bad slice {text!r}: index {k} out of range for dimension {i} of size {n}")
    return text, idx


def json_values(a: np.ndarray) -> list[Any] | Any:
    """Values as JSON-ready lists: NaN and +-Inf as the strings ``"NaN"``, ``"Inf"``, ``"-Inf"``."""
    a = np.asarray(a)
    if a.dtype.kind == "b":
        return a.astype(np.int8).tolist()
    if a.dtype.kind == "c":
        a = np.abs(a)
    if a.dtype.kind != "f":
        return a.tolist()
    finite = np.isfinite(a)
    if finite.all():
        return a.astype(np.float64).tolist()
    obj = a.astype(np.float64).astype(object)
    obj[np.isnan(a)] = "NaN"
    obj[np.isposinf(a)] = "Inf"
    obj[np.isneginf(a)] = "-Inf"
    return obj.tolist()


def _cut(a: np.ndarray, cap: int) -> tuple[np.ndarray, bool]:
    if a.size <= cap:
        return a, False
    if a.ndim == 1:
        return a[:cap], True
    cols = min(a.shape[1], cap)
    rows = max(1, min(a.shape[0], cap // cols))
    return a[:rows, :cols], True


def _selection(arr: np.ndarray, text: str, cap: int) -> dict[str, Any]:
    if arr.ndim > 2:
        raise InvalidQueryError(f"slice {text} leaves {arr.ndim} dimensions; at most 2 can be shown "
                                f"(fix more indices, e.g. {default_slice(arr.shape)})")
    shown, truncated = _cut(arr, cap)
    out: dict[str, Any] = {"shape": list(arr.shape), "shown": list(shown.shape), "truncated": truncated,
                           "values": json_values(shown)}
    if shown.dtype.kind in "biuf" and shown.size:
        f = shown.astype(np.float64)
        f = f[np.isfinite(f)]
        out["min"] = float(f.min()) if f.size else None
        out["max"] = float(f.max()) if f.size else None
    return out


def tensor_values(ref: TensorRef, slice_text: str | None = None, cap: int = VALUE_CAP) -> dict[str, Any]:
    """Values of a slice such as ``[0, :, :]`` (at most two free dimensions, at most ``cap`` values)."""
    text, idx = _index(slice_text, ref.shape)
    arr = np.asarray(ref.value()[idx])
    return {"tensor": tensor_digest(ref), "slice": text, "cap": cap, **_selection(arr, text, cap)}


def previous_tensor(rank: Rank, ref: TensorRef) -> Previous:
    """The previous value of a tensor, as the watchpoints use it (QueryError saying why there is none, in
    words a view can show: the tensor and iteration, no path)."""
    prev, why = previous_value(rank, ref)
    if prev is None:
        raise NoEarlierValue(None, f"{ref.node} {ref.io} {ref.slot} in iteration {ref.iteration} has no earlier "
                                   f"value to compare with ({why})")
    return prev


def tensor_diff(rank: Rank, ref: TensorRef, slice_text: str | None = None, cap: int = VALUE_CAP) -> dict[str, Any]:
    """Current, previous and difference (current - previous) values of a slice, with statistics of the
    three whole tensors; ``previous_is`` says whether the previous value is the tensor in an earlier
    run or (a weight in its first dumped iteration) the value before that iteration's update."""
    found = previous_tensor(rank, ref)
    prev = found.ref
    if tuple(prev.shape) != tuple(ref.shape):
        raise QueryError(rank.path, f"{ref.node} {ref.io} {ref.slot}: shape {list(ref.shape)} in iteration "
                         f"{ref.iteration} but {list(prev.shape)} in {prev.iteration}")
    text, idx = _index(slice_text, ref.shape)
    cur_all, prev_all = np.asarray(ref.value()), np.asarray(prev.value())
    with np.errstate(all="ignore"):
        diff_all = cur_all.astype(np.float64) - prev_all.astype(np.float64)
    cur, pre, dif = (np.asarray(a[idx]) for a in (cur_all, prev_all, diff_all))
    each = max(1, cap // 3)   # the cap is split over current, previous and difference
    return {"tensor": tensor_digest(ref), "previous_tensor": tensor_digest(prev), "slice": text, "cap": cap,
            "iteration": ref.iteration, "previous_iteration": prev.iteration, "previous_is": found.how,
            "current": _selection(cur, text, each), "previous": _selection(pre, text, each),
            "difference": _selection(dif, text, each),
            "stats": {"current": _stats(ref).to_dict(), "previous": _stats(prev).to_dict(),
                      "difference": tensor_stats(diff_all).to_dict()}}     # the difference is no stored tensor


def tensor_npy(ref: TensorRef) -> tuple[str, bytes]:
    """(download file name, .npy bytes) of a tensor."""
    buf = io.BytesIO()
    np.save(buf, np.asarray(ref.value()))
    short = re.sub(r"[^A-Za-z0-9._-]+", "_", ref.node.rsplit("/", 1)[-1])
    return f"{short}.{ref.io}{ref.slot}.rank{ref.rank}.it{ref.iteration}.npy", buf.getvalue()


