"""View-oriented queries: what a browser pane asks for, as plain dicts, one page at a time.

Everything here answers one question of a user interface without doing any I/O of its own
beyond what :class:`~debugger.model.TensorRef` and the source index already do:

- :class:`Page` and :func:`check_range`: the one begin/end contract of every list;
- :func:`scope_view`: the children of one scope with same-type siblings folded
  (``Adam[7]``) and the edges between those children aggregated;
- :func:`node_detail`, :func:`tensor_summary`, :func:`tensor_history`, :func:`tensor_values`,
  :func:`tensor_diff`, :func:`tensor_npy`: a node and its tensors, digest first, values capped;
- :func:`source_files`, :func:`source_lines`, :func:`source_text`, :func:`nodes_at_line`: code to graph.

The web layer (``web/api.py``) calls these and nothing below them.
"""
from __future__ import annotations

import io
import math
import os
import re
import threading
import weakref
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from .errors import QueryError
from .graph import Graph
from .model import Dump, Rank, TensorRef
from .report import ranges_text
from .serialize import node_dict, tensor_dict
from .source import parse_location
from .stats import Stats, histogram, tensor_stats
from .slices import parse_slice

DEFAULT_PAGE = 500      # items of a page when the caller gives no end
MAX_PAGE = 5000         # items of one page at most
VALUE_CAP = 100_000     # tensor values in one response at most
FOLD = 5                # same-type siblings folded into one node from this many on
SOURCE_CAP = 2 << 20    # bytes of a source file shown at most

_GROUP_RE = re.compile(r"^(?:(?P<scope>.*)/)?(?P<op>[^/\[\]]+)\[(?P<n>\d+)\]$")


class InvalidQueryError(QueryError):
    """A malformed argument (range, slice, location, watchpoint): the caller's mistake, not a miss."""

    def __init__(self, problem: str) -> None:
        super().__init__(None, problem)


# -- pages ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Page:
    """Items ``begin`` (inclusive) to ``end`` (exclusive) of a list of ``total`` items."""

    begin: int
    end: int
    total: int
    items: list[Any]

    def to_dict(self, **extra: Any) -> dict[str, Any]:
        """``{"begin", "end", "total", "items"}`` plus any extra keys."""
        return {"begin": self.begin, "end": self.end, "total": self.total, "items": self.items, **extra}


def check_range(begin: int, end: int | None, total: int, limit: int = DEFAULT_PAGE) -> tuple[int, int]:
    """Check a begin/end pair against ``total``; ``end`` None or -1 means ``begin + limit`` (or the end).

    Raises :class:`InvalidQueryError` with the messages the API tests pin, e.g.
    ``end index (4) out of bounds (3)``.
    """
    if begin < 0:
        raise InvalidQueryError(f"begin index ({begin}) is negative")
    if begin > total:
        raise InvalidQueryError(f"begin index ({begin}) out of bounds ({total})")
    if end is None or end == -1:
        end = min(total, begin + min(limit, MAX_PAGE))
    if end < begin:
        raise InvalidQueryError(f"end index ({end}) is before begin index ({begin})")
    if end > total:
        raise InvalidQueryError(f"end index ({end}) out of bounds ({total})")
    if end - begin > MAX_PAGE:
        raise InvalidQueryError(f"page of {end - begin} items exceeds the limit of {MAX_PAGE}")
    return begin, end


def page(items: Sequence[Any], begin: int = 0, end: int | None = None, limit: int = DEFAULT_PAGE) -> Page:
    """One checked page of ``items``."""
    b, e = check_range(begin, end, len(items), limit)
    return Page(b, e, len(items), list(items[b:e]))


# -- scope tree -------------------------------------------------------------------------------------
@dataclass
class _Scope:
    path: str
    parent: "_Scope | None"
    scopes: dict[str, "_Scope"] = field(default_factory=dict)
    nodes: list[str] = field(default_factory=list)
    count: int = 0          # nodes in the subtree
    visible: int = 0        # nodes in the subtree that are not hidden routing ops
    kinds: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    vkinds: dict[str, int] = field(default_factory=lambda: defaultdict(int))   # of visible nodes
    first: int = 1 << 62    # smallest execution position in the subtree

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


