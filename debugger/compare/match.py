"""Which tensor of one side is which tensor of the other.

Nodes are paired in three steps:

1. a mapping file ``{"a_name": "b_name"}`` (node names, full or as tensor files spell them): an entry
   overrides the other steps for the two nodes it names;
2. the same full name on both sides ("exact");
2b. "parameter": what belongs to one parameter, pairs by the parameter's name where the kernel names differ:
   an optimizer kernel by the weight it updates, a gradient by its weight (one per side), so that two programs
   that order their updates differently (a PyNative optimizer graph, a functional loop) never pair one
   weight's update with another's;
3. "fuzzy": the two execution orders aligned by :class:`difflib.SequenceMatcher` on the kernel
   names without their run-specific numbers (the reader's ``base_name``), exact pairs acting as anchors; inside each
   stretch that does not align, a second alignment on op types alone. Parameters left over are
   paired through the kernels already paired: the parameter read at input slot s of kernel k on
   side a is the one read at slot s of k's partner on side b.

When one graph is a compiled program and the other is not (debugger.compare.programs), steps 2 and 3
are replaced: weights, gradients, optimizer state and the loss pair by name, operators by module scope,
operator type, first-output shape and order ("program"); what has no counterpart is not compared, and
of a paired operator only the outputs both sides hold.

A tensor is (node, io, slot): tensors of paired nodes pair by io and slot; a tensor without a
partner is reported as missing on the other side when its node is in both graphs (the dump lost it). A
node that the other graph does not have at all (another program: a PyNative optimizer graph against a
whole step, a data-parallel run's all-reduces against a single card's step) is not compared: counted
(:attr:`NodeMatch.skipped_a`, ``skipped_b``) and said, never a divergence.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Callable, Iterator, Mapping

from ..errors import DumpError
from ..formats.records import Kind
from ..model.graph import Graph
from ..model import TensorRef
from .programs import ProgramPairing, named_alike, pair_operators, programs_differ

EXACT, FUZZY, MAPPING, PROGRAM, PARAMETER = "exact", "fuzzy", "mapping", "program", "parameter"

Key = tuple[str, str, int]


@dataclass
class NodeMatch:
    """Side-a node -> (side-b node, method) where not simply the same name on both sides."""

    pairs: dict[str, tuple[str, str]] = field(default_factory=dict)
    taken: set[str] = field(default_factory=set)       # side-b nodes paired with another name
    identity: bool = False                              # both sides are the same graph
    programs: ProgramPairing | None = None              # the two graphs are different programs
    skipped_a: set[str] = field(default_factory=set)    # side-a nodes not compared: no counterpart
    skipped_b: set[str] = field(default_factory=set)

    def compares(self, node: str, io: str, side_b: bool = False) -> bool:
        """Whether a tensor of ``node`` (of side a, or b) is compared at all: across programs, only the
        outputs of paired operators (an input is another operator's output) and what pairs by name."""
        if node in (self.skipped_b if side_b else self.skipped_a):
            return False
        return self.programs is None or io == "output" or node not in (self.taken if side_b else self.pairs)

    def partner(self, node: str) -> tuple[str | None, str]:
        """(side-b node, method) of a side-a node; (None, "") when it has none."""
        got = self.pairs.get(node)
        if got is not None:
            return got
        if node in self.taken:
            return None, ""
        return node, EXACT


def load_mapping(path: str) -> dict[str, str]:
    """Read a mapping file: a JSON object of side-a name -> side-b name."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as exc:
        raise DumpError(path, f"cannot read the mapping file ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise DumpError(path, f"mapping file is not JSON ({exc})") from None
    return check_mapping(data, path)


def check_mapping(data: object, path: str | None = None) -> dict[str, str]:
    """A mapping as given (a dict of str -> str), else DumpError."""
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise DumpError(path, 'a mapping must be a JSON object of names, {"a_name": "b_name", ...}')
    return dict(data)


def resolve(graph: Graph | None, name: str, alias: Callable[[str], str | None] | None = None) -> str | None:
    """The full node name ``name`` means in ``graph``: itself, or another spelling its format uses."""
    if graph is None or name in graph:
        return name
    full = alias(name) if alias is not None else None
    return full if full is not None and full in graph else None


def match_graphs(ga: Graph | None, gb: Graph | None, mapping: Mapping[str, str] | None = None,
                 warnings: list[str] | None = None,
                 aliases: tuple[Callable[[str], str | None], Callable[[str], str | None]] | None = None,
                 rank: int = 0, graph_id: int = 0) -> NodeMatch:
    """Pair the nodes of two graphs (either may be None: then names only); ``aliases`` resolve the
    other spellings of node names the mapping may use, per side; ``rank`` and ``graph_id`` name the
    graphs in what the pairing reports."""
    warnings = warnings if warnings is not None else []
    if ga is not None and ga is gb and not mapping:
        return NodeMatch(identity=True)
    nm = NodeMatch()
    for a_name, b_name in (mapping or {}).items():
        na, nb = resolve(ga, a_name, aliases and aliases[0]), resolve(gb, b_name, aliases and aliases[1])
        if na is None or nb is None:
            side = "a" if na is None else "b"
            warnings.append(f"mapping: {a_name if na is None else b_name!r} names no node of side {side}")
            continue
        nm.pairs[na] = (nb, MAPPING)
        nm.taken.add(nb)
    if ga is None or gb is None:
        return nm
    if programs_differ(ga, gb):
        _match_programs(ga, gb, nm, rank, graph_id)
        return nm

    def paired_a(n: str) -> bool:   # mapped, fuzzy-paired, or its namesake on side b is free
        return n in nm.pairs or (n in gb and n not in nm.taken)

    def paired_b(n: str) -> bool:   # mapped, fuzzy-paired, or its namesake on side a is not paired elsewhere
        return n in nm.taken or (n in ga and n not in nm.pairs)

    _pair_by_parameter(ga, gb, nm, paired_a, paired_b)
    if any(not paired_a(n) for n in ga.execution_order) and any(not paired_b(n) for n in gb.execution_order):
        _align(ga, gb, nm, paired_a, paired_b)
    _pair_parameters(ga, gb, nm, paired_a, paired_b)
    nm.skipped_a.update(n.name for n in ga.nodes() if not paired_a(n.name) and n.name not in gb)
    nm.skipped_b.update(n.name for n in gb.nodes() if not paired_b(n.name) and n.name not in ga)
    return nm


def _match_programs(ga: Graph, gb: Graph, nm: NodeMatch, rank: int, graph_id: int) -> None:
    """Pairs across a compiled and an eager program: by name what means the same, operators by kind."""
    alike = named_alike(ga, gb)
    taken_a = set(nm.pairs) | alike
    taken_b = set(nm.taken) | alike
    nm.programs = pair_operators(ga, gb, taken_a, taken_b, rank, graph_id)
    for a, b in nm.programs.paired:
        nm.pairs[a] = (b, PROGRAM)
        nm.taken.add(b)
    nm.skipped_a.update(nm.programs.alone_a)
    nm.skipped_b.update(nm.programs.alone_b)


def _pair_by_parameter(ga: Graph, gb: Graph, nm: NodeMatch, paired_a: Callable[[str], bool],
                       paired_b: Callable[[str], bool]) -> None:
    """Optimizer kernels by the weight they update, gradients by their weight, where that weight has one such
    node on each side and the names differ (the same name pairs exactly)."""
    for of in (_updates, _gradients):
        by_a, by_b = of(ga), of(gb)
        for weight, ka in by_a.items():
            kb = by_b.get(weight)
            if kb is not None and ka != kb and not paired_a(ka) and not paired_b(kb):
                nm.pairs[ka] = (kb, PARAMETER)
                nm.taken.add(kb)


def _updates(g: Graph) -> dict[str, str]:
    """weight -> the optimizer kernel that updates it in place (its input of role "weight"), one per weight."""
    out: dict[str, list[str]] = {}
    for name in g.execution_order:
        rec = g.record_of(name)
        if "weight" in rec.input_roles and rec.input_roles.index("weight") < len(rec.inputs):
            src = rec.inputs[rec.input_roles.index("weight")][0]
            if src:
                out.setdefault(g.value_source(src), []).append(name)
    return {w: ks[0] for w, ks in out.items() if len(ks) == 1}


def _gradients(g: Graph) -> dict[str, str]:
    """weight -> its gradient node, where the graph holds one gradient node of that weight (a graph input
    is not one: the gradient was made in another graph and passed in, and no kernel's tensors pair with it)."""
    out: dict[str, list[str]] = {}
    for n in g.nodes(Kind.GRADIENT):
        if n.param and not n.is_parameter:
            out.setdefault(n.param, []).append(n.name)
    return {w: ks[0] for w, ks in out.items() if len(ks) == 1}


def _align(ga: Graph, gb: Graph, nm: NodeMatch, paired_a: Callable[[str], bool],
           paired_b: Callable[[str], bool]) -> None:
    """Fuzzy pairs from the two execution orders; paired nodes are anchors."""
    sa, sb = ga.execution_order, gb.execution_order
    ta = ["=" + str(nm.pairs.get(n, (n, ""))[0]) if paired_a(n) else "~" + ga.node(n).base_name for n in sa]
    tb = ["=" + n if paired_b(n) else "~" + gb.node(n).base_name for n in sb]
    sm = SequenceMatcher(None, ta, tb, autojunk=False)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2)):
                if ta[i].startswith("~"):
                    _pair(nm, sa[i], sb[j])
        elif op == "replace":
            # a stretch that does not align by name (renamed scopes): align it by op types alone
            ra = [n for n in sa[i1:i2] if not paired_a(n)]
            rb = [n for n in sb[j1:j2] if not paired_b(n)]
            if not ra or not rb:
                continue
            oa = [ga.record_of(n).op_type for n in ra]
            ob = [gb.record_of(n).op_type for n in rb]
            for bl in SequenceMatcher(None, oa, ob, autojunk=False).get_matching_blocks():
                for k in range(bl.size):
                    _pair(nm, ra[bl.a + k], rb[bl.b + k])


