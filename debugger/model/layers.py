"""The nodes of a layer a model assigns as ``self.<attribute>``: from the nodes' module paths and the
parameters' dotted names (every format gives both), never from a framework's scope text."""
from __future__ import annotations

from collections import defaultdict

from .graph import Graph

_Index = tuple[dict[str, set[str]], dict[str, set[str]], dict[str, set[str]]]


def layer_nodes(g: Graph, name: str) -> list[str]:
    """A layer's nodes: its parameters (``name.*``), the forward kernels whose module path has a part
    ``name``, and the gradients and optimizer state of its parameters, by graph evidence (backward
    kernels can carry another layer's module, so theirs says nothing)."""
    params, in_module, of_param = g.derived(layer_nodes, _build_index)
    mine = params.get(name, set())
    found = set(mine) | in_module.get(name, set())
    for p in mine:
        found |= of_param.get(p, set())
    return [n for n in g if n in found]    # graph order


def _build_index(g: Graph) -> _Index:
    """Built once per graph (a source file's every layer line asks): attribute -> its parameters,
    attribute -> forward nodes in a module of that name, parameter -> nodes that carry it."""
    params: dict[str, set[str]] = defaultdict(set)
    in_module: dict[str, set[str]] = defaultdict(set)
    of_param: dict[str, set[str]] = defaultdict(set)
    for node in g.nodes():
        rec = node.record
        if rec.is_parameter:
            parts = rec.name.split(".")
            for i in range(1, len(parts)):          # fc2.weight -> fc2; layers.3.w -> layers, layers.3
                params[".".join(parts[:i])].add(rec.name)
        if rec.is_routing:
            continue
        if rec.param:
            of_param[rec.param].add(rec.name)
        if not rec.is_backward and rec.module:
            for part in rec.module.split("."):     # backbone.fc3: the layer self.fc3 and self.backbone
                in_module[part].add(rec.name)
    return dict(params), dict(in_module), dict(of_param)
