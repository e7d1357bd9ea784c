"""One scope level of a graph as the graph view shows it: child scopes, same-type siblings folded
(``Adam[7]``), routing nodes hidden, and the edges between the children aggregated."""
from __future__ import annotations

import re
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..errors import InvalidQueryError, QueryError
from ..formats.records import Kind, NodeRecord
from ..model.graph import Graph
from . import attach
from .pages import Page, page

FOLD = 5                # same-type siblings folded into one node from this many on (the CLI's default too)

_GROUP_RE = re.compile(r"^(?:(?P<scope>.*)/)?(?P<op>[^/\[\]]+)\[(?P<n>\d+)\]$")


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
        self._attach: dict[bool, attach.Attachments] = {}
        self._lock = threading.Lock()
        self.records: dict[str, NodeRecord] = {n: graph.record_of(n) for n in graph}
        self.succ: dict[str, list[str]] = {n: graph.successors(n) for n in graph}
        # routing nodes are hidden from the graph view unless asked for; edges are drawn through them
        self.hidden_set = {n for n, a in self.records.items() if a.is_routing}
        # Execution position; a node that does not run (parameter, constant, Load...) sorts with its
        # first consumer that does.
        order = graph.execution_index
        end = len(order)
        self.pos: dict[str, int] = {}
        for n in self.records:
            p = order.get(n)
            if p is None:
                p = min((order.get(w, end) for w in self.succ[n]), default=end)
                if p == end:   # one more hop: Parameter -> Load -> kernel
                    p = min((order.get(x, end) for w in self.succ[n] for x in self.succ.get(w, ())), default=end)
            self.pos[n] = p
        for n, a in self.records.items():
            sc = self._ensure(a.scope)
            sc.nodes.append(n)
            p = self.pos[n]
            kind = str(a.kind)
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
        # Iterative: a scope path is as deep as the file says, and recursion would follow it.
        missing: list[str] = []
        p = path
        while p not in self.scopes:
            missing.append(p)
            p = p.rsplit("/", 1)[0] if "/" in p else ""
        parent = self.scopes[p]
        for q in reversed(missing):
            s = self.scopes[q] = _Scope(q, parent)
            parent.scopes[s.name] = s
            parent = s
        return self.scopes[path]

    def hidden(self, name: str) -> bool:
        """Whether a node only routes values (hidden unless the framework view is asked for)."""
        return name in self.hidden_set

    def subtree(self, s: _Scope) -> Iterable[str]:
        """Every node under a scope."""
        stack = [s]
        while stack:
            x = stack.pop()
            yield from x.nodes
            stack.extend(x.scopes.values())

    def attachments(self, framework: bool) -> attach.Attachments:
        """The weights and constants drawn beside their readers (attach.py), built on first use."""
        with self._lock:
            att = self._attach.get(framework)
        if att is None:
            att = attach.build(self, lambda v: _sources(self, v, framework), framework)
            with self._lock:
                self._attach[framework] = att
        return att

    def place(self, name: str, fold: int = FOLD, framework: bool = False) -> str:
        """The scope path to open to see ``name`` as a node: its scope, or its folded group; for a weight
        or constant drawn beside its readers, the place of the first of them."""
        readers = self.attachments(framework).readers.get(name)
        if readers:
            return self.place(readers[0], fold, framework)
        a = self.records[name]
        scope = a.scope
        sc = self.scopes[scope]
        op = a.op_type
        if fold > 0:
            same = [n for n in sc.nodes if self.records[n].op_type == op
                    and (framework or n not in self.hidden_set)]
            if len(same) >= fold:
                return _join(scope, f"{op}[{len(same)}]")
        return scope


def scope_tree(graph: Graph) -> ScopeTree:
    """The graph's scope tree (built on first use, then kept with the graph)."""
    return graph.derived(ScopeTree, ScopeTree)


def _join(scope: str, name: str) -> str:
    return f"{scope}/{name}" if scope else name


def short_name(name: str, scope: str) -> str:
    """A node's name within its scope."""
    return name[len(scope) + 1:] if scope and name.startswith(scope + "/") else name


def node_digest(graph: Graph, name: str) -> dict[str, Any]:
    """A light summary of a node for lists: name, short name, op type, kind, scope."""
    a = graph.record_of(name)
    scope = a.scope
    return {"graph": graph.graph_id, "node": name, "name": short_name(name, scope), "op_type": a.op_type,
            "kind": a.kind, "param": a.param, "scope": scope,
            "is_backward": a.is_backward,
            "execution_index": graph.execution_index.get(name)}


