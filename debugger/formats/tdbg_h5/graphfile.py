"""A GraphRecord as ``graph_{G}.h5``: node columns, edge, output and hint tables, run history."""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from typing import Any, Sequence

import numpy as np

from ...errors import CorruptFileError
from ..records import LEVEL_OPS, LEVELS, GraphRecord, Kind, NodeRecord, OutputType, StackFrame
from .columns import read_table_column, strings, write_ints, write_strings
from .layout import EDGE_CODES, FORMAT_NAME, VERSION
from .legacy import module_of_scope, parse_source_text

# NodeRecord fields stored as string and boolean columns of /nodes (None is stored as "").
_STR_FIELDS = ("name", "op_type", "scope", "module", "instance_name", "kind", "param", "base_name", "activation")
# Columns a file written before they existed lacks: read as a default (see _legacy_activation; no module).
_OPTIONAL = frozenset({"activation", "module"})
_BOOL_FIELDS = ("is_parameter", "is_constant", "has_default", "is_backward", "is_routing", "is_collective", "per_rank",
                "stops_gradient")
# Boolean columns a file written before they existed lacks: read as False.
_OPTIONAL_BOOL = frozenset({"per_rank", "stops_gradient"})
# /stack: every node's frames, innermost first (version 3; older files hold nodes/source text)
_STACK_STR = ("file", "code")
_STACK_INT = ("line", "end_line", "column", "is_framework", "forward_candidate")


def graph_key(record: GraphRecord) -> str:
    """A digest of everything in the graph but the file it came from (ranks with equal graphs share it)."""
    d = asdict(record)
    d.pop("source_file", None)
    text = json.dumps(d, sort_keys=True, default=list)
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()


def write_graph(f: Any, record: GraphRecord, run_history: Sequence[int]) -> None:
    """Fill an open, empty HDF5 file with ``record``."""
    f.attrs.update({"format": FORMAT_NAME, "version": VERSION, "kind": "graph",
                    "graph_id": record.graph_id, "name": record.name,
                    "source_file": record.source_file, "key": graph_key(record), "level": record.level})
    if record.compiled:
        f.attrs["compiled"] = 1
    nodes = record.nodes
    g = f.create_group("nodes")
    for name in _STR_FIELDS:
        write_strings(g, name, [getattr(n, name) or "" for n in nodes])
    for name in _BOOL_FIELDS:
        write_ints(g, name, [bool(getattr(n, name)) for n in nodes], "u1")
    _write_ragged(f, "inputs", nodes, lambda n: n.inputs,
                  {"source": lambda e: e[0]}, {"edge": lambda e: EDGE_CODES.index(e[1])})
    _write_ragged(f, "outputs", nodes, lambda n: n.outputs, {"dtype": lambda o: o.dtype or ""},
                  {"ndim": lambda o: -1 if o.shape is None else len(o.shape)})
    write_ints(f["outputs"], "dims", [d for n in nodes for o in n.outputs for d in (o.shape or ())])
    # what a format knows of one output alone (a gradient slot of a multi-output kernel, an undefined slot)
    _write_ragged(f, "output_hints", nodes, lambda n: n.outputs, {"kind": lambda o: o.kind or "",
                  "param": lambda o: o.param or ""}, {"undefined": lambda o: int(o.undefined)})
    _write_ragged(f, "input_roles", nodes, lambda n: n.input_roles, {"role": lambda r: r}, {})
    _write_ragged(f, "value_inputs", nodes, lambda n: n.value_inputs, {"node": lambda v: v}, {})
    _write_ragged(f, "stack", nodes, lambda n: n.stack, {c: _getter(c) for c in _STACK_STR},
                  {c: _getter(c, int) for c in _STACK_INT}, "<i4")
    _write_ragged(f, "groups", nodes, lambda n: n.group, {}, {"rank": int}, "<i4")
    write_strings(f, "graph_outputs", record.outputs)
    write_strings(f, "execution_order", record.execution_order)
    write_ints(f, "run_history", sorted(set(int(i) for i in run_history)))


