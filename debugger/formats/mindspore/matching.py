"""Tensor file op names -> graph node full names.

2.3+ writes the full scope with '/' as '_'; <= 2.2 the short name; parameters with '.' as '_'.
Graph and files can number the same op differently (the .pb says -op1, the files -op0): such
leftovers are paired by scope and op type in op-number order.
"""
from __future__ import annotations

import re
import threading
from collections import defaultdict
from typing import Iterable

from ..records import GraphRecord
from .tree import TensorFile

_OP_NUMBER_RE = re.compile(r"-op(\d+)$")
_SHORT_RE = re.compile(r"^(?P<scope>.*?)_?(?P<short>[^_]+-op\d+)$")


def op_number(name: str) -> int:
    """The N of a trailing ``-opN`` (-1 when absent)."""
    m = _OP_NUMBER_RE.search(name)
    return int(m.group(1)) if m else -1


class _Keys:
    """Spellings of one graph's node names, built once per graph record."""

    def __init__(self, record: GraphRecord) -> None:
        self.file_keys: dict[str, str] = {}
        self.leftover: dict[str, tuple[str, str]] = {}
        for n in record.nodes:
            if n.is_constant:
                continue
            if n.is_parameter:
                self.file_keys.setdefault(n.name.replace(".", "_").replace("/", "_"), n.name)
                self.file_keys.setdefault(n.name, n.name)
                continue
            self.file_keys.setdefault(n.name.replace("/", "_"), n.name)
            self.file_keys.setdefault(n.name.rsplit("/", 1)[-1], n.name)
            scope = n.name.rsplit("/", 1)[0].replace("/", "_") if "/" in n.name else ""
            self.leftover[n.name] = (scope, n.op_type)


# Records are plain (unhashable) dataclasses: keyed by id, holding the record so the id stays its own.
_KEYS: dict[int, tuple[GraphRecord, _Keys]] = {}
_LOCK = threading.Lock()


def _keys(record: GraphRecord) -> _Keys:
    with _LOCK:
        got = _KEYS.get(id(record))
        if got is not None and got[0] is record:
            return got[1]
        if len(_KEYS) >= 64:
            _KEYS.clear()
        k = _Keys(record)
        _KEYS[id(record)] = (record, k)
        return k


def file_key(record: GraphRecord, name: str) -> str | None:
    """The full name a file spelling (or a user's spelling) of a node stands for."""
    keys = _keys(record).file_keys
    return keys.get(name) or keys.get(name.replace("/", "_"))


def match_files(record: GraphRecord | None, files: Iterable[TensorFile]) -> dict[str, str]:
    """File op name -> graph full name: direct spellings, then renumbered leftovers."""
    if record is None:
        return {}
    k = _keys(record)
    out: dict[str, str] = {}
    leftovers: dict[tuple[str, str], set[str]] = defaultdict(set)
    for f in files:
        op_name = f.name.op_name
        if op_name in out:
            continue
        full = k.file_keys.get(op_name)
        if full is not None:
            out[op_name] = full
            continue
        m = _SHORT_RE.match(op_name)
        if m:
            leftovers[(m.group("scope"), f.name.op_type)].add(op_name)
    if not leftovers:
        return out
    used = set(out.values())
    free: dict[tuple[str, str], list[str]] = defaultdict(list)
    for name, key in k.leftover.items():
        if name not in used and key in leftovers:
            free[key].append(name)
    for key, names in leftovers.items():
        cands = sorted(free.get(key, []), key=op_number)
        for op_name, full in zip(sorted(names, key=op_number), cands):
            out[op_name] = full
    return out