def _sources(tree: ScopeTree, v: str, framework: bool) -> list[str]:
    """Producers of ``v``; with routing ops hidden, followed through them along the data they pass."""
    records, hidden = tree.records, tree.hidden_set
    preds = [i for i, _ in records[v].inputs if i and i in records]
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
        # the routing node's data inputs, as its reader traced them (empty for a state token)
        stack.extend([i for i in records[u].value_inputs if i and i in records][::-1])
    return out


def _chain(tree: ScopeTree, s: _Scope, framework: bool) -> tuple[str, str | None]:
    """(scope to open, node to select) for a click on ``s``: a chain of scopes that each hold a
    single child opens in one click, down to the scope with a choice (or to its only node)."""
    while True:
        subs = [x for x in s.scopes.values() if framework or x.visible]
        direct = [n for n in s.nodes if framework or not tree.hidden(n)]
        if len(subs) == 1 and not direct:
            s = subs[0]
            continue
        return s.path, (direct[0] if len(direct) == 1 and not subs else None)


_ROLL_UP_KINDS = frozenset({Kind.WEIGHT, Kind.GRADIENT, Kind.OPTIMIZER_STATE})


def weight_users(graph: Graph, param: str) -> list[str]:
    """The forward nodes that read the weight ``param`` (through routing ops): the layer using it,
    not its gradient or its optimizer update."""
    if param not in graph:
        return []
    out, seen, todo = [], {param}, graph.successors(param)
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        a = graph.record_of(n)
        if a.is_routing:
            todo.extend(graph.successors(n))
            continue
        if a.is_backward or param not in graph.value_inputs(n):
            continue
        # the optimizer's kernel reads the weight together with its gradient or state
        if any(graph.record_of(u).kind in (Kind.GRADIENT, Kind.OPTIMIZER_STATE)
               for u in graph.value_inputs(n) if u in graph):
            continue
        out.append(n)
    return sorted(out)


def hit_nodes(graph: Graph, hits: Iterable[Mapping[str, Any]]) -> set[str]:
    """The nodes a set of hits marks: each hit's node and, for a hit on a weight, its gradient or
    its optimizer state, the nodes of the layer that uses the weight (so its scope carries the badge)."""
    out: set[str] = set()
    params: set[str] = set()
    for h in hits:
        out.add(h["node"])
        if h.get("kind") in _ROLL_UP_KINDS and h.get("param"):
            params.add(h["param"])
    for p in params:
        out.update(weight_users(graph, p))
    return out


def _structure(tree: ScopeTree, path: str, fold: int, framework: bool) -> dict[str, Any]:
    """Children and aggregated edges of a scope or a folded group (cached per tree)."""
    key = (path, fold, framework)
    with tree._lock:
        hit = tree._views.get(key)
    if hit is not None:
        return hit
    sc, group_op = _open(tree, path)
    att = tree.attachments(framework)
    direct = [n for n in sc.nodes if (framework or not tree.hidden(n)) and n not in att
              and (group_op is None or tree.records[n].op_type == group_op)]
    if group_op is not None and not direct:
        raise QueryError(None, f"no scope {path!r} in graph {tree.graph.graph_id}")
    member: dict[str, str] = {}           # node -> child id, for nodes shown directly or in a group
    children = _scope_children(tree, sc, framework) if group_op is None else []
    children += _node_children(tree, sc, direct, fold if group_op is None else 0, member)
    children.sort(key=lambda c: (c["first"], c["name"]))
    located = _child_locator(tree, sc, member, group_op is not None)
    nodes = tree.subtree(sc) if group_op is None else iter(direct)
    edges = _edges(tree, (n for n in nodes if n not in att), located, framework, children)
    rows = _attach_rows(tree, att, children)
    child_of = _holder_locator(located, _held(att, located, rows))
    parents = [{"name": "root", "path": ""}]
    acc = ""
    for p in (sc.path.split("/") if sc.path else []):
        acc = _join(acc, p)
        parents.append({"name": p, "path": acc})
    if group_op is not None:
        parents.append({"name": path.rsplit("/", 1)[-1], "path": path})
    out = {"path": path, "type": "group" if group_op else "scope", "parents": parents,
           "children": children, "child_of": child_of, "edges": edges, "rows": rows}
    with tree._lock:
        if len(tree._views) > 256:
            tree._views.clear()
        tree._views[key] = out
    return out