def _getter(attr: str, cast: Any = str) -> Any:
    return lambda x: cast(getattr(x, attr))


def _write_ragged(f: Any, name: str, nodes: list[NodeRecord], items: Any,
                  str_cols: dict[str, Any], int_cols: dict[str, Any], int_dtype: str = "<i2") -> None:
    """A per-node list as flat columns plus ``count`` (items per node, in node order)."""
    g = f.create_group(name)
    rows = [items(n) for n in nodes]
    write_ints(g, "count", [len(r) for r in rows], "<i4")
    flat = [x for r in rows for x in r]
    for col, fn in str_cols.items():
        write_strings(g, col, [fn(x) for x in flat])
    for col, fn in int_cols.items():
        write_ints(g, col, [fn(x) for x in flat], int_dtype)


def read_graph(f: Any, path: str) -> tuple[GraphRecord, list[int], str]:
    """The GraphRecord, run history and content key of an open graph file."""
    a = f.attrs
    if a.get("format") != FORMAT_NAME or a.get("kind") != "graph":
        raise CorruptFileError(path, "not a tdbg-h5 graph file")
    if int(a.get("version", 0)) > VERSION:
        raise CorruptFileError(path, f"tdbg-h5 version {a.get('version')} is newer than this tdbg reads ({VERSION})")
    cols: dict[str, list[Any]] = {n: strings(read_table_column(f, f"nodes/{n}", path)) for n in _STR_FIELDS
                                  if n not in _OPTIONAL or f"nodes/{n}" in f}
    n_nodes = len(cols["name"])
    if "activation" not in cols:
        cols["activation"] = [_legacy_activation(k, o) for k, o in zip(cols["kind"], cols["op_type"])]
    if "module" not in cols:
        cols["module"] = [module_of_scope(s) for s in cols["scope"]]
    cols["kind"] = [_kind(k, path) for k in cols["kind"]]
    for n in _STR_FIELDS + _BOOL_FIELDS:
        if n in _OPTIONAL_BOOL and f"nodes/{n}" not in f:
            cols[n] = [False] * n_nodes
        elif n not in cols:
            cols[n] = [bool(x) for x in read_table_column(f, f"nodes/{n}", path, n_nodes)]
        elif len(cols[n]) != n_nodes:
            raise CorruptFileError(path, f"nodes/{n} has {len(cols[n])} rows, expected {n_nodes}")
    inputs = _read_ragged(f, "inputs", path, n_nodes, ["source"], ["edge"])
    outputs = _read_ragged(f, "outputs", path, n_nodes, ["dtype"], ["ndim"])
    dims = [int(d) for d in read_table_column(f, "outputs/dims", path)]
    # files written before output hints were stored have none: every output is its node's
    hints = (_read_ragged(f, "output_hints", path, n_nodes, ["kind", "param"], ["undefined"])
             if "output_hints" in f else [[("", "", 0)] * len(o) for o in outputs])
    roles = _read_ragged(f, "input_roles", path, n_nodes, ["role"], [])
    values = _read_ragged(f, "value_inputs", path, n_nodes, ["node"], [])
    stacks = _read_stacks(f, path, n_nodes)
    # files written before process groups were stored have none: every collective spans all ranks
    groups = _read_ragged(f, "groups", path, n_nodes, [], ["rank"]) if "groups" in f else [[]] * n_nodes
    nodes = []
    pos = 0
    for i in range(n_nodes):
        outs = []
        if len(hints[i]) != len(outputs[i]):
            raise CorruptFileError(path, "output_hints does not match outputs")
        for (dtype, ndim), (kind, param, undefined) in zip(outputs[i], hints[i]):
            shape = None if ndim < 0 else tuple(dims[pos:pos + ndim])
            pos += max(ndim, 0)
            outs.append(OutputType(dtype or None, shape, _kind(kind, path) if kind else None, param or None,
                                   bool(undefined)))
        nodes.append(NodeRecord(
            **{k: cols[k][i] for k in _STR_FIELDS if k != "param"},
            param=cols["param"][i] or None,
            **{k: cols[k][i] for k in _BOOL_FIELDS},
            inputs=[(s, _code(EDGE_CODES, e, path)) for s, e in inputs[i]], outputs=outs,
            input_roles=tuple(r for (r,) in roles[i]), value_inputs=tuple(v for (v,) in values[i]),
            stack=stacks[i], group=tuple(int(r) for (r,) in groups[i])))
    if pos != len(dims):
        raise CorruptFileError(path, "outputs/dims does not match outputs/ndim")
    record = GraphRecord(int(a["graph_id"]), str(a.get("name", "")), nodes,
                         strings(read_table_column(f, "graph_outputs", path)), str(a.get("source_file", "")),
                         strings(read_table_column(f, "execution_order", path)), _level(a.get("level"), path),
                         compiled=bool(a.get("compiled", 0)))
    history = [int(i) for i in read_table_column(f, "run_history", path)]
    return record, history, str(a.get("key", ""))


