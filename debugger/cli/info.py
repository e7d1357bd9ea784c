"""`tdbg info`: ranks, graphs, iterations, node kinds, tensor counts and warnings of a dump."""
from __future__ import annotations

import argparse
from typing import TextIO

from .exits import Exit
from ..formats.records import Kind
from ..model import open_dumps
from .report import human_bytes, table
from ..common.selection import counted, ranges_text, ranks_phrase
from ..model.serialize import dump_info
from .common import add_json, print_json


def add_arguments(s: argparse.ArgumentParser) -> None:
    """The arguments of `tdbg info`."""
    s.add_argument("dump", help="dump root, one rank of it, or a folder holding dumps")
    add_json(s)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Ranks, graphs, iterations, node kinds, tensor counts and warnings."""
    infos = [dump_info(d, jobs=0) for d in open_dumps(args.dump)]   # 0: every core
    if args.json:
        print_json(infos[0] if len(infos) == 1 else {"dumps": infos}, out)
        return Exit.OK
    for info in infos:
        _print_info(info, out)
    return Exit.OK


def _print_info(info: dict, out: TextIO) -> None:
    ranks = info["ranks"]
    first = ranks[0] if ranks else {}
    out.write(f"Dump {info['dump']}\n")
    out.write(f"  {info.get('format')}: {_recorded_by(first)}, {len(ranks)} rank(s)\n")
    if first.get("records"):
        out.write(f"  records: {first['records']}\n")
    rows = []
    for r in ranks:
        kinds = r["nodes_by_kind"]
        rows.append([r["rank"], ",".join(map(str, r["graphs"])) or "-", ranges_text(r["iterations"]),
                     ranges_text(r["run_iterations"]) if r["run_iterations"] else "?",
                     sum(kinds.values()), kinds.get(Kind.WEIGHT, 0), r["weights_with_gradient"],
                     kinds.get(Kind.ACTIVATION, 0), r["tensor_files"], human_bytes(r["tensor_bytes"])])
    out.write(table(rows, ["rank", "graphs", "dumped", "ran", "nodes", "weights", "with grad", "activ.",
                           "files", "bytes"]) + "\n")
    if ranks:
        _print_runs(first, out)
        _print_levels(first, out)
        kinds = ", ".join(f"{k} {v}" for k, v in first["nodes_by_kind"].items())
        out.write(f"  rank {first['rank']} nodes by kind: {kinds}\n")
        weights = info["trainable_weights"]
        out.write(f"  trainable weights ({len(weights)}): {', '.join(weights[:12])}"
                  f"{' ...' if len(weights) > 12 else ''}\n")
    _print_series(ranks, out)
    if info["layout"]:
        _print_layout(info["layout"], out)
    if info["warnings"]:
        out.write(f"  warnings ({len(info['warnings'])}):\n")
        for w in info["warnings"][:20]:
            out.write(f"    - {w}\n")
        if len(info["warnings"]) > 20:
            out.write(f"    ... {len(info['warnings']) - 20} more (see --json)\n")
    out.write("\n")


def _recorded_by(rank: dict) -> str:
    """"PyTorch 2.13.0 on CPU, net Net, saved values": the parts the rank knows (the others: not said)."""
    parts = [" ".join(str(rank[k]) for k in ("framework", "framework_version") if rank.get(k)) or None,
             f"on {rank['device_target']}" if rank.get("device_target") else None]
    head = " ".join(p for p in parts if p)
    tail = [f"net {rank['net']}" if rank.get("net") else None, f"saved {rank['saved']}" if rank.get("saved") else None]
    return ", ".join(p for p in [head or "framework unknown", *tail] if p)


def _print_layout(layout: dict, out: TextIO) -> None:
    """Meshes and their groups, pipeline stages, and the parameters with their placements."""
    out.write(f"  parallel layout (ranks {ranges_text(layout['ranks'])}):\n")
    for name, m in layout["meshes"].items():
        dims = " x ".join(f"{d} {s}" for d, s in zip(m["dims"], m["shape"]))
        groups = "; ".join(f"{d}: " + " ".join("[" + ",".join(map(str, g)) + "]" for g in m["groups"][d][:8])
                           + (" ..." if len(m["groups"][d]) > 8 else "") for d in m["dims"])
        out.write(f"    mesh {name}: {dims} (ranks {ranges_text(m['ranks'])}); groups {groups}\n")
    pp = layout["pipeline"]
    if pp:
        stages = "; ".join(f"stage {s}: {ranks_phrase(v['ranks'])} ({counted(len(v['weights']), 'weight')})"
                           for s, v in pp["by_stage"].items())
        out.write(f"    pipeline: {pp['stages'] or '?'} stage(s), {pp['micro_batches'] or '?'} micro-batch(es); "
                  f"{stages}\n")
    params = layout["parameters"]
    if not params:
        return
    sharded = [p for p in params if p["sharded"]]
    out.write(f"    parameters: {len(params)}, {len(sharded)} sharded (read whole, assembled from their shards)\n")
    rows = [[p["name"], "x".join(map(str, p["shape"])) or "scalar", f"{p['mesh']}: {', '.join(p['placements'])}",
             ranges_text(p["ranks"])] for p in params[:_SHOWN_PARAMS]]
    out.write(table(rows, ["parameter", "logical shape", "placements", "ranks"], indent="      ") + "\n")
    if len(params) > _SHOWN_PARAMS:
        out.write(f"      ... {len(params) - _SHOWN_PARAMS} more (see --json)\n")


_SHOWN_PARAMS = 20


def _print_runs(rank: dict, out: TextIO) -> None:
    """The training runs recorded into the rank, apart, when a run was resumed into it after a restart."""
    runs = rank.get("runs") or []
    if len(runs) < 2:
        return
    ends = rank["iterations"] + ([rank["series"]["last_step"]] if rank.get("series") else [])
    last = max(ends, default=None)
    parts = []
    for k, r in enumerate(runs):
        end = runs[k + 1]["first_iteration"] - 1 if k + 1 < len(runs) else last
        span = f"iterations {r['first_iteration']}-{end}" if end is not None else f"from iteration {r['first_iteration']}"
        parts.append(f"run {k + 1}: {span}" + (f" (resumed{' ' + r['started'] if r.get('started') else ''})"
                                               if r.get("resumed") else ""))
    out.write(f"  rank {rank['rank']} holds {len(runs)} runs (Recorder(resume=True)): {'; '.join(parts)}\n")


def _print_levels(rank: dict, out: TextIO) -> None:
    """The recording levels of a rank's graphs, when any is coarser than every operator."""
    levels: dict[str, list[int]] = {}
    for g in rank["graph_details"]:
        levels.setdefault(g.get("level") or "ops", []).extend(g["iterations"])
    if set(levels) - {"ops"}:
        out.write(f"  rank {rank['rank']} recording levels: " +
                  "; ".join(f"{lv} at iterations {ranges_text(its)}" for lv, its in levels.items()) + "\n")


def _print_series(ranks: list[dict], out: TextIO) -> None:
    """One line on the per-step series, when ranks have one."""
    have = [r for r in ranks if r.get("series")]
    if not have:
        return
    s = have[0]["series"]
    roles = ", ".join(f"{k} {v}" for k, v in s["tensors_by_role"].items())
    span = f"steps {s['first_step']}-{s['last_step']}" if s["steps"] else "no step"
    out.write(f"  per-step series on {len(have)} rank(s); rank {have[0]['rank']}: {span} ({s['steps']} steps), "
              f"{len(s['deep_steps'])} deep; tensors: {roles}"
              f"{' (no series files: read from the recorded iterations)' if s.get('origin') == 'iterations' else ''}\n")
