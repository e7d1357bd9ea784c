"""The text `tdbg scan` prints: the first problem, hits grouped by watchpoint, checks that could not run."""
from __future__ import annotations

from typing import Any, TextIO

from ..formats.records import Kind
from .report import fmt_num, table
from ..common.selection import ranges_text, ranks_phrase
from ..watch.coverage import Coverage, most_common
from ..watch.levels import level_notes
from ..watch.registry import SERIES
from ..watch.results import ScanResult
from ..watch.steps import describe_skipped

_SHOWN = 50


def print_conditions(conds: list[dict], out: TextIO) -> None:
    """`tdbg scan --list-conditions`: each condition, its target, help and parameters."""
    for c in conds:
        params = ", ".join(f"{p['name']}={p['default']:g}" if p["default"] is not None else p["name"]
                           for p in c["params"])
        out.write(f"{c['name']:<24} [{c['target']}] {c['help']}\n{'':<24} params: {params or 'none'}\n")


def print_scan(result: ScanResult, out: TextIO, strict: bool = False, series_hits: bool = False) -> None:
    """The human report of a scan: what it covered, what the recording levels of its iterations cannot
    answer, its hits, and what could not be checked."""
    out.write(f"Scanned {result.dump}: {ranks_phrase(result.ranks)}, iterations "
              f"{ranges_text(result.iterations)}, {len(result.watchpoints)} watchpoint(s)\n")
    for line in coverage_lines(result):
        out.write(f"{line}\n")
    for line in level_notes(result.levels):
        out.write(f"{line}\n")
    for line in describe_skipped(result.skipped_steps):
        out.write(f"{line}\n")
    if not result.hits:
        out.write(_no_hit(result, strict, series_hits))
    else:
        _print_hits(result, out)
    if result.errors:
        _print_errors(result, out)
    for s in result.skipped:
        out.write(f"\n{'Not checked' if s.gap else 'Not applicable'}: {s.watchpoint} skipped {s.checks} check(s): {s.reason} "
                  f"(e.g. {s.node}, iteration {s.iteration}, rank {s.rank})\n")


def coverage_lines(result: ScanResult) -> list[str]:
    """What each watchpoint checked (tensors, iterations, ranks) and, where it could not, why; and the sweep."""
    lines = ["Coverage:"]
    for i, w in enumerate(result.watchpoints):
        if w.condition.needs == SERIES:
            lines.append(f"  {w.name}: over the per-step series (scan --series), not the dumped iterations")
            continue
        c = result.coverage_of(i)
        lines.append(f"  {w.name}: {_covered(c, w.condition.kinds)}")
    lines.append(f"  non-finite sweep (always on): {result.swept:,} tensor(s) read for NaN/Inf")
    return lines


def _covered(c: Coverage, kinds: tuple[str, ...]) -> str:
    """One watchpoint's coverage in words."""
    if c.status == "unanswered":
        if c.of_kind == 0:
            return f"NOT CHECKED: no {' or '.join(str(k) for k in kinds)} tensor in the scanned iterations"
        return f"NOT CHECKED: none of its {c.candidates} check(s) could run: {most_common(c)}"
    if c.status == "not_applicable":
        return f"applies to none of the {c.of_kind} tensor(s) of its kinds (activation functions, filters)"
    where = f"iterations {ranges_text(sorted(c.iterations))}, {ranks_phrase(c.ranks)}"
    text = f"checked {c.checked:,} tensor(s) in {where}"
    if c.gaps:
        text += f"; {c.unchecked:,} could not be checked: {most_common(c)}"
    return text


def _no_hit(result: ScanResult, strict: bool, series_hits: bool) -> str:
    """The verdict line of a scan without hits: clean only when every watchpoint checked something."""
    if result.status(strict) != "incomplete":
        if series_hits:
            return "No watchpoint hit in the dumped iterations.\n"
        partial = " (some checks could not run: see Coverage)" if result.status() == "partial" else ""
        return f"No watchpoint hit.{partial}\n"
    names = [u.split(":", 1)[0] for u in result.unanswered()]
    if not names:     # --strict: partial coverage is incomplete too
        return "No watchpoint hit, but INCOMPLETE: some checks could not run (see Coverage); --strict fails it.\n"
    hint = ""
    if "parameters" in result.levels and all(n.startswith("activation_") for n in names):
        hint = " A dump of weights, gradients and state: --preset parameters checks what it holds."
    return (f"No watchpoint hit, but INCOMPLETE (exit status 4): {len(names)} watchpoint(s) checked nothing "
            f"(Coverage above says why): {', '.join(names)}.{hint}\n")


def _print_hits(result: ScanResult, out: TextIO) -> None:
    f = result.first
    out.write(f"\nFirst problem: {f.watchpoint} at iteration {f.iteration}, rank {f.rank}: "
              f"{_tensor_label(f)}  ({f.source or 'no user code line'})\n")
    if f.note:
        out.write(f"  {f.note}\n")
    groups: dict[str, list] = {}
    for h in result.hits:
        groups.setdefault(h.watchpoint, []).append(h)
    for name, hits in sorted(groups.items(), key=lambda kv: min(h.headline_key() for h in kv[1])):
        out.write(f"\n{name}: {len(hits)} hit(s), first at iteration {hits[0].iteration}\n")
        rows = []
        for h in hits[:_SHOWN]:
            vs = "; ".join(f"{k} {fmt_num(v)} vs {fmt_num(h.threshold.get(k))}" if k in h.threshold
                           else f"{k} {fmt_num(v)}" for k, v in h.actual.items())
            rows.append([h.iteration, h.rank, _tensor_label(h), f"{h.io}{h.slot}", vs, h.source or "-"])
        out.write(table(rows, ["iter", "rank", "tensor", "io", "actual vs threshold", "code"]) + "\n")
        if len(hits) > _SHOWN:
            out.write(f"  ... {len(hits) - _SHOWN} more (see --json)\n")


def _print_errors(result: ScanResult, out: TextIO) -> None:
    kinds: dict[str, int] = {}
    for e in result.errors:
        # "/path/file.npy: truncated ..." groups by the problem, not by the file
        problem = e.error.split(": ", 1)[1] if e.error.startswith("/") and ": " in e.error else e.error
        kinds[problem] = kinds.get(problem, 0) + 1
    out.write(f"\n{len(result.errors)} check(s) could not run:\n")
    for msg, n in sorted(kinds.items(), key=lambda kv: -kv[1])[:10]:
        out.write(f"  {n} x {msg}\n")


def _tensor_label(h: Any) -> str:
    whole = f" [logical: shards on ranks {ranges_text(h.shards)}]" if h.shards else ""
    if h.param and h.kind == Kind.WEIGHT:
        return h.param + whole
    if h.param:
        return f"{h.param} ({h.kind}, {h.op_type}){whole}"
    # The whole name: a name cut from the left loses the scope that tells MatMul-op0s apart.
    return h.node