class ScopeTree:
    """The scopes of one graph, built once: each scope's child scopes, direct nodes and counts."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.root = _Scope("", None)
        self.scopes: dict[str, _Scope] = {"": self.root}
        self._views: dict[tuple[str, int, bool], dict[str, Any]] = {}
        self._lock = threading.Lock()
        g = graph.nx
        self.attrs: dict[str, dict[str, Any]] = dict(g.nodes(data=True))
        self.succ: dict[str, list[str]] = {n: list(nbrs) for n, nbrs in g.adjacency()}
        # routing nodes are hidden from the graph view unless asked for; edges are drawn through them
        self.hidden_set = {n for n, a in self.attrs.items() if a.get("is_routing")}
        # Execution position; a node that does not run (parameter, constant, Load...) sorts with its
        # first consumer that does.
        order = graph.execution_index
        end = len(order)
        self.pos: dict[str, int] = {}
        for n in self.attrs:
            p = order.get(n)
            if p is None:
                p = min((order.get(w, end) for w in self.succ[n]), default=end)
                if p == end:   # one more hop: Parameter -> Load -> kernel
                    p = min((order.get(x, end) for w in self.succ[n] for x in self.succ.get(w, ())), default=end)
            self.pos[n] = p
        for n, a in self.attrs.items():
            sc = self._ensure(a.get("scope") or "")
            sc.nodes.append(n)
            p = self.pos[n]
            kind = a.get("kind", "other")
            shown = n not in self.hidden_set
            s: _Scope | None = sc
            while s is not None:
                s.count += 1
                s.visible += shown
                s.kinds[kind] += 1
                if shown:
                    s.vkinds[kind] += 1
                if p < s.first:
                    s.first = p
                s = s.parent
        for s in self.scopes.values():
            s.nodes.sort(key=lambda x: (self.pos[x], x))

    def _ensure(self, path: str) -> _Scope:
        s = self.scopes.get(path)
        if s is None:
            parent = self._ensure(path.rsplit("/", 1)[0] if "/" in path else "")
            s = self.scopes[path] = _Scope(path, parent)
            parent.scopes[s.name] = s
        return s

    def hidden(self, name: str) -> bool:
        """Whether a node is a routing op (Load, Depend, UpdateState...)."""
        return name in self.hidden_set

    def subtree(self, s: _Scope) -> Iterable[str]:
        """Every node under a scope."""
        stack = [s]
        while stack:
            x = stack.pop()
            yield from x.nodes
            stack.extend(x.scopes.values())

    def place(self, name: str, fold: int = FOLD, framework: bool = False) -> str:
        """The scope path to open to see ``name`` as a node: its scope, or its folded group."""
        a = self.attrs[name]
        scope = a.get("scope") or ""
        sc = self.scopes[scope]
        op = a.get("op_type", "")
        if fold > 0:
            same = [n for n in sc.nodes if self.attrs[n].get("op_type") == op
                    and (framework or n not in self.hidden_set)]
            if len(same) >= fold:
                return _join(scope, f"{op}[{len(same)}]")
        return scope


_TREES: "weakref.WeakKeyDictionary[Graph, ScopeTree]" = weakref.WeakKeyDictionary()
_TREES_LOCK = threading.Lock()


def scope_tree(graph: Graph) -> ScopeTree:
    """The graph's scope tree (built on first use, then kept with the graph)."""
    with _TREES_LOCK:
        t = _TREES.get(graph)
    if t is None:
        t = ScopeTree(graph)
        with _TREES_LOCK:
            t = _TREES.setdefault(graph, t)
    return t


def _join(scope: str, name: str) -> str:
    return f"{scope}/{name}" if scope else name


