"""The series half of `tdbg scan`: watchpoints over time (registry ``needs == "series"``) run over the
per-step series of the selected ranks that record one; their hits are reported with the step, the tensor
and the value."""
from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from ..errors import DumpError
from ..watch.registry import SERIES, Watchpoint

if TYPE_CHECKING:
    from ..model import Dump, Rank
    from ..watch.results import SeriesHit

NO_SERIES = ("this dump has no per-step series: record with Recorder(series=True), or record every step, or most, "
             "at any level (its iterations then read as the series), or turn a dump's iterations into one with "
             "`tdbg convert DUMP OUT --series`")


def no_series(ranks: "list[Rank]") -> str:
    """:data:`NO_SERIES`, with what the ranks' load warnings say when they have some (a series recorded
    but damaged or lost is then named, not taken for one never recorded)."""
    said = [w for r in ranks for w in r.warnings]
    if not said:
        return NO_SERIES
    return f"{NO_SERIES}; the dump's {len(said)} load warning(s) may say why, first: {said[0]}"


def split(wps: list[Watchpoint], over_series: bool = False) -> tuple[list[Watchpoint], list[Watchpoint]]:
    """(watchpoints over the dumped iterations, watchpoints over the series); ``over_series``: those that
    compare iterations and that the series answers (update ratios, the loss history) run over both."""
    dumped = [w for w in wps if w.condition.needs != SERIES]
    series = [w for w in wps if w.condition.needs == SERIES]
    if over_series:
        from ..watch.series_conditions import OVER_SERIES    # numpy: only for a scan that asks
        series += [w for w in dumped if w.condition.rule in OVER_SERIES]
    return dumped, series


def scan_series(dump: "Dump", ranks: list[int] | None, wps: list[Watchpoint], alone: bool,
                steps: set[int] | None = None) -> tuple[list["SeriesHit"], list[str]]:
    """(hits, warnings) of the series watchpoints on the selected ranks with a series, at ``steps`` only
    when given (--iterations: a series step is the recorder's iteration number; each condition still
    reads the steps before them). ``alone``: no other watchpoint runs, so a dump without any series is
    a usage error (exit 2), not a warning."""
    from ..watch.series_conditions import run_series
    chosen = dump.ranks if ranks is None else [dump.rank(r) for r in ranks]
    hits: list["SeriesHit"] = []
    warnings: list[str] = []
    with_series = [(r.rank, r.series) for r in chosen if r.series is not None]
    if not with_series:
        if alone:
            raise DumpError(dump.root, no_series(chosen))
        return [], [f"{', '.join(w.name for w in wps)}: {no_series(chosen)}"]
    for rank, series in with_series:
        warnings += series.warnings
        try:
            hits += run_series(rank, series, wps)
        except ValueError as exc:
            warnings.append(f"rank {rank} series: {exc}")
    if steps is not None:
        hits = [h for h in hits if h.step in steps]
    return hits, warnings


def print_series_hits(hits: list["SeriesHit"], out: TextIO, limit: int = 50) -> None:
    """One line per hit (the first ``limit``), then how many more."""
    if not hits:
        out.write("series: no hit\n")
        return
    out.write(f"series: {len(hits)} hit{'s' if len(hits) != 1 else ''}\n")
    for h in hits[:limit]:
        out.write(f"  rank {h.rank} step {h.step}: {h.condition} {h.tensor} {h.stat}={h.value:.6g}: {h.detail}\n")
    if len(hits) > limit:
        out.write(f"  ... {len(hits) - limit} more (--json lists all)\n")
