"""The Recorder's output job: an iteration's captures as the writer's rows, the graphs told apart by their
signature with each one's run history, the writer thread the iterations go through, and what a failed
write does (recording stops once, said once, training goes on: debugger.torch.writefail)."""
from __future__ import annotations

from typing import Any

from ..formats.records import GraphRecord
from ..formats.tdbg_h5.writer import DumpWriter
from . import capture as C
from .devstats import extras_to_host, rows_to_dicts
from .sink import Job, Row, Sink
from .writefail import say_writing_stopped

MAX_GRAPHS = 64


class Output:
    """Where one rank's recorded iterations go: its DumpWriter, fed by a :class:`~debugger.torch.sink.Sink`."""

    def __init__(self, writer: DumpWriter, graph_base: int = 0) -> None:
        self.writer = writer
        self.sink = Sink(writer)
        self.graph_base = graph_base        # the first graph id of this run (after a resumed run's graphs)
        self.graph_records: dict[int, GraphRecord] = {}
        self.stopped = False                # a write failed: nothing more is recorded
        self._graph_ids: dict[tuple[Any, ...], int] = {}
        self._history: dict[int, list[int]] = {}

    @property
    def rank_dir(self) -> str:
        """The rank's folder in the dump."""
        return self.writer.rank_dir

    def graph_of(self, record: GraphRecord) -> tuple[int, list[GraphRecord]]:
        """The id of ``record``'s graph, and ``[record]`` when it is new (named, numbered and kept)."""
        sig = _signature(record)
        gid = self._graph_ids.get(sig)
        if gid is not None:
            return gid, []
        if len(self._graph_ids) >= MAX_GRAPHS:
            raise RuntimeError(f"tdbg recorder: more than {MAX_GRAPHS} different graphs; record fewer "
                               "iterations (iterations=...) or a model whose operators repeat")
        gid = self.graph_base + len(self._graph_ids)
        self._graph_ids[sig] = gid
        record.graph_id = gid
        record.name = f"train_step_{gid}" if gid else "train_step"
        self.graph_records[gid] = record
        return gid, [record]

    def ran(self, graph_id: int, iteration: int) -> None:
        """Graph ``graph_id`` ran in ``iteration`` (its run history, written at close)."""
        self._history.setdefault(graph_id, []).append(iteration)

    def submit(self, job: Job) -> None:
        """Hand an iteration to the writer thread (waits while the one before is being written)."""
        self.sink.submit(job)

    def flush(self) -> None:
        """Wait until every submitted iteration is on disk (or its write failed)."""
        self.sink.flush()

    def failure(self) -> tuple[BaseException, int | None] | None:
        """A failed write, told once: the writer thread's error and the last iteration written whole."""
        if self.stopped or self.sink.failed is None:
            return None
        self.stopped = True
        return self.sink.failed

    def write_histories(self) -> None:
        """Each graph with its run history, at close (a failure is said like any write's: never raised
        over the user's code, which may be leaving a ``with`` block on its own exception)."""
        try:
            for gid, rec in self.graph_records.items():
                self.writer.write_graph(rec, run_history=self._history.get(gid, ()))
        except Exception as exc:
            self.stopped = True
            say_writing_stopped(self.rank_dir, exc, self.sink.last_written, False)


def rows_of(g: C.IterationGraph, gid: int) -> list[Row]:
    """The iteration's captures as the writer's rows (device statistics copied to the host at once)."""
    rows: list[Row] = []
    stat_rows: list[Any] = []
    # a loss node's other outputs (nll_loss's total weight) are no loss: not stored
    g.captured = [c for c in g.captured if not (c.io == "output" and c.node in g.loss_slots
                                                 and c.slot not in g.loss_slots[c.node])]
    extras: list[dict[str, Any]] = []
    for c in g.captured:
        rows.append(Row(gid, c.node, c.op_type, c.io, c.slot, values=c.values, digest_of=c.host,
                        dtype=c.dtype, shape=c.shape))
        if c.stats is not None:
            stat_rows.append(c.stats)
        if c.extra:
            extras.append(c.extra)
    if extras:
        hosted = iter(extras_to_host(extras))     # one host transfer per device
        for r, c in zip(rows, g.captured):
            if c.extra:
                r.extra = next(hosted)
    if stat_rows:
        dicts = iter(rows_to_dicts(stat_rows))        # one host transfer per device
        for r, c in zip(rows, g.captured):
            if c.stats is not None:
                r.stats = next(dicts)
    g.captured.clear()
    g.made.clear()      # it holds host copies in values mode: not past the hand-over
    return rows


def _signature(record: GraphRecord) -> tuple[Any, ...]:
    """Equal for iterations that ran the same operators with the same edges (within this process: a stack
    enters by its hash, not its text, which costs ten times as much to write out). The key itself, not a
    digest of it: no collision, and a third of the work of formatting and hashing it as text."""
    nodes = tuple((n.name, n.op_type, n.kind, tuple(s for s, _ in n.inputs),
                   tuple((o.dtype, None if o.shape is None else tuple(o.shape)) for o in n.outputs), hash(n.stack),
                   n.module) for n in record.nodes)
    return nodes, repr((record.outputs, record.level, record.compiled))