def _level(value: Any, path: str) -> str:
    """The graph's recording level (files written before levels existed recorded every operator)."""
    if value is None:
        return LEVEL_OPS
    level = value.decode("ascii", "replace") if isinstance(value, bytes) else str(value)
    if level not in LEVELS:
        raise CorruptFileError(path, f"unknown recording level {level[:40]!r} (known: {', '.join(LEVELS)})")
    return level


def _read_stacks(f: Any, path: str, n_nodes: int) -> list[tuple[StackFrame, ...]]:
    """Every node's frames: the /stack columns, or a version 2 file's ``nodes/source`` text."""
    if "stack" not in f:
        text = strings(read_table_column(f, "nodes/source", path, n_nodes))
        order = read_table_column(f, "nodes/source_outermost_first", path, n_nodes)
        return [parse_source_text(t, bool(o)) for t, o in zip(text, order)]
    rows = _read_ragged(f, "stack", path, n_nodes, list(_STACK_STR), list(_STACK_INT))
    return [tuple(StackFrame(file, line, end, column, code, bool(fw), bool(cand))
                  for file, code, line, end, column, fw, cand in r) for r in rows]


def _kind(word: str, path: str) -> Kind:
    try:
        return Kind(word)
    except ValueError:
        raise CorruptFileError(path, f"unknown node kind {word!r} (kinds: {', '.join(k.value for k in Kind)})") from None


def _legacy_activation(kind: str, op_type: str) -> str:
    """A file from before ``nodes/activation``: an activation node's function is its op type, in-place
    or not (``relu_`` is a relu)."""
    return op_type.lower().rstrip("_") if kind == "activation" else ""


def _read_ragged(f: Any, name: str, path: str, n_nodes: int, str_cols: list[str],
                 int_cols: list[str]) -> list[list[tuple[Any, ...]]]:
    counts = read_table_column(f, f"{name}/count", path, n_nodes).astype(np.int64)
    if (counts < 0).any():
        raise CorruptFileError(path, f"{name}/count is negative")
    total = int(counts.sum())
    cols: list[list[Any]] = [strings(read_table_column(f, f"{name}/{c}", path, total)) for c in str_cols]
    cols += [[int(x) for x in read_table_column(f, f"{name}/{c}", path, total)] for c in int_cols]
    flat = list(zip(*cols)) if cols else [()] * total
    out, pos = [], 0
    for c in counts:
        out.append(flat[pos:pos + int(c)])
        pos += int(c)
    return out


def _code(names: tuple[str, ...], i: int, path: str) -> str:
    if not 0 <= i < len(names):
        raise CorruptFileError(path, f"unknown code {i} (expected 0..{len(names) - 1})")
    return names[i]
