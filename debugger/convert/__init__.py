"""Any readable dump into tdbg's own HDF5 format, through the format's one writer."""
from __future__ import annotations

import os
from concurrent.futures import as_completed
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ..model import history
from ..errors import DumpError, QueryError
from ..common.executors import Workers
from ..formats.base import BOTH, STATISTICS
from ..formats.records import Kind
from ..formats.tdbg_h5.writer import DumpWriter   # convert writes tdbg's own format, whatever it reads
from ..model import Dump, Rank, TensorRef, open_dump
from ..stats.core import ASYMPTOTES, saturated_count, update_stats
from .series import SeriesBuilder

SERIES_MODES = (None, "with", "only")


@dataclass
class ConvertResult:
    """What a conversion wrote, and what it had to leave out."""

    source: str
    target: str
    ranks: list[int] = field(default_factory=list)
    iterations: list[int] = field(default_factory=list)
    graphs: int = 0
    tensors: int = 0
    bytes_read: int = 0
    statistics_only: bool = False     # what was written (a statistics-only source is converted so)
    series: str | None = None         # None, "with" (each rank's per-step series too) or "only"
    series_steps: int = 0             # steps written to the series, all ranks together
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        """The `tdbg convert --json` object."""
        return {"source": self.source, "target": self.target, "ranks": self.ranks, "iterations": self.iterations,
                "graphs": self.graphs, "tensors": self.tensors, "bytes_read": self.bytes_read,
                "statistics_only": self.statistics_only, "series": self.series, "series_steps": self.series_steps,
                "warnings": self.warnings}


def check_target(dump: Dump, target: str) -> str:
    """The absolute target folder; QueryError when it is inside a dump or already holds files."""
    target = os.path.abspath(target)
    if dump.holds(target):
        raise QueryError(target, f"is inside the dump being converted ({dump.root}); tdbg never writes there")
    if os.path.exists(target) and (not os.path.isdir(target) or any(True for _ in os.scandir(target))):
        raise QueryError(target, "exists and is not an empty folder; choose a new one")
    try:        # made now: a folder that cannot be written is refused before anything is read
        os.makedirs(target, exist_ok=True)
    except OSError as exc:
        raise DumpError(exc.filename or target, f"cannot write the converted dump: {exc.strerror or exc}") from None
    return target


def convert(dump: Dump, target: str, *, statistics: bool = False, ranks: Iterable[int] | None = None,
            iterations: set[int] | None = None, progress: Callable[[int, int], None] | None = None,
            workers: Workers | None = None, series: str | None = None) -> ConvertResult:
    """Write ``dump`` (the selected ranks and iterations) into ``target`` in tdbg's HDF5 format.

    Values and their statistics are kept (a first scan then reads statistics, not values); with
    ``statistics`` only the statistics and an exact digest of each tensor. ``workers`` on a Dask
    cluster convert one rank per task and write it themselves (``target`` must be a folder they see).
    ``series``: "with" also writes each rank's per-step series (one step per iteration: see
    :mod:`debugger.convert.series`), "only" writes the series and graphs but no iteration files.
    """
    if series not in SERIES_MODES:
        raise ValueError(f"series must be one of {SERIES_MODES}, got {series!r}")
    target = check_target(dump, target)
    rank_objs = [dump.rank(r) for r in (sorted(ranks) if ranks is not None else dump.rank_ids)]
    result = ConvertResult(dump.root, target, [r.rank for r in rank_objs], series=series)
    # A dump that stores statistics only converts to statistics only, whatever was asked.
    statistics = statistics or any(r.info.saved == STATISTICS for r in rank_objs)
    result.statistics_only = statistics
    result.iterations = sorted({it for r in rank_objs for it in r.iterations()
                                if iterations is None or it in iterations})
    total = sum(len(r.tensors(iteration=it, local=True)) for r in rank_objs for it in r.iterations()
                if iterations is None or it in iterations)
    if workers is not None and workers.cluster:
        _on_cluster(dump.root, [r.rank for r in rank_objs], target, statistics, iterations, result, total,
                    progress, workers)
    else:
        try:
            _convert_ranks(rank_objs, target, statistics, iterations, result, total, progress)
        except OSError as exc:   # a full disk, a quota, a folder removed: exit 2 naming the file
            raise DumpError(exc.filename or target, f"cannot write the converted dump: {exc.strerror or exc}") from None
    if progress is not None:
        progress(total, total)
    result.warnings[:0] = dump.all_warnings()
    return result


def convert_rank(root: str, rank: int, target: str, statistics: bool, iterations: set[int] | None,
                 series: str | None = None) -> ConvertResult:
    """Worker entry point: convert one rank of the dump at ``root`` (opened here) into ``target``."""
    result = ConvertResult(root, target, [rank], series=series)
    # replace: the client checked the target was new or empty, so an iteration file already there was
    # written by an earlier try of this very task (Dask runs a task again when its worker died)
    _convert_ranks([open_dump(root).rank(rank)], target, statistics, iterations, result, 0, None, replace=True)
    return result


def _on_cluster(root: str, ranks: list[int], target: str, statistics: bool, iterations: set[int] | None,
                result: ConvertResult, total: int, progress: Callable[[int, int], None] | None,
                workers: Workers) -> None:
    """One task per rank; results merged in rank order, as a local conversion orders them. A rank Dask
    converts again after losing its worker writes the same files again (each is published by a rename)."""
    futs = {workers.submit(convert_rank, root, r, target, statistics, iterations, result.series): r for r in ranks}
    parts: dict[int, ConvertResult] = {}
    done = 0
    for fut in as_completed(futs):
        part = parts[futs[fut]] = fut.result()
        done += part.tensors + len(part.warnings)
        if progress is not None:
            progress(min(done, total), total)
    for r in ranks:
        part = parts[r]
        result.graphs += part.graphs
        result.tensors += part.tensors
        result.bytes_read += part.bytes_read
        result.series_steps += part.series_steps
        result.warnings += part.warnings