def _open(tree: ScopeTree, path: str) -> tuple[_Scope, str | None]:
    """The scope ``path`` names, and the op type when it names a folded group of one (``Adam[7]``)."""
    sc = tree.scopes.get(path)
    if sc is not None:
        return sc, None
    m = _GROUP_RE.match(path)
    sc = tree.scopes.get(m.group("scope") or "") if m else None
    if m is None or sc is None:
        raise QueryError(None, f"no scope {path!r} in graph {tree.graph.graph_id}")
    return sc, m.group("op")


def _scope_children(tree: ScopeTree, sc: _Scope, framework: bool) -> list[dict[str, Any]]:
    """The child scopes of ``sc`` that show anything."""
    out = []
    for s in sc.scopes.values():
        if not framework and s.visible == 0:
            continue
        opens, select = _chain(tree, s, framework)
        out.append({"type": "scope", "id": s.path, "name": s.name, "path": s.path,
                    "count": s.count if framework else s.visible,
                    "kinds": dict(s.kinds if framework else s.vkinds),
                    "first": s.first, "open": opens, "select": select})
    return out


def _node_children(tree: ScopeTree, sc: _Scope, direct: list[str], fold: int,
                   member: dict[str, str]) -> list[dict[str, Any]]:
    """The nodes shown directly: ``fold`` or more of one op type as a group (0: never); ``member`` filled."""
    out: list[dict[str, Any]] = []
    by_op: dict[str, list[str]] = defaultdict(list)
    for n in direct:
        by_op[tree.records[n].op_type].append(n)
    for op, names in by_op.items():
        if fold > 0 and len(names) >= fold:
            gid = _join(sc.path, f"{op}[{len(names)}]")
            kinds: dict[str, int] = defaultdict(int)
            for n in names:
                kinds[str(tree.records[n].kind)] += 1
                member[n] = gid
            out.append({"type": "group", "id": gid, "name": f"{op}[{len(names)}]", "path": gid,
                        "op_type": op, "count": len(names), "kinds": dict(kinds),
                        "first": min(tree.pos[n] for n in names)})
            continue
        for n in names:
            member[n] = n
            out.append({"type": "node", "id": n, **node_digest(tree.graph, n), "first": tree.pos[n]})
    return out


def _child_locator(tree: ScopeTree, sc: _Scope, member: dict[str, str], in_group: bool) -> Any:
    """A function from a node to the child of ``sc`` that shows it (None: outside ``sc``)."""
    prefix = sc.path + "/" if sc.path else ""
    memo: dict[str, str | None] = {}

    def child_of(n: str) -> str | None:
        c = member.get(n)
        if c is not None or in_group:
            return c
        if n in memo:
            return memo[n]
        s = tree.records[n].scope
        if s == sc.path or (prefix and not s.startswith(prefix)):
            c = None
        else:
            rest = s[len(prefix):]
            c = prefix + rest.split("/", 1)[0] if rest else None
        memo[n] = c
        return c

    return child_of


def _attach_rows(tree: ScopeTree, att: attach.Attachments, children: list[dict[str, Any]]) -> set[str]:
    """Each node child's ``attached`` rows (its weights and constants); the attached nodes shown so."""
    shown: set[str] = set()
    for c in children:
        if c["type"] != "node":
            continue
        names = att.rows.get(c["id"], [])
        c["attached"] = [attach.row(tree, u, c["id"], _type_text(tree.records[u])) for u in names]
        shown.update(names)
    return shown


def _held(att: attach.Attachments, child_of: Any, rows: set[str]) -> dict[str, str]:
    """The scope or group child that takes each attached node not drawn as a row here (its first reader
    shown in it): a layer's weights count in its scope's marks and overlay colour."""
    out: dict[str, str] = {}
    for u, readers in att.readers.items():
        if u in rows:
            continue
        c = next((c for c in map(child_of, readers) if c is not None), None)
        if c is not None:
            out[u] = c
    return out


def _holder_locator(located: Any, held: dict[str, str]) -> Any:
    """``located`` extended to the attached nodes a scope or group child takes."""
    def child_of(n: str) -> str | None:
        c = held.get(n)
        return c if c is not None else located(n)
    return child_of


