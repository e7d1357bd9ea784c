"""The text `tdbg compare` prints: header, first divergence, per-iteration summary, divergent pairs worst first."""
from __future__ import annotations

from typing import TextIO

from ..compare.grades import ERROR, PASS, WARNING
from ..compare.pairs import CompareResult, Pair
from .report import fmt_num, table
from ..common.selection import ranges_text, ranks_phrase

_SHOWN = 50


def print_result(result: CompareResult, out: TextIO, all_pairs: bool = False) -> None:
    """The human report: header, first divergence, per-iteration summary, divergent pairs worst first."""
    _print_header(result, out)
    s = result.summary()
    rows = [[r["iteration"], r["pairs"], r[PASS], r[WARNING], r[ERROR]]
            + ([r["counted_errors"]] if result.mode == "ranks" else []) for r in s["iterations"]]
    head = ["iter", "pairs", "pass", "warning", "error"] + (["must-agree errors"] if result.mode == "ranks" else [])
    if rows:
        out.write("\n" + table(rows, head) + "\n")
    shown = result.pairs if all_pairs else result.divergent()
    if all_pairs:
        shown = sorted(shown, key=Pair.severity_key)
    if shown:
        _print_pairs(result, shown, "All pairs" if all_pairs else "Divergent tensors", out)
    if result.warnings:
        out.write(f"\nWarnings ({len(result.warnings)}):\n")
        for w in result.warnings[:20]:
            out.write(f"  - {w}\n")
        if len(result.warnings) > 20:
            out.write(f"  ... {len(result.warnings) - 20} more (see --json)\n")


def _print_header(result: CompareResult, out: TextIO) -> None:
    """What was compared, and the first divergence (or that there is none, or that nothing was compared)."""
    s = result.summary()
    its = ranges_text(result.iterations)
    if result.mode == "ranks":
        out.write(f"Compared {ranks_phrase(result.ranks)} with base rank {result.base} of {result.a}\n"
                  f"  iterations {its}: {s['pairs']} pair(s), {s['counted']} of tensors that must agree\n")
    elif result.mode == "logical":
        out.write(f"Compared the logical tensors of {result.a} (a)\n    with {result.b} (b, baseline)\n"
                  f"  parameters, gradients, optimizer state and the loss assembled from every rank's shard "
                  f"(activations differ between layouts: not compared)\n  iterations {its}: {s['pairs']} pair(s)\n")
    else:
        out.write(f"Compared {result.a} (a)\n    with {result.b} (b, baseline)\n"
                  f"  ranks {ranges_text(result.ranks)}, iterations {its}: {s['pairs']} pair(s)\n")
        for p in result.programs:
            out.write(f"  {p.text()}\n")
        for u in result.unpaired:
            out.write(f"  {u.text()}\n")
    f = result.first_divergence
    nothing = result.nothing_compared()
    if nothing is not None:
        out.write(f"\nNothing compared: {nothing}.\n")
    elif f is None:
        what = "every tensor that must agree does" if result.mode == "ranks" else "no pair is graded error"
        out.write(f"\nNo divergence: {what}.\n")
    else:
        kind = f"{f.kind}{', ' + f.param if f.param and f.param != f.node else ''}"
        if result.mode == "logical":
            where = f"\n  shard: {f.shard}" if f.shard else ""
            out.write(f"\nFirst divergence: iteration {f.iteration}: {f.node} ({kind}, logical){where}\n"
                      f"  {f.grade}: {f.reason}\n")
            return
        ranks = f"rank {f.a.rank} vs {f.b.rank}" if result.mode == "ranks" else f"rank {f.a.rank}"
        out.write(f"\nFirst divergence: iteration {f.iteration}, {ranks}: {_tensor(f)} {f.io} {f.slot} "
                  f"({kind}, {f.op_type})\n  {f.grade}: {f.reason}\n  code: {f.source or 'no user code line'}\n")


def _print_pairs(result: CompareResult, shown: list[Pair], title: str, out: TextIO) -> None:
    out.write(f"\n{title}, worst first ({len(shown)}):\n")
    rows = []
    for p in shown[:_SHOWN]:
        m = p.metrics
        row = [p.grade, p.iteration, _who(p, result.mode), _tensor(p), _io(p),
               fmt_num(m.cosine) if m else "-", fmt_num(m.max_abs_err) if m else "-",
               fmt_num(m.max_rel_err) if m else "-", p.reason, p.source or "-"]
        if result.mode == "ranks":
            row.insert(3, "yes" if p.counted else "no")
        rows.append(row)
    head = ["grade", "iter", "rank" if result.mode == "runs" else "ranks", "tensor", "io", "cosine", "max_abs",
            "max_rel", "reason", "code"]
    if result.mode == "ranks":
        head.insert(3, "must agree")
    out.write(table(rows, head) + "\n")
    if len(shown) > _SHOWN:
        out.write(f"  ... {len(shown) - _SHOWN} more (see --json)\n")


def _who(p: Pair, mode: str) -> str:
    if mode == "logical":
        return "all"
    return f"{p.a.rank} vs {p.b.rank}" if mode == "ranks" else str(p.a.rank)


def _tensor(p: Pair) -> str:
    name = p.node if p.op_type == "Parameter" else _short(p.node)
    if p.node_b:
        name += f" (b: {_short(p.node_b, 40)})"
    if p.shard:
        name += f" ({p.shard})"
    return name


def _short(node: str, width: int = 64) -> str:
    return node if len(node) <= width else "..." + node[-(width - 3):]


def _io(p: Pair) -> str:
    return f"{'in' if p.io == 'input' else 'out'}{p.slot}"
