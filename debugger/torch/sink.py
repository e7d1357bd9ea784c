"""Writes recorded iterations through the one DumpWriter on a background thread.

At most one iteration is handed over at a time: ``submit`` waits for the previous iteration's file
to be complete, so the training thread holds the iteration it is recording and the writer thread at
most one more (bounded memory), and a crash loses only unfinished iterations.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from ..formats.records import GraphRecord, IterationFacts
from ..formats.tdbg_h5.arrays import digest_of
from ..formats.tdbg_h5.writer import DumpWriter


@dataclass
class Row:
    """One tensor to write: values (numpy) or statistics with a digest (None: not computed)."""

    graph_id: int
    node: str
    op_type: str
    io: str
    slot: int
    values: np.ndarray | None = None
    stats: dict[str, float | None] | None = None
    digest_of: "DigestBox | None" = None    # host copy hashed here for an exact digest
    dtype: str = ""
    shape: tuple[int, ...] = ()
    extra: dict[str, float] | None = None   # debugger.stats.EXTRA_STAT_NAMES that apply


@dataclass
class Job:
    """One iteration: graphs first seen in it, then its tensors."""

    iteration: int
    graphs: list[GraphRecord] = field(default_factory=list)
    ran: list[int] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    facts: IterationFacts | None = None     # the iteration's optimizer steps, when there is something to say


class Sink:
    """A writer thread fed one iteration at a time. A write that fails (a full disk, a removed folder)
    stops the writing, never the training: :attr:`failed` holds the error and the last iteration
    written whole, later iterations are dropped, and no call raises (the recorder says it once)."""

    def __init__(self, writer: DumpWriter) -> None:
        self.writer = writer
        self.failed: tuple[BaseException, int | None] | None = None
        self.last_written: int | None = None
        self._job: Job | None = None
        self._cv = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="tdbg-recorder-writer", daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> None:
        """Hand one iteration over (waits while the previous one is being written; dropped after a failure)."""
        with self._cv:
            while self._job is not None:
                self._cv.wait()
            if self.failed is None:
                self._job = job
                self._cv.notify_all()

    def flush(self) -> None:
        """Wait until every submitted iteration is on disk (or its write failed: :attr:`failed`)."""
        with self._cv:
            while self._job is not None:
                self._cv.wait()

    def close(self) -> None:
        """Finish pending writes and stop the thread."""
        with self._cv:
            while self._job is not None:
                self._cv.wait()
            self._closed = True
            self._cv.notify_all()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._cv:
                while self._job is None and not self._closed:
                    self._cv.wait()
                if self._job is None:
                    return
                job = self._job
            try:
                self._write(job)
                self.last_written = job.iteration
            except BaseException as exc:   # told by the recorder at its next step; the writing stops
                with self._cv:
                    self.failed = (exc, self.last_written)
            with self._cv:
                self._job = None
                self._cv.notify_all()

    def _write(self, job: Job) -> None:
        w = self.writer
        for g in job.graphs:
            w.write_graph(g)
        with w.iteration(job.iteration, replace=True) as it:
            for gid in job.ran:
                it.ran(gid)
            if job.facts is not None:
                it.facts(job.facts)
            if all(r.values is None for r in job.rows):     # statistics only: one call
                it.add_statistics([(r.graph_id, r.node, r.op_type, r.io, r.slot, r.stats, _digest(r), r.dtype,
                                    r.shape, r.extra) for r in job.rows])     # (a digest drops its host copy)
                return
            for r in job.rows:
                if r.values is not None:
                    it.add(r.graph_id, r.node, r.op_type, r.io, r.slot, r.values, stats=r.stats, extra=r.extra)
                else:
                    it.add(r.graph_id, r.node, r.op_type, r.io, r.slot, stats=r.stats, digest=_digest(r),
                           dtype=r.dtype, shape=r.shape, extra=r.extra)
                r.values = r.digest_of = None     # free as we go


def _digest(r: Row) -> str | None:
    return None if r.digest_of is None else r.digest_of.hexdigest()


class DigestBox:
    """A host copy whose exact digest the writer thread computes once (shared by equal tensors)."""

    __slots__ = ("host", "digest")

    def __init__(self, host: np.ndarray) -> None:
        self.host: np.ndarray | None = host
        self.digest: str | None = None

    def hexdigest(self) -> str:
        """The digest (computed on first use, then the copy is dropped)."""
        if self.digest is None:
            assert self.host is not None
            self.digest = digest_of(self.host)
            self.host = None
        return self.digest