def _short(name: str, scope: str) -> str:
    return name[len(scope) + 1:] if scope and name.startswith(scope + "/") else name


def node_digest(graph: Graph, name: str) -> dict[str, Any]:
    """A light summary of a node for lists: name, short name, op type, kind, scope."""
    a = graph.nx.nodes[name]
    scope = a.get("scope") or ""
    return {"graph": graph.graph_id, "node": name, "name": _short(name, scope), "op_type": a.get("op_type", ""),
            "kind": a.get("kind", "other"), "param": a.get("param"), "scope": scope,
            "is_backward": bool(a.get("is_backward")),
            "execution_index": graph.execution_index.get(name)}


def _sources(tree: ScopeTree, v: str, framework: bool) -> list[str]:
    """Producers of ``v``; with routing ops hidden, followed through them along the data they pass."""
    attrs, hidden = tree.attrs, tree.hidden_set
    preds = [i for i, _ in attrs[v].get("inputs", ()) if i and i in attrs]
    if framework:
        return preds
    if not any(u in hidden for u in preds):
        return preds
    out: list[str] = []
    seen: set[str] = set()
    stack = preds[::-1]
    while stack:
        u = stack.pop()
        if u in seen:
            continue
        seen.add(u)
        if u not in hidden:
            out.append(u)
            continue
        a = attrs[u]
        op = a.get("op_type")
        ins = [i for i, _ in a.get("inputs", ()) if i and i in attrs]
        if op == "UpdateState":
            continue                      # a state token, not data
        stack.extend((ins if op == "MakeTuple" else ins[:1])[::-1])
    return out


def _structure(tree: ScopeTree, path: str, fold: int, framework: bool) -> dict[str, Any]:
    """Children and aggregated edges of a scope or a folded group (cached per tree)."""
    key = (path, fold, framework)
    with tree._lock:
        hit = tree._views.get(key)
    if hit is not None:
        return hit
    attrs = tree.attrs
    group_op = None
    sc = tree.scopes.get(path)
    if sc is None:
        m = _GROUP_RE.match(path)
        sc = tree.scopes.get(m.group("scope") or "") if m else None
        if m is None or sc is None:
            raise QueryError(None, f"no scope {path!r} in graph {tree.graph.graph_id}")
        group_op = m.group("op")
    children: list[dict[str, Any]] = []
    member: dict[str, str] = {}           # node -> child id, for nodes shown directly or in a group
    if group_op is None:
        for s in sc.scopes.values():
            if not framework and s.visible == 0:
                continue
            children.append({"type": "scope", "id": s.path, "name": s.name, "path": s.path,
                             "count": s.count if framework else s.visible,
                             "kinds": dict(s.kinds if framework else s.vkinds),
                             "first": s.first})
    direct = [n for n in sc.nodes if (framework or not tree.hidden(n))
              and (group_op is None or attrs[n].get("op_type") == group_op)]
    if group_op is not None and not direct:
        raise QueryError(None, f"no scope {path!r} in graph {tree.graph.graph_id}")
    by_op: dict[str, list[str]] = defaultdict(list)
    for n in direct:
        by_op[attrs[n].get("op_type", "")].append(n)
    for op, names in by_op.items():
        if group_op is None and fold > 0 and len(names) >= fold:
            gid = _join(sc.path, f"{op}[{len(names)}]")
            kinds: dict[str, int] = defaultdict(int)
            for n in names:
                kinds[attrs[n].get("kind", "other")] += 1
                member[n] = gid
            children.append({"type": "group", "id": gid, "name": f"{op}[{len(names)}]", "path": gid,
                             "op_type": op, "count": len(names), "kinds": dict(kinds),
                             "first": min(tree.pos[n] for n in names)})
        else:
            for n in names:
                member[n] = n
                d = node_digest(tree.graph, n)
                children.append({"type": "node", "id": n, **d, "first": tree.pos[n]})
    children.sort(key=lambda c: (c["first"], c["name"]))

    prefix = sc.path + "/" if sc.path else ""

    memo: dict[str, str | None] = {}

    def child_of(n: str) -> str | None:
        c = member.get(n)
        if c is not None or group_op is not None:
            return c
        if n in memo:
            return memo[n]
        s = attrs[n].get("scope") or ""
        if s == sc.path or (prefix and not s.startswith(prefix)):
            c = None
        else:
            rest = s[len(prefix):]
            c = prefix + rest.split("/", 1)[0] if rest else None
        memo[n] = c
        return c

    edges: dict[tuple[str, str], int] = defaultdict(int)
    ext_in: dict[str, int] = defaultdict(int)
    ext_out: dict[str, int] = defaultdict(int)
    nodes = (n for n in tree.subtree(sc)) if group_op is None else iter(direct)
    for v in nodes:
        if not framework and tree.hidden(v):
            continue
        cv = child_of(v)
        if cv is None:
            continue
        for u in _sources(tree, v, framework):
            cu = child_of(u)
            if cu is None:
                ext_in[cv] += 1
                continue
            if cu != cv:
                edges[(cu, cv)] += 1
        # consumers outside this scope (or group)
        for w in tree.succ[v]:
            if (framework or not tree.hidden(w)) and child_of(w) is None:
                ext_out[cv] += 1
    for c in children:
        c["external_in"] = ext_in.get(c["id"], 0)
        c["external_out"] = ext_out.get(c["id"], 0)
    parents = [{"name": "root", "path": ""}]
    acc = ""
    parts = sc.path.split("/") if sc.path else []
    for p in parts:
        acc = _join(acc, p)
        parents.append({"name": p, "path": acc})
    if group_op is not None:
        parents.append({"name": path.rsplit("/", 1)[-1], "path": path})
    out = {"path": path, "type": "group" if group_op else "scope", "parents": parents,
           "children": children, "child_of": child_of,
           "edges": [{"source": s, "target": t, "count": c} for (s, t), c in edges.items()]}
    with tree._lock:
        if len(tree._views) > 256:
            tree._views.clear()
        tree._views[key] = out
    return out


