"""Weights, optimizer state and constants drawn beside the operators that read them, as Netron draws a
layer's initializers inside its box, instead of as children of the scope they were declared in (the
root's distant ``Parameter[20]``). A node is attached when it has no producer and holds a value of
that kind; each operator that reads it (through routing nodes, unless they are shown) lists it as a row."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..formats.records import Kind, NodeRecord

if TYPE_CHECKING:
    from .scopes import ScopeTree

ATTACH_KINDS = frozenset({Kind.WEIGHT, Kind.OPTIMIZER_STATE, Kind.CONSTANT})


@dataclass
class Attachments:
    """Of one scope tree, routing nodes shown or not: each attached node's readers in execution order,
    and each reader's attached inputs in slot order."""

    readers: dict[str, list[str]] = field(default_factory=dict)
    rows: dict[str, list[str]] = field(default_factory=dict)

    def __contains__(self, name: str) -> bool:
        return name in self.readers


def attachable(record: NodeRecord, names: Any) -> bool:
    """Whether a node is drawn beside its readers: a weight, state or constant that no node produces."""
    if record.kind not in ATTACH_KINDS and not record.is_constant:
        return False
    return not any(src in names for src, how in record.inputs if how == "data")


def build(tree: "ScopeTree", sources: Any, framework: bool) -> Attachments:
    """The attachments of ``tree``; ``sources(v)`` are the producers of ``v`` the view draws edges from."""
    att = Attachments()
    names = tree.records
    candidates = {n for n, a in names.items() if attachable(a, names)}
    for v in sorted(names, key=lambda x: (tree.pos[x], x)):
        if (not framework and tree.hidden(v)) or v in candidates:
            continue
        for u in sources(v):
            if u in candidates and u not in att.rows.get(v, ()):
                att.rows.setdefault(v, []).append(u)
                att.readers.setdefault(u, []).append(v)
    return att


def row(tree: "ScopeTree", name: str, reader: str, type_text: str) -> dict[str, Any]:
    """What a reader's box says of one attached input: its node, its name as seen from the reader's
    module, its kind and the value it passes."""
    a = tree.records[name]
    short = name[len(a.scope) + 1:] if a.scope and name.startswith(a.scope + "/") else name
    return {"node": name, "name": local_name(short, tree.records[reader].module), "op_type": a.op_type,
            "kind": str(a.kind), "param": a.param, "type": type_text}


def local_name(name: str, module: str) -> str:
    """A weight's name less the module that reads it, as Netron names a layer's inputs: "weight" for
    ``transformer.h.1.ln_1.weight`` read in ``transformer.h.1.ln_1``, also when the module path has more
    at its front (MindSpore's ``network._backbone.fc1`` reading ``fc1.weight``); else the name."""
    parts = module.split(".") if module else []
    for k in range(len(parts)):
        prefix = ".".join(parts[k:]) + "."
        if name.startswith(prefix) and len(name) > len(prefix):
            return name[len(prefix):]
    return name