def _edges(tree: ScopeTree, nodes: Iterable[str], child_of: Any, framework: bool,
           children: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Edges between children, counted; each child's ``external_in``/``external_out`` set."""
    edges: dict[tuple[str, str], int] = defaultdict(int)
    types: dict[tuple[str, str], set[str]] = defaultdict(set)
    ext_in: dict[str, int] = defaultdict(int)
    ext_out: dict[str, int] = defaultdict(int)
    att = tree.attachments(framework)
    for v in nodes:
        if not framework and tree.hidden(v):
            continue
        cv = child_of(v)
        if cv is None:
            continue
        for u in _sources(tree, v, framework):
            if u in att:
                continue              # drawn as a row of v's box, not as an edge or a port
            cu = child_of(u)
            if cu is None:
                ext_in[cv] += 1
            elif cu != cv:
                edges[(cu, cv)] += 1
                types[(cu, cv)].add(_type_text(tree.records[u]))
        # consumers outside this scope (or group)
        for w in tree.succ[v]:
            if (framework or not tree.hidden(w)) and child_of(w) is None:
                ext_out[cv] += 1
    for c in children:
        c["external_in"] = ext_in.get(c["id"], 0)
        c["external_out"] = ext_out.get(c["id"], 0)
    return [{"source": s, "target": t, "count": c, "type": _one(types[(s, t)])} for (s, t), c in edges.items()]


def _type_text(record: NodeRecord) -> str:
    """The dtype and shape a node passes on ("float32 8×16"), when it has one output and the graph
    says ("" otherwise)."""
    outs = [o for o in record.outputs if not o.undefined]
    if len(outs) != 1 or not outs[0].dtype or outs[0].shape is None:
        return ""
    shape = "×".join(str(d) for d in outs[0].shape) or "scalar"
    return f"{str(outs[0].dtype).lower()} {shape}"


def _one(texts: set[str]) -> str:
    """The text all the edges of a group share ("" when they differ or one is unknown)."""
    return next(iter(texts)) if len(texts) == 1 else ""


def scope_view(graph: Graph, path: str = "", *, fold: int = FOLD, framework: bool = False, begin: int = 0,
               end: int | None = None, marks: Mapping[str, Iterable[str]] | None = None,
               focus: str | None = None) -> dict[str, Any]:
    """The children of ``path`` (a scope, or a folded group such as ``optimizer/Adam[7]``).

    Children are scopes, folded groups of ``fold`` or more same-type sibling nodes, and nodes,
    in execution order; a node lists in ``attached`` the weights and constants it reads (attach.py),
    which are not children. ``edges`` aggregate the graph's edges between the children of the page
    (routing ops hidden unless ``framework``). ``marks`` maps a mark name ("hit", "forward"...) to node
    names; each child and attached row gets ``marks: {name: how many of its nodes carry it}``. With
    ``focus`` (a node shown on the page), ``neighbours`` lists its producers and readers outside the level.
    """
    tree = scope_tree(graph)
    st = _structure(tree, path, fold, framework)
    pg = page(st["children"], begin, end)
    ids = {c["id"] for c in pg.items}
    counts = _mark_counts(graph, st, ids, marks or {})
    items = [_with_marks(c, counts) for c in pg.items]
    edges = [e for e in st["edges"] if e["source"] in ids and e["target"] in ids]
    out = {"graph": graph.graph_id, "path": st["path"], "type": st["type"], "parents": st["parents"],
           "children": Page(pg.begin, pg.end, pg.total, items).to_dict(), "edges": edges}
    shown = _focus_shown(tree, st, focus, ids, framework) if focus and focus in graph else None
    if shown is not None:
        out["neighbours"] = neighbours(tree, shown, st["child_of"], fold=fold, framework=framework)
    return out


def _focus_shown(tree: ScopeTree, st: dict[str, Any], focus: str, ids: set[str], framework: bool) -> str | None:
    """The node whose neighbours a focus on ``focus`` draws: itself when the page shows it, or for a
    weight or constant drawn as a row, the first reader showing that row."""
    if st["child_of"](focus) in ids:
        return focus
    if focus in st["rows"]:
        return next((r for r in tree.attachments(framework).readers[focus] if r in ids), None)
    return None


def _mark_counts(graph: Graph, st: dict[str, Any], ids: set[str],
                 marks: Mapping[str, Iterable[str]]) -> dict[str, dict[str, int]]:
    """Per child id (and per attached node drawn as a row), how many of its nodes carry each mark."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    child_of = st["child_of"]
    for mark, names in marks.items():
        for n in names:
            if n in st["rows"]:
                counts[n][mark] += 1
                continue
            c = child_of(n) if n in graph else None
            if c is not None and c in ids:
                counts[c][mark] += 1
    return counts


def _with_marks(c: dict[str, Any], counts: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    """A child as the answer gives it: its marks, and its attached rows' marks."""
    out = {k: v for k, v in c.items() if k != "first"} | {"marks": dict(counts.get(c["id"], {}))}
    if "attached" in c:
        out["attached"] = [r | {"marks": dict(counts.get(r["node"], {}))} for r in c["attached"]]
    return out


NEIGHBOURS_MAX = 8      # per side: a node read by a hundred others lists the first ones


def neighbours(tree: ScopeTree, focus: str, child_of: Any, *, fold: int = FOLD,
               framework: bool = False) -> dict[str, Any]:
    """The producers and readers of ``focus`` that its level does not show (weights and constants are
    rows, not neighbours), each with the place to open to see it, and the edges that join them to the
    child showing ``focus``."""
    att = tree.attachments(framework)
    target = child_of(focus)
    ins = [u for u in _sources(tree, focus, framework) if u not in att and child_of(u) is None]
    outs = [w for w in _readers(tree, focus, framework) if child_of(w) is None]
    items, edges = [], []
    for names, inward in ((ins, True), (outs, False)):
        for n in names[:NEIGHBOURS_MAX]:
            items.append(node_digest(tree.graph, n) | {"id": n, "type": "node", "side": "in" if inward else "out",
                                                       "place": tree.place(n, fold, framework or tree.hidden(n))})
            text = _type_text(tree.records[n if inward else focus])
            edges.append({"source": n, "target": target, "count": 1, "type": text} if inward
                         else {"source": target, "target": n, "count": 1, "type": text})
    return {"focus": focus, "items": items, "edges": edges,
            "more": max(0, len(ins) - NEIGHBOURS_MAX) + max(0, len(outs) - NEIGHBOURS_MAX)}


def _readers(tree: ScopeTree, v: str, framework: bool) -> list[str]:
    """The nodes reading ``v``, in execution order; with routing ops hidden, followed through them."""
    out: list[str] = []
    seen = {v}
    todo = list(tree.succ[v])
    while todo:
        w = todo.pop()
        if w in seen:
            continue
        seen.add(w)
        if not framework and tree.hidden(w):
            todo.extend(tree.succ.get(w, ()))
        else:
            out.append(w)
    return sorted(out, key=lambda x: (tree.pos[x], x))


def scope_rollup(graph: Graph, path: str, values: Mapping[str, float], *, fold: int = FOLD,
                 framework: bool = False) -> dict[str, tuple[float, str]]:
    """Per child of ``path`` (scope, group or node): the worst (largest) value among the nodes it shows,
    and the node that has it; a child none of whose nodes has a value is left out."""
    tree = scope_tree(graph)
    st = _structure(tree, path, fold, framework)
    out: dict[str, tuple[float, str]] = {}
    for n, v in values.items():
        if n not in tree.records or (not framework and tree.hidden(n)):
            continue
        # an attached node drawn as a row has a colour of its own, under its own name
        c = n if n in st["rows"] else st["child_of"](n)
        if c is not None and (c not in out or v > out[c][0]):
            out[c] = (v, n)
    return out


def search_nodes(graph: Graph, query: str, *, fold: int = FOLD, framework: bool = False) -> list[dict[str, Any]]:
    """Nodes whose full name contains ``query`` (case-insensitive), in execution order, with the
    scope path (``place``) to open to see each."""
    q = query.strip().lower()
    if not q:
        raise InvalidQueryError("empty search")
    tree = scope_tree(graph)
    names = [n for n in graph if q in n.lower()]
    names.sort(key=lambda n: (tree.pos[n], n))
    return [node_digest(graph, n) | {"place": tree.place(n, fold, framework or tree.hidden(n))} for n in names]


def place_of(graph: Graph, name: str, *, fold: int = FOLD, framework: bool = False) -> str:
    """The scope path under which the graph view shows ``name``."""
    if name not in graph:
        raise QueryError(None, f"no node {name!r} in graph {graph.graph_id}")
    tree = scope_tree(graph)
    return tree.place(name, fold, framework or tree.hidden(name))


