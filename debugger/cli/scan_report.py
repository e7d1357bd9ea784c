"""The text `tdbg scan` prints: the first problem, hits grouped by watchpoint, checks that could not run."""
from __future__ import annotations

from typing import Any, TextIO

from ..formats.records import Kind
from ..report import fmt_num, table
from ..selection import ranges_text
from ..watch.levels import level_notes
from ..watch.results import ScanResult
from ..watch.steps import describe_skipped

_SHOWN = 50


def print_conditions(conds: list[dict], out: TextIO) -> None:
    """`tdbg scan --list-conditions`: each condition, its target, help and parameters."""
    for c in conds:
        params = ", ".join(f"{p['name']}={p['default']:g}" if p["default"] is not None else p["name"]
                           for p in c["params"])
        out.write(f"{c['name']:<24} [{c['target']}] {c['help']}\n{'':<24} params: {params or 'none'}\n")


def print_scan(result: ScanResult, out: TextIO) -> None:
    """The human report of a scan, with what the recording levels of its iterations cannot answer."""
    out.write(f"Scanned {result.dump}: ranks {ranges_text(result.ranks)}, iterations "
              f"{ranges_text(result.iterations)}, {len(result.watchpoints)} watchpoint(s)\n")
    for line in level_notes(result.levels):
        out.write(f"{line}\n")
    for line in describe_skipped(result.skipped_steps):
        out.write(f"{line}\n")
    if not result.hits:
        out.write("No watchpoint hit.\n")
    else:
        _print_hits(result, out)
    if result.errors:
        _print_errors(result, out)
    for s in result.skipped:
        out.write(f"\nNot applicable: {s.watchpoint} skipped {s.checks} check(s): {s.reason} "
                  f"(e.g. {s.node}, iteration {s.iteration}, rank {s.rank})\n")


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
