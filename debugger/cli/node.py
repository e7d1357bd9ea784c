"""`tdbg node`: a node's kind, inputs, outputs, shapes and source stack."""
from __future__ import annotations

import argparse
from typing import TextIO

from ..stats import service
from ..errors import DumpError, QueryError
from .exits import Exit
from ..model import Rank, open_dump
from .report import fmt_num, table
from ..common.selection import ranges_text
from ..model.serialize import node_dict, shards_dict
from .common import add_json, add_source_root, print_json, report_warnings, source_roots


def add_arguments(s: argparse.ArgumentParser) -> None:
    """The arguments of `tdbg node`."""
    s.add_argument("dump", help="dump root or one rank of it")
    s.add_argument("name", help="full name, file-name spelling, parameter name or name suffix")
    s.add_argument("--rank", type=int, help="rank (default: the first)")
    s.add_argument("--graph", type=int, help="graph id (default: every graph with that node)")
    add_json(s)
    add_source_root(s)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """A node's kind, inputs, outputs, shapes and source stack."""
    dump = open_dump(args.dump)
    rank = dump.rank(args.rank if args.rank is not None else dump.rank_ids[0])
    found = [(g, n) for g, n in rank.find_node(args.name) if args.graph is None or g == args.graph]
    if not found:
        raise QueryError(rank.path, f"no node {args.name!r} (give a full name, a file-name spelling "
                         f"or a name suffix such as fc1-Dense/MatMul-op0){_unread(rank)}")
    report_warnings(args, dump.all_warnings())
    nodes = [node_dict(rank.graph(g).node(n), rank) | {"logical": _logical(rank, g, n)} for g, n in found]
    roots = source_roots(args, [dump.root])
    for d in nodes:
        for f in d["stack"]:
            f["found"] = roots.describe(f["file"])["found"]
    if args.json:
        print_json({"nodes": nodes}, out)
        return Exit.OK
    for d in nodes:
        _print_node(d, out)
    return Exit.OK


def _logical(rank: Rank, graph_id: int, name: str) -> list[dict]:
    """The node's tensors that are logical tensors (a sharded parameter's weight, gradient or state), in the
    last iteration it was dumped: whole shape, statistics, and the shards they were assembled from."""
    its = rank.node_iterations(graph_id, name)
    if not its:
        return []
    out = []
    for ref in rank.tensor_map(graph_id, its[-1]).values():
        if ref.node != name or not ref.is_logical:
            continue
        try:
            stats = service.statistics(ref.source).to_dict()
        except DumpError as exc:
            stats = {"error": str(exc)}
        out.append({"iteration": ref.iteration, "io": ref.io, "slot": ref.slot, "dtype": str(ref.dtype),
                    "stats": stats, **(shards_dict(ref) or {})})
    return out


def _unread(rank: Rank) -> str:
    """What of the rank could not be read (a graph file, an unlistable folder): the node may be there."""
    missing = [gid for gid in rank.graph_ids if gid not in rank.graphs]
    if missing:
        return f"; graph(s) {', '.join(map(str, missing))} could not be read: {'; '.join(rank.warnings[:3])}"
    return f"; this rank was not read whole: {'; '.join(rank.warnings[:3])}" if rank.warnings else ""


def _print_logical(t: dict, out: TextIO) -> None:
    pieces = t["pieces"]
    ranks = ranges_text(sorted({p["rank"] for p in pieces}))
    placements = "; ".join(sorted({f"{p['mesh']}: {', '.join(p['placements'])}" for p in pieces}))
    out.write(f"  logical tensor (iteration {t['iteration']}, {t['io']} {t['slot']}): shape "
              f"{'x'.join(map(str, t['shape'])) or 'scalar'} {t['dtype']}, assembled from {len(pieces)} shards on "
              f"ranks {ranks} ({placements}); rank {t['own_rank']} holds "
              f"{'x'.join(map(str, next(p['local_shape'] for p in pieces if p['rank'] == t['own_rank'])))}\n")
    st = t["stats"]
    if "error" in st:
        out.write(f"    statistics: {st['error']}\n")
        return
    shown = ", ".join(f"{k} {fmt_num(st[k])}" for k in ("count", "nan", "min", "max", "mean", "std", "l2norm")
                      if st.get(k) is not None)
    out.write(f"    {shown}\n")


def _print_node(d: dict, out: TextIO) -> None:
    out.write(f"{d['node']}\n  rank {d['rank']}, graph {d['graph']}, {d['op_type']}, kind {d['kind']}"
              f"{', param ' + d['param'] if d['param'] else ''}"
              f"{', backward' if d['is_backward'] else ''}\n")
    if d["inputs"]:
        out.write("  inputs:\n" + table([[i["slot"], i["node"] or "(literal)", i["kind"] or ""]
                                          for i in d["inputs"]], indent="    ") + "\n")
    if d["outputs"]:
        out.write("  outputs:\n" + table([[o["slot"], o["dtype"] or "?", o["shape"]] for o in d["outputs"]],
                                         indent="    ") + "\n")
    if d["consumers"]:
        out.write(f"  consumers: {', '.join(d['consumers'][:8])}{' ...' if len(d['consumers']) > 8 else ''}\n")
    out.write(f"  dumped in iterations: {ranges_text(d['iterations'])}\n")
    for t in d["logical"]:
        _print_logical(t, out)
    if d["stack"]:
        out.write("  stack (user code first):\n")
        for f in d["stack"]:
            tag = "framework" if f["is_framework"] else "user"
            fwd = " (forward candidate)" if f["forward_candidate"] else ""
            out.write(f"    {f['file']}:{f['line']}  [{tag}]{fwd}\n")
            if f["found"] and f["found"] != f["file"]:
                out.write(f"        (found at {f['found']})\n")
            out.write(f"        {f['code']}\n")
    out.write("\n")