IN_MEMORY_BYTES = 256 << 20     # an iteration's tensors up to this size are converted in memory


def _convert_ranks(rank_objs: list[Rank], target: str, statistics: bool, iterations: set[int] | None,
                   result: ConvertResult, total: int, progress: Callable[[int, int], None] | None,
                   replace: bool = False) -> None:
    plan = [(r, it) for r in rank_objs for it in r.iterations() if iterations is None or it in iterations]
    done = 0
    writers = {r.rank: _writer(r, target, statistics, result) for r in rank_objs}
    builders = {r.rank: SeriesBuilder(r, writers[r.rank].rank_dir,
                                  [it for rr, it in plan if rr is r], result.warnings)
                for r in rank_objs} if result.series else {}
    activations = {r.rank: {gid: {n.name: n.activation for n in g.record.nodes if n.activation in ASYMPTOTES}
                            for gid, g in r.graphs.items()} for r in rank_objs}
    try:
        for rank, it in plan:
            if rank.rank in builders:
                builders[rank.rank].add(it)
                result.series_steps += 1
            if result.series == "only":
                continue
            refs = rank.tensors(iteration=it, local=True)      # a shard stays its rank's shard
            # built in memory unless too big for it (memfile.py: a full disk is then an error, not a crash)
            small = sum(ref.stored_bytes for ref in refs) < IN_MEMORY_BYTES
            with writers[rank.rank].iteration(it, replace=replace, in_memory=small or None) as w:
                for ref in refs:
                    done += 1
                    try:
                        extra = _extras(rank, ref, activations[rank.rank], iterations) if statistics else None
                        _add(w, ref, extra)
                    except DumpError as exc:
                        result.warnings.append(f"{exc}; not converted")
                        continue
                    except ValueError as exc:   # what the writer refuses (a name it cannot store, say)
                        result.warnings.append(f"{ref.location}: {exc}; not converted")
                        continue
                    result.tensors += 1
                    result.bytes_read += ref.stored_bytes
                    if progress is not None and (done % 256 == 0 or done == total):
                        progress(done, total)
    finally:
        for b in builders.values():
            b.close()
        for wr in writers.values():
            wr.close()


def _extras(rank: Rank, ref: TensorRef, activations: dict[int, dict[str, str]],
            iterations: set[int] | None) -> dict[str, float] | None:
    """The statistics beyond STAT_NAMES a statistics-only target stores for ``ref`` (see
    :data:`debugger.stats.EXTRA_STAT_NAMES`), computed from values as the recorder computes them:
    a tanh/sigmoid layer's saturated count; a weight's update against the value before this
    iteration's update (the iteration before when it is converted too, else what the forward read)."""
    if not ref.source.has_values:
        return dict(ref.source.stored_extras()) or None     # statistics only: what the source stored
    if ref.io == "output" and ref.slot == 0 and ref.node in activations.get(ref.graph_id, {}):
        return saturated_count(ref.value(), activations[ref.graph_id][ref.node])
    if ref.kind != Kind.WEIGHT or ref.io != "output":
        return None
    prev, _ = history.previous_value(rank, ref)
    if prev is None or not prev.ref.source.has_values:
        return None
    p = prev.ref
    converted = iterations is None or p.iteration in iterations
    if not (prev.how == history.BEFORE_UPDATE or (p.iteration == ref.iteration - 1 and converted)):
        return None
    # a shard's previous value is its own part, not the logical tensor the model reads
    before = p.shard.source.array() if p.shard is not None else p.value()
    return update_stats(ref.value(), before) or None


def _add(w: Any, ref: TensorRef, extra: dict[str, float] | None = None) -> None:
    """One tensor into an iteration writer: its values, or (a statistics-only source into a
    statistics-only dump) the statistics it stores, with its digest when it is tdbg-h5's kind."""
    src = ref.source
    if src.has_values or w.writer.saved != STATISTICS:
        w.add(ref.graph_id, ref.node, ref.op_type, ref.io, ref.slot, values=ref.value(), extra=extra)
        return
    stored = src.stored_stats()
    if not stored:
        raise src._no_values()
    head = src.header()
    # Another format's checksum is not tdbg-h5's digest: left out, it reads as unknown (never as equal)
    digest = src.digest()
    digest = digest if DumpWriter.is_digest(digest) else None
    w.add(ref.graph_id, ref.node, ref.op_type, ref.io, ref.slot, stats=stored, digest=digest,
          dtype=head.dtype, shape=head.shape, extra=extra)


def _writer(rank: Rank, target: str, statistics: bool, result: ConvertResult) -> DumpWriter:
    info = rank.info
    w = DumpWriter(target, rank.rank, saved=STATISTICS if statistics else BOTH, framework=info.framework,
                   framework_version=info.framework_version, device_target=info.device_target,
                   net=info.net if isinstance(info.net, str) else None,
                   metadata={"converted_from": rank.path, "nets": info.net, **info.raw}, layout=info.layout)
    for gid, graph in sorted(rank.graphs.items()):
        try:
            w.write_graph(graph.record, run_history=rank.run_history(gid))
        except ValueError as exc:   # a hostile graph (NUL bytes in names ...): say which file, write nothing wrong
            raise DumpError(graph.source_file, f"cannot be converted: {exc}") from None
        result.graphs += 1
    return w