def scope_view(graph: Graph, path: str = "", *, fold: int = FOLD, framework: bool = False, begin: int = 0,
               end: int | None = None, marks: Mapping[str, Iterable[str]] | None = None) -> dict[str, Any]:
    """The children of ``path`` (a scope, or a folded group such as ``optimizer/Adam[7]``).

    Children are scopes, folded groups of ``fold`` or more same-type sibling nodes, and nodes,
    in execution order. ``edges`` aggregate the graph's edges between the children of the page
    (routing ops hidden unless ``framework``). ``marks`` maps a mark name ("hit", "forward"...) to node
    names; each child gets ``marks: {name: how many of its nodes carry it}``.
    """
    tree = scope_tree(graph)
    st = _structure(tree, path, fold, framework)
    pg = page(st["children"], begin, end)
    ids = {c["id"] for c in pg.items}
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    if marks:
        child_of = st["child_of"]
        for mark, names in marks.items():
            for n in names:
                c = child_of(n) if n in graph.nx else None
                if c is not None and c in ids:
                    counts[c][mark] += 1
    items = [{k: v for k, v in c.items() if k != "first"} | {"marks": dict(counts.get(c["id"], {}))}
             for c in pg.items]
    edges = [e for e in st["edges"] if e["source"] in ids and e["target"] in ids]
    return {"graph": graph.graph_id, "path": st["path"], "type": st["type"], "parents": st["parents"],
            "children": Page(pg.begin, pg.end, pg.total, items).to_dict(), "edges": edges}