def _pair(nm: NodeMatch, a: str, b: str) -> None:
    if a in nm.pairs or b in nm.taken:
        return
    nm.pairs[a] = (b, FUZZY)
    nm.taken.add(b)


def _pair_parameters(ga: Graph, gb: Graph, nm: NodeMatch, paired_a: Callable[[str], bool],
                     paired_b: Callable[[str], bool]) -> None:
    """Parameters without a partner, paired through the kernels that read them at the same slot."""
    lone_a = {n.name for n in ga.nodes() if n.is_parameter and not paired_a(n.name)}
    lone_b = {n.name for n in gb.nodes() if n.is_parameter and not paired_b(n.name)}
    if not lone_a or not lone_b:
        return
    for ka in ga.execution_order:
        kb, _ = nm.partner(ka)
        if kb is None or kb not in gb:
            continue
        ins_a = ga.record_of(ka).inputs
        ins_b = gb.record_of(kb).inputs
        for (sa, _), (sb, _) in zip(ins_a, ins_b):
            if not sa or not sb:
                continue
            pa, pb = ga.value_source(sa), gb.value_source(sb)
            if pa in lone_a and pb in lone_b:
                _pair(nm, pa, pb)
                lone_a.discard(pa)
                lone_b.discard(pb)


def match_tensors(tmap_a: Mapping[Key, TensorRef], tmap_b: Mapping[Key, TensorRef], nm: NodeMatch
                  ) -> Iterator[tuple[TensorRef | None, TensorRef | None, str]]:
    """(a tensor, b tensor, method); a side is None for a tensor missing there."""
    used: set[Key] = set()
    for key, ra in tmap_a.items():
        node, io, slot = key
        if not nm.compares(node, io):
            continue
        nb, method = (node, EXACT) if nm.identity else nm.partner(node)
        rb = None
        if nb is not None:
            kb: Key = (nb, io, slot)
            rb = tmap_b.get(kb)
            if rb is not None and kb not in used:
                used.add(kb)
                if method == PROGRAM and nm.programs is not None:
                    nm.programs.outputs_compared += 1
                yield ra, rb, method
                continue
        if method != PROGRAM:
            yield ra, None, ""
        elif nm.programs is not None:       # an output one program's operator has and its partner lacks
            nm.programs.outputs_one_side += 1
    for kb2, rb2 in tmap_b.items():
        if kb2 in used or not nm.compares(kb2[0], kb2[1], side_b=True):
            continue
        if nm.programs is not None and kb2[0] in nm.taken:
            nm.programs.outputs_one_side += 1
        else:
            yield None, rb2, ""
