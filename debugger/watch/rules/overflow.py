"""Where a non-finite value starts: the first operator, in execution order, whose output holds one while
its inputs do not, or the weights and state it was read from."""
from __future__ import annotations

from ...formats.records import Kind
from ...model import TensorRef
from ...model.graph import Graph
from ...model.locate import position
from ...stats.core import Stats
from ..batch import Batch
from ..bookkeeping import BOOKKEEPING, bookkeeping
from ..coverage import Coverage
from ..discarded import discarded_constants
from ..registry import Watchpoint
from ..results import ScanResult
from ..select import matches
from .base import NONFINITE, ByDesign, Needs, Planned, Rule, Search, Step, add_error, add_hit, nonfinite_counts, unsupplied


class OverflowOrigin(Rule):
    """Kernels whose inputs are finite and whose outputs are not, and data inputs that are not finite."""

    def needs(self, wp: Watchpoint) -> Needs:
        """The non-finite counts of every selected input and output."""
        return Needs(NONFINITE)

    def plan(self, wp: Watchpoint, order: int, step: Step, batch: Batch) -> None:
        """Inputs and outputs of the selected nodes: --node and --scope narrow the search too; a loop's
        bookkeeping (an evaluation buffer, a loss accumulator: watch/bookkeeping.py) is left out."""
        mine = step.floats if not (wp.node or wp.scope) else [r for r in step.floats if matches(wp, r, step.graph)]
        met = step.coverage.setdefault(order, Coverage())
        met.of_kind += len(step.floats)
        met.candidates += len(mine)
        kept = bookkeeping(step.graph)
        left_out = sorted({r.node for r in mine if r.node in kept})
        mine = [r for r in mine if r.node not in kept] if left_out else mine
        for ref in mine:
            batch.want_stats(ref)
        step.planned.append(Search(wp, order, step, mine, left_out))

    def evaluate(self, item: Planned, batch: Batch, out: ScanResult) -> None:
        """Hits at the origins, in execution order; unreadable tensors are error records. A weight, gradient,
        state or loss that turns non-finite where the dump holds no operator that made it is a hit too."""
        assert isinstance(item, Search)
        for node in item.left_out:
            add_error(out, item.wp, item.step, node, ByDesign(BOOKKEEPING))
        bad = self._nonfinite(item, batch, out)
        if not bad:
            return
        hits_before = len(out.hits)
        if not self._origins(item, batch, out, bad) and len(out.hits) == hits_before:
            _turned_in_update(item, out, bad)

    def _nonfinite(self, item: Search, batch: Batch, out: ScanResult) -> dict[tuple[str, str, int], Stats]:
        """The selected tensors holding NaN/Inf; error records for those that cannot be read."""
        bad: dict[tuple[str, str, int], Stats] = {}
        for ref in item.refs:
            stats, err = batch.stats(ref)
            err = err or unsupplied(batch, ref, self.needs(item.wp).statistics)
            if err:
                add_error(out, item.wp, item.step, ref.node, err)
            elif stats is not None and stats.has_nonfinite:
                bad[ref.key] = stats
        return bad

    def _origins(self, item: Search, batch: Batch, out: ScanResult, bad: dict[tuple[str, str, int], Stats]) -> bool:
        """The kernels in execution order up to the first read of a weight or state that was already
        non-finite when the iteration began (what comes after it is its consequence); True when there
        is such a read, which settles the iteration."""
        wp, step = item.wp, item.step
        by_node: dict[str, list[tuple[str, int]]] = {}
        for node, io, slot in bad:
            by_node.setdefault(node, []).append((io, slot))
        graph = step.graph
        order_idx = graph.execution_index if graph is not None else {}
        inherited = min((ref for ref in item.refs if ref.key in bad and _read_at_start(graph, ref)),
                        key=lambda ref: order_idx.get(ref.node, 1 << 30), default=None)
        inherited_at = _position_of_read(graph, inherited, order_idx)
        hits_before = len(out.hits)
        discarded = discarded_constants(graph, {n for n, ios in by_node.items() if any(io == "output" for io, _ in ios)},
                                        {ref.node for ref in item.refs})
        for node, ios in sorted(by_node.items(), key=lambda kv: order_idx.get(kv[0], 1 << 30)):
            if inherited is not None and inherited_at <= order_idx.get(node, 1 << 30):
                if len(out.hits) == hits_before:    # else a NaN made earlier in this iteration reached the read
                    _judge_inherited(item, batch, out, inherited, bad[inherited.key])
                return True
            outs = sorted(s for io, s in ios if io == "output")
            if not outs:
                continue
            has_bad_input = any(io == "input" for io, _ in ios) or _reads_nonfinite(graph, node, by_node)
            ref = step.tmap[(node, "output", outs[0])]
            is_data = ref.kind == Kind.INPUT
            if has_bad_input or (node not in order_idx and not is_data):
                continue
            if not is_data and ref.kind != Kind.LOSS and graph is not None and node in graph \
                    and not graph.node(node).inputs:
                # made from no tensor at all (torch.full(-inf), an attention mask's scalar -inf): written on
                # purpose, and softmax absorbs it; a kernel that computes Inf from finite inputs is an origin.
                # A loss without inputs is a recording level that saw no operator: it is what went wrong
                add_error(out, wp, step, node, ByDesign(
                    "a non-finite constant made from no input (an attention mask's -inf) is no overflow origin"))
                continue
            if node in discarded:
                add_error(out, wp, step, node, ByDesign(CONSTANT_DISCARDED))
                continue
            add_hit(out, wp, item.order, step, ref, nonfinite_counts(bad[(node, "output", outs[0])]), {})
        return False