def search_nodes(graph: Graph, query: str, *, fold: int = FOLD, framework: bool = False) -> list[dict[str, Any]]:
    """Nodes whose full name contains ``query`` (case-insensitive), in execution order, with the
    scope path (``place``) to open to see each."""
    q = query.strip().lower()
    if not q:
        raise InvalidQueryError("empty search")
    tree = scope_tree(graph)
    names = [n for n in graph.nx.nodes if q in n.lower()]
    names.sort(key=lambda n: (tree.pos[n], n))
    return [node_digest(graph, n) | {"place": tree.place(n, fold, framework or tree.hidden(n))} for n in names]


def place_of(graph: Graph, name: str, *, fold: int = FOLD, framework: bool = False) -> str:
    """The scope path under which the graph view shows ``name``."""
    if name not in graph.nx:
        raise QueryError(None, f"no node {name!r} in graph {graph.graph_id}")
    tree = scope_tree(graph)
    return tree.place(name, fold, framework or tree.hidden(name))


# -- nodes and tensors ------------------------------------------------------------------------------
def tensor_digest(t: TensorRef) -> dict[str, Any]:
    """A tensor without values: :func:`debugger.serialize.tensor_dict` plus shape and dtype."""
    d = tensor_dict(t)
    d["shape"] = list(t.shape)
    d["dtype"] = str(t.dtype)
    d["size"] = int(math.prod(t.shape))
    return d


def find_tensor(rank: Rank, graph_id: int, iteration: int, node: str, io: str = "output", slot: int = 0) -> TensorRef:
    """One dumped tensor (QueryError naming what is missing)."""
    if io not in ("input", "output"):
        raise InvalidQueryError(f"bad io {io!r}: expected input or output")
    ref = rank.tensor_map(graph_id, iteration).get((node, io, slot))
    if ref is None:
        if iteration not in rank.iterations(graph_id):
            raise QueryError(rank.path, f"no iteration {iteration} in graph {graph_id} "
                             f"(iterations: {ranges_text(rank.iterations(graph_id))})")
        raise QueryError(rank.path, f"no tensor {node} {io} {slot} in graph {graph_id} iteration {iteration}")
    return ref


def node_detail(rank: Rank, graph: Graph, name: str, iteration: int | None = None, *, fold: int = FOLD,
                framework: bool = False) -> dict[str, Any]:
    """A node with its stack (user frames first) and, for ``iteration``, its dumped tensors."""
    if name not in graph.nx:
        raise QueryError(rank.path, f"no node {name!r} in graph {graph.graph_id}")
    n = graph.node(name)
    d = node_dict(n)
    d["rank"] = rank.rank
    d["name"] = _short(name, n.scope)
    d["place"] = place_of(graph, name, fold=fold, framework=framework)
    for i in d["inputs"]:
        src = i["node"]
        i["name"] = _short(src, graph.nx.nodes[src].get("scope") or "") if src and src in graph.nx else src
        i["op_type"] = graph.nx.nodes[src].get("op_type") if src and src in graph.nx else None
    gid = graph.graph_id
    its = rank.iterations(gid)
    d["iterations"] = [it for it in its if _has_tensors(rank, gid, it, name)]
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


def _has_tensors(rank: Rank, gid: int, it: int, name: str) -> bool:
    m = rank.tensor_map(gid, it)
    return (name, "output", 0) in m or (name, "input", 0) in m


def _stats(ref: TensorRef, cache: Any = None) -> Stats:
    if cache is not None:
        return cache.stats(ref)
    return tensor_stats(ref.value())


def tensor_summary(ref: TensorRef, cache: Any = None, bins: int | None = None) -> dict[str, Any]:
    """A tensor's digest, statistics (the `--json` Stats shape) and histogram of finite values
    (``bins`` None: about the square root of the element count, 10 to 50 bins)."""
    stats = _stats(ref, cache)
    if bins is None:
        bins = min(50, max(10, math.ceil(math.sqrt(max(stats.count, 1)))))
    return {"tensor": tensor_digest(ref), "stats": stats.to_dict(), "histogram": histogram(ref.value(), bins)}


