"""The tensor work of several scan steps: de-duplicated, served from the statistics cache where it
can be, the rest run in a few large chunks on a process pool."""
from __future__ import annotations

import operator
from concurrent.futures import Future
from typing import Callable, Iterable, Optional, Sequence, TypeVar

import numpy as np

from ..stats import service
from ..stats.cache import ExtraKey, StatsCache
from ..errors import DumpError
from ..common.executors import Workers
from ..common.gcpause import paused_gc
from ..model import TensorRef
from ..formats.base import TensorSource
from ..stats.core import COUNT_NAMES, STAT_NAMES, Stats
from .compute import FileResult, FileTask, PairResult, PairTask, UnitSpec, run_file_task, run_pair_task

# A running batch: (task kind, tasks, their future or None when computed here on finish).
Parts = list[tuple[str, list, Optional[Future]]]


# A task reads at most about this many bytes and files: a hand-off per chunk, not per tensor, a
# bounded loss when a worker dies, and still a few chunks per worker for balance.
TASK_BYTES = 64 << 20
TASK_FILES = 1024
# Fewer tasks than this are computed in this process (a local pool's hand-off costs more).
_LOCAL_BELOW = 16
T = TypeVar("T")


def split_by_bytes(items: list[T], size: Callable[[T], int], slots: int) -> list[list[T]]:
    """Consecutive runs of ``items`` (one rank and iteration stay together) of similar byte volume."""
    sizes = [size(t) for t in items]
    target = max(1, min(TASK_BYTES, sum(sizes) // (slots * 4)))
    chunks: list[list[T]] = [[]]
    got = 0
    for t, n in zip(items, sizes):
        if chunks[-1] and (got >= target or len(chunks[-1]) >= TASK_FILES):
            chunks.append([])
            got = 0
        chunks[-1].append(t)
        got += n
    return chunks


def _task_bytes(t: "FileTask | PairTask") -> int:
    if isinstance(t, FileTask):
        return t.source.stored_bytes
    return t.cur.stored_bytes + t.prev.stored_bytes


def run_chunk(kind: str, tasks: list) -> "list | PackedStats":
    """Worker entry point: compute a list of file or pair tasks (file results come back packed)."""
    with paused_gc():   # a forked worker would otherwise walk the whole inherited heap, page by page
        if kind == "file":
            return PackedStats.pack([run_file_task(t) for t in tasks])
        return [run_pair_task(t) for t in tasks]


class PackedStats:
    """File results as two arrays (values, and which are None) plus the few results with more in them:
    a hand-off of a few bytes per tensor instead of a pickled object each. Unpacks exactly."""

    def __init__(self, values: np.ndarray, none: np.ndarray, rest: dict[int, FileResult]) -> None:
        self.values = values
        self.none = none
        self.rest = rest

    @classmethod
    def pack(cls, results: list[FileResult]) -> "PackedStats":
        """Pack computed results."""
        rows = [_row(r.stats) if r.stats is not None else _NO_ROW for r in results]
        arr = np.array(rows, dtype=object).reshape(len(results), len(STAT_NAMES))
        none = np.equal(arr, None)
        values = np.where(none, 0, arr).astype(np.float64)
        rest = {i: FileResult(None, r.ranges, r.units, r.error) for i, r in enumerate(results)
                if r.ranges or r.units or r.error or r.stats is None}
        return cls(values, none, rest)

    def unpack(self) -> list[FileResult]:
        """The results, as computed."""
        out: list[FileResult] = []
        values = self.values.tolist()
        counts = self.values[:, :_N_COUNTS].astype(np.int64).tolist()
        partial = self.none.any(axis=1).tolist()
        for i, (row, ints, odd) in enumerate(zip(values, counts, partial)):
            r = self.rest.get(i)
            if r is None:
                r = FileResult()
            if not odd:
                r.stats = Stats(*ints, *row[_N_COUNTS:])
            elif not self.none[i].all():
                none = self.none[i].tolist()
                r.stats = Stats(*ints, *(None if nz else v for v, nz in zip(row[_N_COUNTS:], none[_N_COUNTS:])))
            out.append(r)
        return out


_NO_ROW = (None,) * len(STAT_NAMES)
_row = operator.attrgetter(*STAT_NAMES)
_N_COUNTS = len(COUNT_NAMES)


class Batch:
    """Tasks of several steps, de-duplicated and served from the cache where possible.

    A tensor whose dump stores only statistics needs no task and no cache: its statistics are
    taken as stored, and :meth:`names` says which ones there are.
    """

    def __init__(self, cache: StatsCache) -> None:
        self.cache = cache
        self.files: dict[str, FileTask] = {}
        self.pairs: dict[tuple[str, str], PairTask] = {}
        self.file_results: dict[str, FileResult] = {}
        self.pair_results: dict[tuple[str, str], PairResult] = {}
        self.stored: dict[str, tuple[str, ...]] = {}
        self.reads = 0

    def want_stats(self, ref: TensorRef, ranges: Iterable[tuple[float, float]] = (),
                   units: Iterable[UnitSpec] = ()) -> None:
        """Ask for a tensor's statistics, and (values only) counts inside ranges and unit activity."""
        src = ref.source
        ident = src.identity
        if not src.has_values:
            if ident not in self.stored:
                self._take_stored(ref)
            return
        t = self.files.get(ident)
        if t is None:
            t = self.files[ident] = FileTask(src)
        if ranges:
            t.ranges.update(ranges)
        if units:
            t.units.update(units)

    def _take_stored(self, ref: TensorRef) -> None:
        try:
            stored = dict(ref.source.stored_stats() or {})
        except DumpError as exc:
            self.stored[ref.identity] = ()
            self.file_results[ref.identity] = FileResult(error=str(exc))
            return
        self.stored[ref.identity] = tuple(n for n in stored if n in STAT_NAMES)
        self.file_results[ref.identity] = FileResult(stats=Stats.from_stored(stored))

    def want_pair(self, cur: TensorRef, prev: TensorRef, rtol: float | None = None) -> None:
        """Ask for the element-wise comparison of two tensors that both have values (and their statistics)."""
        k = (cur.identity, prev.identity)
        t = self.pairs.get(k)
        if t is None:
            t = self.pairs[k] = PairTask(cur.source, prev.source)
        if rtol is not None:
            t.rtols.add(rtol)
        self.want_stats(prev)
        self.want_stats(cur)

    def size(self) -> int:
        """Number of tasks asked for."""
        return len(self.files) + len(self.pairs)

    def names(self, ref: TensorRef) -> Sequence[str]:
        """The statistics known of a tensor: all of them when it has values, else those its dump stores."""
        return self.stored.get(ref.identity, STAT_NAMES)

    def stats(self, ref: TensorRef) -> tuple[Stats | None, str | None]:
        """A tensor's statistics, or the error that kept them from being computed."""
        res = self.file_results.get(ref.identity)
        if res is None:
            return None, f"{ref.location}: not computed"
        return res.stats, res.error

    def stats_now(self, ref: TensorRef) -> tuple[Stats | None, str | None]:
        """A tensor's statistics, read here if no step asked for them: for a rare look-up while evaluating
        (a weight's value an iteration earlier, once a NaN is found), which planning it for every step
        would cost on every healthy run."""
        if ref.identity not in self.file_results:
            if not ref.source.has_values:
                self._take_stored(ref)
            else:
                self.file_results[ref.identity] = self._read_now(ref.source)
        return self.stats(ref)

    def _read_now(self, source: TensorSource) -> FileResult:
        """One tensor's statistics from what the dump stores beside it, the cache, or a read (then cached)."""
        try:
            return FileResult(stats=service.statistics(source, self.cache, source.identity))
        except DumpError as exc:
            return FileResult(error=str(exc))
        except (OSError, ValueError) as exc:
            return FileResult(error=f"{source.location}: {exc}")

    # -- running ----------------------------------------------------------------------------------
    def start(self, workers: Workers) -> Parts:
        """Look up the cache and hand what it lacks to the workers in chunks of similar byte volume."""
        todo_f, todo_p = self._from_cache()
        self.reads = len(todo_f) + 2 * len(todo_p)
        parts: Parts = []
        for kind, todo in (("file", todo_f), ("pair", todo_p)):
            if not todo:
                continue
            if workers.executor is None or (len(todo) < _LOCAL_BELOW and not workers.cluster):
                parts.append((kind, todo, None))
                continue
            for chunk in split_by_bytes(todo, _task_bytes, workers.slots):
                parts.append((kind, chunk, workers.submit(run_chunk, kind, chunk)))
        return parts

    def finish(self, parts: Parts) -> int:
        """Merge the computed results; returns the number of tensor reads."""
        for kind, chunk, fut in parts:
            results = fut.result() if fut is not None else run_chunk(kind, chunk)
            if isinstance(results, PackedStats):
                results = results.unpack()
            merge = self._merge_file if kind == "file" else self._merge_pair
            for t, res in zip(chunk, results):
                merge(t, res)  # type: ignore[arg-type]
        return self.reads

    def _from_cache(self) -> tuple[list[FileTask], list[PairTask]]:
        if not self.cache.enabled:
            self.pair_results = {k: PairResult() for k in self.pairs}
            return self._files_todo(), list(self.pairs.values())
        return self._files_todo(), self._pairs_from_cache()

    def _files_todo(self) -> list[FileTask]:
        """What each tensor still needs read: statistics stored beside the values or cached are not."""
        use_cache = self.cache.enabled
        todo: list[FileTask] = []
        for ident, t in self.files.items():
            res = FileResult(stats=service.stored(t.source))
            if res.stats is None and not use_cache:
                self.file_results[ident] = res   # everything is to be read: the task as asked
                todo.append(t)
                continue
            if res.stats is None and use_cache:
                res.stats = self.cache.get(ident)
            missing = FileTask(t.source, base=res.stats is None)
            for r in t.ranges:
                count = self.cache.get_extra(ExtraKey(ident, "range", r)) if use_cache else None
                if count is None:
                    missing.ranges.add(r)
                else:
                    res.ranges[r] = int(count)
            for u in t.units:
                pct = self.cache.get_extra(ExtraKey(ident, "units", (u,))) if use_cache else None
                if pct is None:
                    missing.units.add(u)
                else:
                    res.units[u] = pct
            self.file_results[ident] = res
            if missing.base or missing.ranges or missing.units:
                todo.append(missing)
        return todo

    def _pairs_from_cache(self) -> list[PairTask]:
        todo: list[PairTask] = []
        for k, t in self.pairs.items():
            res = PairResult(self.cache.get_extra(ExtraKey.of_pair(*k, "dmean")))
            missing = PairTask(t.cur, t.prev)
            for rtol in t.rtols:
                excess = self.cache.get_extra(ExtraKey.of_pair(*k, "excess", rtol))
                if excess is None:
                    missing.rtols.add(rtol)
                else:
                    res.excess[rtol] = excess
            self.pair_results[k] = res
            if res.diff_abs_mean is None or missing.rtols:
                todo.append(missing)
        return todo

    def _merge_file(self, t: FileTask, res: FileResult) -> None:
        ident = t.source.identity
        have = self.file_results[ident]
        if res.error:
            have.error = res.error
            return
        if res.stats is not None and t.base:
            have.stats = res.stats
            self.cache.put(ident, res.stats)
        for r, count in res.ranges.items():
            have.ranges[r] = count
            self.cache.put_extra(ExtraKey(ident, "range", r), count)
        for u, pct in res.units.items():
            have.units[u] = pct
            self.cache.put_extra(ExtraKey(ident, "units", (u,)), pct)

    def _merge_pair(self, t: PairTask, res: PairResult) -> None:
        k = (t.cur.identity, t.prev.identity)
        have = self.pair_results[k]
        if res.error:
            have.error = res.error
            return
        if res.diff_abs_mean is not None:
            have.diff_abs_mean = res.diff_abs_mean
            self.cache.put_extra(ExtraKey.of_pair(*k, "dmean"), res.diff_abs_mean)
        for r, v in res.excess.items():
            have.excess[r] = v
            self.cache.put_extra(ExtraKey.of_pair(*k, "excess", r), v)