CONSTANT_DISCARDED = ("a non-finite value computed from constants alone that reaches no value of the training "
                      "(T5's log of a zero relative position, cast to an index and discarded by torch.where) "
                      "is no overflow origin")
EARLIER_ORIGIN = ("weights or optimizer state were already non-finite when the iteration began: the origin "
                  "is in an earlier iteration")


def _judge_inherited(item: Search, batch: Batch, out: ScanResult, ref: TensorRef, stats: Stats) -> None:
    """A weight or state read non-finite as the iteration began: its origin is an earlier iteration's only
    when the dump holds it non-finite at that iteration's end (whose search reported it). Otherwise it
    turned non-finite where no recorded operator ran (written between steps, or before the dump's first
    iteration): the read is the finding, said as such."""
    step = item.step
    param = _read_param(step.graph, ref)
    earlier = _end_of_earlier_iteration(step, param) if param else None
    then = batch.stats_now(earlier[1]) if earlier is not None else None
    if then is not None and then[0] is not None and then[0].has_nonfinite:
        add_error(out, item.wp, step, ref.node, ByDesign(EARLIER_ORIGIN))
        return
    hit = add_hit(out, item.wp, item.order, step, ref, nonfinite_counts(stats), {},
                  _outside_note(param or ref.node, step.iteration, earlier, then))
    record = step.graph.record_of(param) if step.graph is not None and param else None
    if record is not None:    # named as the weight it is, read by the node the hit locates
        hit.kind, hit.param = record.kind, record.param or param


def _outside_note(param: str, iteration: int, earlier: tuple[int, TensorRef] | None,
                  then: tuple[Stats | None, str | None] | None) -> str:
    """Why a weight read non-finite has its origin outside the dump: its value an iteration earlier."""
    if earlier is None:
        return (f"{param} was non-finite when iteration {iteration} began and the dump holds no earlier value "
                "of it: the origin is not in the dump")
    if then is None or then[0] is None:
        return (f"{param} was non-finite when iteration {iteration} began; its value at the end of iteration "
                f"{earlier[0]} could not be read ({then[1] if then else 'no statistics'}): the origin was not found")
    return (f"{param} was finite at the end of iteration {earlier[0]} and non-finite when iteration {iteration} "
            "began: changed outside the recorded operators (between steps); the origin is not in the dump")