def tensor_history(rank: Rank, ref: TensorRef, cache: Any = None, begin: int = 0,
                   end: int | None = None) -> Page:
    """Statistics of the same tensor (node, io, slot) in every dumped iteration; None where absent."""
    gid = ref.graph_id
    pg = page(rank.iterations(gid), begin, end)
    items = []
    for it in pg.items:
        r = rank.tensor_map(gid, it).get(ref.key)
        items.append({"iteration": it, "stats": _stats(r, cache).to_dict() if r is not None else None})
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


def previous_tensor(rank: Rank, ref: TensorRef) -> TensorRef:
    """The same tensor in the previous run of its graph (QueryError when there is none)."""
    prev = rank.previous_iteration(ref.graph_id, ref.iteration)
    if prev is None:
        raise QueryError(rank.path, f"{ref.node} {ref.io} {ref.slot}: no iteration before {ref.iteration}")
    p = rank.tensor_map(ref.graph_id, prev).get(ref.key)
    if p is None:
        raise QueryError(rank.path, f"no tensor {ref.node} {ref.io} {ref.slot} in iteration {prev}")
    return p


def tensor_diff(rank: Rank, ref: TensorRef, slice_text: str | None = None, cap: int = VALUE_CAP) -> dict[str, Any]:
    """Current, previous-iteration and difference (current - previous) values of a slice, with
    statistics of the three whole tensors."""
    prev = previous_tensor(rank, ref)
    if tuple(prev.shape) != tuple(ref.shape):
        raise QueryError(rank.path, f"{ref.node} {ref.io} {ref.slot}: shape {list(ref.shape)} in iteration "
                         f"{ref.iteration} but {list(prev.shape)} in {prev.iteration}")
    text, idx = _index(slice_text, ref.shape)
    cur_all, prev_all = np.asarray(ref.value()), np.asarray(prev.value())
    with np.errstate(all="ignore"):
        diff_all = cur_all.astype(np.float64) - prev_all.astype(np.float64)
    cur, pre, dif = (np.asarray(a[idx]) for a in (cur_all, prev_all, diff_all))
    each = cap // 3
    return {"tensor": tensor_digest(ref), "previous_tensor": tensor_digest(prev), "slice": text, "cap": cap,
            "iteration": ref.iteration, "previous_iteration": prev.iteration,
            "current": _selection(cur, text, each), "previous": _selection(pre, text, each),
            "difference": _selection(dif, text, each),
            "stats": {"current": tensor_stats(cur_all).to_dict(), "previous": tensor_stats(prev_all).to_dict(),
                      "difference": tensor_stats(diff_all).to_dict()}}


def tensor_npy(ref: TensorRef) -> tuple[str, bytes]:
    """(download file name, .npy bytes) of a tensor."""
    buf = io.BytesIO()
    np.save(buf, np.asarray(ref.value()))
    short = re.sub(r"[^A-Za-z0-9._-]+", "_", ref.node.rsplit("/", 1)[-1])
    return f"{short}.{ref.io}{ref.slot}.rank{ref.rank}.it{ref.iteration}.npy", buf.getvalue()


# -- code ---------------------------------------------------------------------------------------------
def _rank_hits(dump: Dump, rank: Rank, file: str, line: int) -> list[tuple[str, Any]]:
    graphs = rank.graphs
    return [(p, h) for p, h in dump.source_index.nodes_at(file, line)
            if h.graph_id in graphs and h.node in graphs[h.graph_id]]


def source_files(dump: Dump, rank: Rank, framework: bool = False, query: str | None = None) -> list[dict[str, Any]]:
    """Source files whose lines created nodes: user code first, framework files only when asked."""
    idx = dump.source_index
    q = (query or "").strip().lower()
    out = []
    for path in idx.all_files():
        fw = idx.is_framework(path)
        if (fw and not framework) or (q and q not in path.lower()):
            continue
        nodes: set[tuple[int, str]] = set()
        lines = idx.lines(path)
        for ln in lines:
            nodes.update((h.graph_id, h.node) for _, h in _rank_hits(dump, rank, path, ln))
        if not nodes:
            continue
        out.append({"file": path, "name": os.path.basename(path), "is_framework": fw, "lines": len(lines),
                    "nodes": len(nodes), "exists": os.path.isfile(path)})
    out.sort(key=lambda f: (f["is_framework"], f["file"]))
    return out


