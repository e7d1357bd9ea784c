"""What a scan finds: hits, error records, the scan result and its JSON, and the one hit order."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from .coverage import Coverage, StepCounts, read_counts, scan_status, step_counts, sum_counts, why_unanswered
from .levels import level_notes
from .registry import CONDITIONS, SERIES, Watchpoint

_HIT_FIELDS = ("watchpoint", "rank", "graph", "iteration", "node", "kind", "param", "io", "slot", "actual",
               "threshold", "source", "position", "op_type")


@dataclass
class Hit:
    """A watchpoint that fired on one tensor."""

    watchpoint: str
    rank: int
    graph: int
    iteration: int
    node: str
    kind: str
    param: str | None
    io: str
    slot: int
    actual: dict[str, float]
    threshold: dict[str, float]
    source: str | None
    position: int = 0
    op_type: str = ""
    order: int = 0          # the watchpoint's place in the scan's list
    collective: bool = False   # the node exchanges values between ranks (the reader's hint)
    shards: tuple[int, ...] = ()   # a logical tensor judged whole: the ranks holding its parts (() : a rank's own)
    note: str = ""          # what the reader should know beside the numbers (an origin the dump does not hold)

    def sort_key(self) -> tuple:
        """(iteration, relayed, rank, execution order, watchpoint, io, slot, node): the hit order.

        A collective (all-reduce ...) whose non-finite output came from another rank is an origin on
        its own rank too; within an iteration it sorts after the origins of computing kernels, so
        that ``first`` names the rank where the NaN was made.
        """
        relayed = self.watchpoint == "overflow" and self.collective
        return (self.iteration, relayed, self.rank, self.position, self.order, self.io, self.slot, self.node)

    def headline_key(self) -> tuple:
        """(cause rank, then the hit order): what the scan's headline (``first``) takes the least of.

        A NaN origin at iteration 5 heads a scan whose all-zero tensor fired at iteration 0: the rank
        of the condition's cause (registry ``CAUSES``) comes before the iteration.
        """
        cond = CONDITIONS.get(self.watchpoint)
        return (cond.cause if cond is not None else max_cause(),) + self.sort_key()

    def to_dict(self) -> dict[str, Any]:
        """The documented HIT object."""
        return {"watchpoint": self.watchpoint, "rank": self.rank, "graph": self.graph,
                "iteration": self.iteration, "node": self.node, "kind": self.kind, "param": self.param,
                "io": self.io, "slot": self.slot, "actual": self.actual, "threshold": self.threshold,
                "source": self.source, "op_type": self.op_type, "position": self.position,
                "watchpoint_index": self.order, "collective": self.collective, "shards": list(self.shards),
                "note": self.note}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Hit":
        """Inverse of :meth:`to_dict` (other keys, such as the web's ``watchpoint_id``, are ignored)."""
        return cls(**{k: d[k] for k in _HIT_FIELDS}, order=d.get("watchpoint_index", 0),
                   collective=bool(d.get("collective", False)), shards=tuple(d.get("shards", ())),
                   note=str(d.get("note", "")))


_NOTHING: StepCounts = (0, 0, 0, 0, ())


def _step_coverage(rows: list[Any]) -> dict[tuple[int, int], dict[int, StepCounts]]:
    """Inverse of :meth:`ScanResult.step_coverage_json`."""
    return {(int(r), int(it)): {int(o): read_counts(n) for o, *n in by} for r, it, by in rows}


def max_cause() -> int:
    """The rank of a condition the registry does not know (after every known one)."""
    return max(c.cause for c in CONDITIONS.values()) + 1


def hit_order(d: Mapping[str, Any]) -> tuple:
    """The sort key of a HIT object: :meth:`Hit.sort_key`, for code that holds the JSON form."""
    return Hit.from_dict(d).sort_key()


def headline_order(d: Mapping[str, Any]) -> tuple:
    """The headline key of a HIT object: :meth:`Hit.headline_key`, for code that holds the JSON form."""
    return Hit.from_dict(d).headline_key()


@dataclass(frozen=True)
class SeriesHit:
    """One hit of a series watchpoint: where (rank, step, tensor, statistic), the value, and why."""

    condition: str
    rank: int
    step: int
    tensor: str
    stat: str
    value: float
    detail: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (keys: the field names; a non-finite value as a string)."""
        d = asdict(self)
        if not math.isfinite(d["value"]):
            d["value"] = str(d["value"])
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "SeriesHit":
        """Inverse of :meth:`as_dict`."""
        return cls(d["condition"], int(d["rank"]), int(d["step"]), d["tensor"], d["stat"], float(d["value"]),
                   d["detail"])


@dataclass
class Skipped:
    """A watchpoint that does not apply to some tensors, said once: why, how many checks, one example."""

    watchpoint: str
    reason: str
    checks: int
    rank: int
    iteration: int
    node: str
    where: list[tuple[int, int, str]] = field(default_factory=list)   # (rank, iteration, node) of every check
    gap: bool = False       # the dump lacks what the check needs (else it does not apply by design)

    def to_dict(self) -> dict[str, Any]:
        """The documented SKIP object."""
        return {"watchpoint": self.watchpoint, "reason": self.reason, "checks": self.checks, "gap": self.gap,
                "example": {"rank": self.rank, "iteration": self.iteration, "node": self.node}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Skipped":
        """Inverse of :meth:`to_dict`."""
        ex = d["example"]
        return cls(d["watchpoint"], d["reason"], d["checks"], ex["rank"], ex["iteration"], ex["node"],
                   gap=bool(d.get("gap", False)))


@dataclass
class ErrorRecord:
    """A watchpoint that could not be checked on one tensor, and why."""

    watchpoint: str
    rank: int
    iteration: int
    node: str
    error: str
    graph: int = 0
    order: int = 0          # the watchpoint's place in the scan's list (as Hit.order)

    def sort_key(self) -> tuple:
        """(iteration, rank, watchpoint, node): the order of a scan's error records."""
        return (self.iteration, self.rank, self.watchpoint, self.node)

    def to_dict(self) -> dict[str, Any]:
        """The documented ERR object."""
        return {"watchpoint": self.watchpoint, "rank": self.rank, "graph": self.graph,
                "iteration": self.iteration, "node": self.node, "error": self.error,
                "watchpoint_index": self.order}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ErrorRecord":
        """Inverse of :meth:`to_dict`."""
        return cls(d["watchpoint"], d["rank"], d["iteration"], d["node"], d["error"], d["graph"],
                   d.get("watchpoint_index", 0))


@dataclass
class ScanResult:
    """Everything a scan found."""

    dump: str
    ranks: list[int]
    iterations: list[int]
    watchpoints: list[Watchpoint]
    hits: list[Hit] = field(default_factory=list)
    errors: list[ErrorRecord] = field(default_factory=list)
    files_checked: int = 0
    # The ranks' load warnings as the scan left them (all ranks scanned only), kept with a stored result:
    # a re-scan of the unchanged dump then need not load graphs and index again only to list them.
    rank_warnings: list[str] | None = None
    skipped: list[Skipped] = field(default_factory=list)
    # optimizer steps that did not run ({rank, iteration, cause, weights, nonfinite_hits}; watch/steps.py)
    skipped_steps: list[dict[str, Any]] = field(default_factory=list)
    # iterations scanned that were recorded coarser than every operator: level -> iterations (watch/levels.py)
    levels: dict[str, list[int]] = field(default_factory=dict)
    # what each watchpoint checked and could not, by its place in the list (watch/coverage.py)
    coverage: dict[int, Coverage] = field(default_factory=dict)
    # the same per (rank, iteration) scanned, as counts by watchpoint place: what a session keeps per key
    step_coverage: dict[tuple[int, int], dict[int, StepCounts]] = field(default_factory=dict, repr=False)
    swept: int = 0          # tensors the non-finite sweep read (watch/sweep.py), every scan
    # the first non-finite loss of each rank's per-step series, as series hits (watch/sweep.py)
    series_sweep: list[SeriesHit] = field(default_factory=list)
    # each (rank, iteration)'s first tensor holding NaN/Inf, until the sweep's hits are added (watch/sweep.py)
    nonfinite_first: dict[tuple[int, int], Hit] = field(default_factory=dict, repr=False)
    # the notes of the check being evaluated (conditions.add_error): whether it ran (watch/run.py); not kept
    pending: list[str] = field(default_factory=list, repr=False)

    @property
    def first(self) -> Hit | None:
        """The headline: the hit nearest a cause, earliest first (:meth:`Hit.headline_key`)."""
        return min(self.hits, key=Hit.headline_key) if self.hits else None

    def skip(self, watchpoint: str, reason: str, rank: int, iteration: int, node: str, gap: bool = False) -> None:
        """Count a check that does not apply (the first one met is the example); ``gap``: because the dump
        lacks what it needs."""
        for s in self.skipped:
            if s.watchpoint == watchpoint and s.reason == reason:
                s.checks += 1
                s.where.append((rank, iteration, node))
                if (iteration, rank, node) < (s.iteration, s.rank, s.node):
                    s.rank, s.iteration, s.node = rank, iteration, node
                return
        self.skipped.append(Skipped(watchpoint, reason, 1, rank, iteration, node, [(rank, iteration, node)], gap))

    def absorb(self, part: "ScanResult") -> None:
        """Add what a scan of some of the ranks found (a worker's part of this scan)."""
        self.hits.extend(part.hits)
        self.errors.extend(part.errors)
        self.files_checked += part.files_checked
        self.swept += part.swept
        for key, hit in part.nonfinite_first.items():
            mine = self.nonfinite_first.get(key)
            if mine is None or hit.sort_key() < mine.sort_key():
                self.nonfinite_first[key] = hit
        for order, c in part.coverage.items():
            self.coverage_of(order).add(c)
        for key, counts in part.step_coverage.items():
            mine = self.step_coverage.setdefault(key, {})
            for order, n in counts.items():
                mine[order] = sum_counts(n, mine.get(order))
        for s in part.skipped:
            mine = next((m for m in self.skipped if (m.watchpoint, m.reason) == (s.watchpoint, s.reason)), None)
            if mine is None:
                self.skipped.append(s)
                continue
            mine.checks += s.checks
            mine.where.extend(s.where)
            if (s.iteration, s.rank, s.node) < (mine.iteration, mine.rank, mine.node):
                mine.rank, mine.iteration, mine.node = s.rank, s.iteration, s.node

    def keep_step(self, rank: int, iteration: int, coverage: Mapping[int, Coverage]) -> None:
        """Add one step's coverage (by watchpoint place) to the whole and to its (rank, iteration)'s (a
        watchpoint that met nothing there adds nothing: left out, a long run's result stays small)."""
        mine = self.step_coverage.setdefault((rank, iteration), {})
        for order, met in coverage.items():
            self.coverage_of(order).add(met)
            counts = sum_counts(step_counts(met), mine.get(order))
            if counts != _NOTHING:
                mine[order] = counts

    def step_coverage_json(self) -> list[list[Any]]:
        """:attr:`step_coverage` as JSON: ``[rank, iteration, [[order, *counts], ...]]`` per key."""
        return [[r, it, [[o, *n] for o, n in sorted(by.items())]] for (r, it), by in sorted(self.step_coverage.items())]

    def coverage_of(self, order: int) -> Coverage:
        """The coverage of the watchpoint at ``order`` (made on first use)."""
        c = self.coverage.get(order)
        if c is None:
            c = self.coverage[order] = Coverage()
        return c

    def status(self, strict: bool = False) -> str:
        """complete | partial | incomplete (:func:`watch.coverage.scan_status`) over the watchpoints this
        scan runs (those over the per-step series are answered by `scan --series`)."""
        return scan_status(self._dumped_coverage(), strict)

    def _dumped_coverage(self) -> list[Coverage]:
        return [self.coverage_of(i) for i, w in enumerate(self.watchpoints) if w.condition.needs != SERIES]

    def unanswered(self) -> list[str]:
        """One line per watchpoint that answered nothing, saying why."""
        return [why_unanswered(w.name, w.condition.kinds, c) for i, w in enumerate(self.watchpoints)
                if w.condition.needs != SERIES and (c := self.coverage_of(i)).status == "unanswered"]

    def coverage_dict(self, strict: bool = False) -> dict[str, Any]:
        """The documented COVERAGE object of `tdbg scan --json`."""
        items = []
        for i, w in enumerate(self.watchpoints):
            entry = {"watchpoint": w.name, "watchpoint_index": i, "kinds": [str(k) for k in w.condition.kinds]}
            if w.condition.needs == SERIES:
                items.append({**entry, "status": "series"})
            else:
                items.append({**entry, **self.coverage_of(i).to_dict()})
        return {"status": self.status(strict), "watchpoints": items, "unanswered": self.unanswered(),
                "swept": self.swept}

    def sort(self) -> None:
        """Hits in the hit order, error records by iteration, rank, watchpoint and node."""
        self.hits.sort(key=Hit.sort_key)
        self.errors.sort(key=ErrorRecord.sort_key)
        self.skipped.sort(key=lambda s: (s.watchpoint, s.reason))

    @classmethod
    def from_dict(cls, d: dict[str, Any], watchpoints: list[Watchpoint]) -> "ScanResult":
        """Inverse of :meth:`to_dict` (the watchpoints are given again, as objects)."""
        hits = [Hit.from_dict(h) for h in d["hits"]]
        errors = [ErrorRecord.from_dict(e) for e in d["errors"]]
        cov = d.get("coverage") or {"watchpoints": [], "swept": 0}
        coverage = {c["watchpoint_index"]: Coverage.from_dict(c) for c in cov["watchpoints"] if c["status"] != "series"}
        return cls(d["dump"], d["ranks"], d["iterations"], watchpoints, hits, errors,
                   rank_warnings=d.get("rank_warnings"), skipped_steps=list(d.get("skipped_steps", [])),
                   skipped=[Skipped.from_dict(s) for s in d.get("skipped", [])], levels=dict(d.get("levels", {})),
                   coverage=coverage, swept=int(cov["swept"]),
                   series_sweep=[SeriesHit.from_dict(h) for h in d.get("series_sweep", [])],
                   step_coverage=_step_coverage(d.get("step_coverage", [])))

    def to_dict(self) -> dict[str, Any]:
        """The documented `tdbg scan --json` object."""
        return {"dump": self.dump, "ranks": self.ranks, "iterations": self.iterations,
                "watchpoints": [{"name": w.name, "params": dict(w.params)} for w in self.watchpoints],
                "hits": [h.to_dict() for h in self.hits], "errors": [e.to_dict() for e in self.errors],
                "skipped": [s.to_dict() for s in self.skipped],
                "first": self.first.to_dict() if self.first else None, "skipped_steps": self.skipped_steps,
                "levels": self.levels, "level_notes": level_notes(self.levels), "coverage": self.coverage_dict()}