def _turned_in_update(item: Search, out: ScanResult, bad: dict[tuple[str, str, int], Stats]) -> None:
    """No operator the dump holds made the NaN, yet a weight or optimizer state ends the iteration
    non-finite: the update that made it was not recorded (level "parameters" or "modules"). The first
    such tensor is the finding."""
    step, graph = item.step, item.step.graph
    order_idx = graph.execution_index if graph is not None else {}
    if any(io == "output" and node in order_idx for node, io, _ in bad):
        return     # a recorded operator's output is non-finite: the NaN came through it (judged above)
    turned = [step.tmap[k] for k in bad
              if k[1] == "output" and step.tmap[k].kind in (Kind.WEIGHT, Kind.OPTIMIZER_STATE)]
    if not turned:
        return
    first = min(turned, key=lambda r: (position(graph, r.node) if graph is not None and r.node in graph else 0, r.node))
    add_hit(out, item.wp, item.order, step, first, nonfinite_counts(bad[first.key]), {},
            f"turned non-finite in iteration {step.iteration}, made by no operator the dump holds (the optimizer "
            "step, at a level that does not record it)")


def _end_of_earlier_iteration(step: Step, node: str) -> tuple[int, TensorRef] | None:
    """(iteration, value) of ``node``'s output at the end of the nearest earlier iteration the rank's dump
    holds it in, whatever graph that iteration ran (the first step, which creates the optimizer's state,
    is a graph of its own). None when no earlier iteration holds it."""
    rank = step.rank
    runs = sorted(((it, gid) for gid in set(rank.graph_ids) for it in rank.iterations(gid) if it < step.iteration),
                  reverse=True)
    for it, gid in runs:
        ref = rank.tensor_map(gid, it).get((node, "output", 0))
        if ref is not None:
            return it, ref
    return None


def _position_of_read(graph: Graph | None, ref: TensorRef | None, order_idx: dict[str, int]) -> int:
    """Where in the iteration ``ref``, a read of a weight as it began, happened: a Gradient node's read
    (a recording level that saw no operator) stands for the forward pass's, before everything."""
    if ref is None:
        return 0
    if graph is not None and graph.record_of(ref.node).kind == Kind.GRADIENT:
        return -1
    return order_idx.get(ref.node, 1 << 30)


def _read_at_start(graph: Graph | None, ref: TensorRef) -> bool:
    """Whether ``ref`` is a weight or optimizer state as the forward pass read it: its value when the
    iteration began (not as the optimizer's own kernels read it after this iteration's gradients)."""
    if ref.io != "input" or graph is None or ref.node not in graph:
        return False
    a = graph.record_of(ref.node)
    # a Gradient node that reads its weight (a recording level that saw no operator) read it before the step
    if (a.is_backward and a.kind != Kind.GRADIENT) or a.input_roles or a.kind == Kind.OPTIMIZER_STATE:
        return False
    return _read_param(graph, ref) is not None


def _read_param(graph: Graph | None, ref: TensorRef) -> str | None:
    """The weight or optimizer state node whose value the input ``ref`` is (None: another value)."""
    if graph is None or ref.node not in graph:
        return None
    values = graph.value_inputs(ref.node)
    s = graph.get(values[ref.slot]) if ref.slot < len(values) and values[ref.slot] else None
    return s.name if s is not None and s.is_parameter and s.kind in (Kind.WEIGHT, Kind.OPTIMIZER_STATE) else None


def _reads_nonfinite(graph: Graph | None, node: str, bad_nodes: dict[str, list[tuple[str, int]]]) -> bool:
    """Whether a node reads (through routing nodes) the output of a kernel found non-finite: an input that
    was not dumped (the recorder stores a kernel's outputs) is judged by its producer's. Not parameters:
    their output is the value after the iteration's update, not the one the forward read (an input)."""
    if graph is None or node not in graph:
        return False
    return any(any(io == "output" for io, _ in bad_nodes.get(src, ())) for src in graph.value_inputs(node)
               if src and src in graph and not graph.record_of(src).is_parameter)