def _known_file(dump: Dump, path: str) -> str:
    files = dump.source_index.all_files()
    if path in files:
        return path
    cand = dump.source_index.files(path)
    if len(cand) == 1:
        return cand[0]
    if not cand:
        raise QueryError(None, f"no source file {path!r} created nodes of this dump")
    raise InvalidQueryError(f"{path!r} matches {len(cand)} files: {', '.join(cand[:5])}")


def source_lines(dump: Dump, rank: Rank, path: str) -> dict[str, Any]:
    """The lines of one source file that created nodes, with the code the stacks recorded and
    how many forward and backward nodes each made."""
    path = _known_file(dump, path)
    idx = dump.source_index
    lines = []
    for ln in idx.lines(path):
        hits = _rank_hits(dump, rank, path, ln)
        fwd = {(h.graph_id, h.node) for _, h in hits if h.direction == "forward"}
        bwd = {(h.graph_id, h.node) for _, h in hits if h.direction == "backward"}
        if fwd or bwd:
            lines.append({"line": ln, "code": idx.code(path, ln), "forward": len(fwd), "backward": len(bwd)})
    return {"file": path, "is_framework": idx.is_framework(path), "exists": os.path.isfile(path), "lines": lines}


def source_text(dump: Dump, path: str, max_bytes: int = SOURCE_CAP) -> dict[str, Any]:
    """The text of a source file named by the dump's stacks, when it exists on this machine."""
    path = _known_file(dump, path)
    out: dict[str, Any] = {"file": path, "exists": False, "text": None, "truncated": False}
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        out["reason"] = exc.strerror or str(exc)
        return out
    out["exists"] = True
    out["truncated"] = len(data) > max_bytes
    out["text"] = data[:max_bytes].decode("utf-8", "replace")
    return out


def nodes_at_line(dump: Dump, rank: Rank, file: str, line: int) -> list[dict[str, Any]]:
    """Nodes a source line created in one rank, forward first, each with its graph place."""
    seen: set[tuple[int, str]] = set()
    out = []
    for path, h in _rank_hits(dump, rank, file, line):
        if (h.graph_id, h.node) in seen:
            continue
        seen.add((h.graph_id, h.node))
        g = rank.graphs[h.graph_id]
        out.append(node_digest(g, h.node) | {"direction": h.direction, "file": path, "line": line,
                                            "place": place_of(g, h.node)})
    tree_pos = {gid: scope_tree(g).pos for gid, g in rank.graphs.items()}
    out.sort(key=lambda d: (d["direction"] != "forward", d["graph"], tree_pos[d["graph"]].get(d["node"], 0)))
    return out


def nodes_at_location(dump: Dump, rank: Rank, location: str) -> dict[str, Any]:
    """``FILE:LINE`` -> the files it matched and the nodes those lines created."""
    try:
        file, line = parse_location(location)
    except QueryError as exc:
        raise InvalidQueryError(exc.problem) from None
    files = dump.source_index.files(file)
    nodes = nodes_at_line(dump, rank, file, line)
    return {"location": location, "file": file, "line": line, "files": files, "nodes": nodes}


def marks_for_line(dump: Dump, rank: Rank, graph_id: int, location: str) -> dict[str, set[str]]:
    """{"forward": nodes, "backward": nodes} of one graph made by ``FILE:LINE``."""
    found = nodes_at_location(dump, rank, location)["nodes"]
    out: dict[str, set[str]] = {"forward": set(), "backward": set()}
    for d in found:
        if d["graph"] == graph_id:
            out[d["direction"]].add(d["node"])
    return out
