"""The `tdbg` command: info, node, code, scan, compare, convert, graph, serve."""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import traceback
from typing import Any, Callable, Sequence, TextIO

from .errors import DumpError
from .executors import add_scheduler, cluster_workers
from .exits import Exit
from .gcpause import paused_gc
from .query import FOLD
from .report import Progress, fmt_num, human_bytes, table
from .selection import ranges_text


def _print_json(obj: Any, out: TextIO) -> None:
    json.dump(obj, out, indent=2, default=str)
    out.write("\n")


# -- info ---------------------------------------------------------------------------------------
def cmd_info(args: argparse.Namespace, out: TextIO) -> int:
    """Ranks, graphs, iterations, node kinds, tensor counts and warnings."""
    from .model import open_dumps
    from .serialize import dump_info

    infos = [dump_info(d) for d in open_dumps(args.dump)]
    if args.json:
        _print_json(infos[0] if len(infos) == 1 else {"dumps": infos}, out)
        return Exit.OK
    for info in infos:
        _print_info(info, out)
    return Exit.OK


def _print_info(info: dict, out: TextIO) -> None:
    ranks = info["ranks"]
    first = ranks[0] if ranks else {}
    out.write(f"Dump {info['dump']}\n")
    out.write(f"  {info.get('format')}: {first.get('framework') or '?'} {first.get('framework_version') or '?'} on "
              f"{first.get('device_target') or '?'}, net {first.get('net') or '?'}, saved {first.get('saved') or '?'}, "
              f"{len(ranks)} rank(s)\n")
    rows = []
    for r in ranks:
        kinds = r["nodes_by_kind"]
        rows.append([r["rank"], ",".join(map(str, r["graphs"])) or "-", ranges_text(r["iterations"]),
                     ranges_text(r["run_iterations"]) if r["run_iterations"] else "?",
                     sum(kinds.values()), kinds.get("weight", 0), kinds.get("gradient", 0),
                     kinds.get("activation", 0), r["tensor_files"], human_bytes(r["tensor_bytes"])])
    out.write(table(rows, ["rank", "graphs", "dumped", "ran", "nodes", "weights", "grads", "activ.",
                           "files", "bytes"]) + "\n")
    if ranks:
        kinds = ", ".join(f"{k} {v}" for k, v in first["nodes_by_kind"].items())
        out.write(f"  rank {first['rank']} nodes by kind: {kinds}\n")
        weights = [p["name"] for p in first["parameters"] if p["kind"] == "weight"]
        out.write(f"  trainable weights ({len(weights)}): {', '.join(weights[:12])}"
                  f"{' ...' if len(weights) > 12 else ''}\n")
    if info["warnings"]:
        out.write(f"  warnings ({len(info['warnings'])}):\n")
        for w in info["warnings"][:20]:
            out.write(f"    - {w}\n")
        if len(info["warnings"]) > 20:
            out.write(f"    ... {len(info['warnings']) - 20} more (see --json)\n")
    out.write("\n")


# -- node ---------------------------------------------------------------------------------------
def cmd_node(args: argparse.Namespace, out: TextIO) -> int:
    """A node's kind, inputs, outputs, shapes and source stack."""
    from .errors import QueryError
    from .model import open_dump
    from .serialize import node_dict

    dump = open_dump(args.dump)
    rank = dump.rank(args.rank if args.rank is not None else dump.rank_ids[0])
    found = [(g, n) for g, n in rank.find_node(args.name) if args.graph is None or g == args.graph]
    if not found:
        missing = [gid for gid in rank.graph_ids if gid not in rank.graphs]
        # the node may be in what could not be read: say what that was (a graph file, an unlistable folder)
        why = (f"; graph(s) {', '.join(map(str, missing))} could not be read: {'; '.join(rank.warnings[:3])}"
               if missing else f"; this rank was not read whole: {'; '.join(rank.warnings[:3])}"
               if rank.warnings else "")
        raise QueryError(rank.path, f"no node {args.name!r} (give a full name, a file-name spelling "
                         f"or a name suffix such as fc1-Dense/MatMul-op0){why}")
    report_warnings(args, dump.all_warnings())
    nodes = [node_dict(rank.graph(g).node(n), rank) for g, n in found]
    roots = source_roots(args, [dump.root])
    for d in nodes:
        for f in d["stack"]:
            f["found"] = roots.describe(f["file"])["found"]
    if args.json:
        _print_json({"nodes": nodes}, out)
        return Exit.OK
    for d in nodes:
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
    return Exit.OK


# -- code ---------------------------------------------------------------------------------------
def cmd_code(args: argparse.Namespace, out: TextIO) -> int:
    """Every node created by a source line, forward and backward marked."""
    from .model import open_dump
    from .model.source import parse_location

    dump = open_dump(args.dump)
    file, line = parse_location(args.location)
    roots = source_roots(args, [dump.root])
    nodes = [n for n in dump.nodes_at(file, line, roots.statement_lines, roots.assigned_attribute)
             if args.rank is None or n["rank"] == args.rank]
    files = sorted({n.pop("file") for n in nodes})
    report_warnings(args, dump.all_warnings())
    found = {f: roots.describe(f)["found"] for f in files}
    if args.json:
        _print_json({"location": args.location, "files": files, "found": found, "nodes": nodes}, out)
        return Exit.OK
    if not nodes:
        out.write(f"No node was created by {args.location}.\n")
        known = [f for f in dump.source_index.all_files() if not dump.source_index.is_framework(f)]
        if known:
            out.write("User source files in the stacks:\n" + "\n".join(f"  {f}" for f in known[:20]) + "\n")
        return Exit.OK
    code = dump.source_index.code(files[0], line) if files else ""
    out.write(f"{args.location}  {code}\n")
    for f in files:
        if found[f] and found[f] != f:
            out.write(f"  {f}\n    found at {found[f]}\n")
    for direction in ("forward", "backward", "definition"):
        rows = [[n["rank"], n["graph"], n["op_type"], n["kind"], n["node"]] for n in nodes if n["direction"] == direction]
        if rows:
            out.write(f"  {direction} ({len(rows)}):\n" + table(rows, ["rank", "graph", "op", "kind", "node"], indent="    ") + "\n")
    return Exit.OK


# -- scan ---------------------------------------------------------------------------------------
def _load_config(path: str) -> list[dict]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise DumpError(path, f"cannot read watchpoint config ({exc.strerror})") from exc
    try:
        data = json.loads(text)
    except ValueError:
        try:
            import yaml
        except ImportError:
            raise DumpError(path, "not JSON (install pyyaml to read YAML configs)") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise DumpError(path, f"neither JSON nor YAML ({exc.__class__.__name__})") from None
    if isinstance(data, dict) and "watchpoints" in data:
        data = data["watchpoints"]
    if not isinstance(data, list):
        raise DumpError(path, "expected a list of watchpoints ({name, params})")
    return data


def build_watchpoints(args: argparse.Namespace) -> list:
    """Watchpoints from --watch, --config and --preset (recommended when none is given)."""
    from .watch.registry import Watchpoint, preset

    wps = [Watchpoint.parse(w) for w in args.watch or []]
    if args.config:
        wps += [Watchpoint.from_dict(d) for d in _load_config(args.config)]
    if args.preset or not wps:
        wps += preset(args.preset or "recommended")
    if args.node or args.scope:
        wps = [type(w)(w.condition, w.params, w.node or args.node, w.scope or args.scope) for w in wps]
    return wps


def cmd_scan(args: argparse.Namespace, out: TextIO) -> int:
    """Run watchpoints over a dump."""
    from .cache import StatsCache
    from .model import open_dump
    from .selection import lacking_iterations, parse_iterations, parse_ranks, present_ranks
    from .watch.engine import scan, scan_warnings
    from .watch.registry import describe_conditions

    if args.list_conditions:
        conds = describe_conditions()
        if args.json:
            _print_json(conds, out)
        else:
            for c in conds:
                params = ", ".join(f"{p['name']}={p['default']:g}" if p["default"] is not None else p["name"]
                                   for p in c["params"])
                out.write(f"{c['name']:<24} [{c['target']}] {c['help']}\n{'':<24} params: {params or 'none'}\n")
        return Exit.OK
    if not args.dump:
        raise DumpError(None, "scan needs a DUMP path")
    try:
        wps = build_watchpoints(args)
        its = parse_iterations(args.iterations)
        ranks = parse_ranks(args.ranks)
    except ValueError as exc:
        raise DumpError(None, str(exc)) from None
    dump = open_dump(args.dump)
    ranks, selection_notes = present_ranks(dump, ranks)
    cache = StatsCache.for_dump(dump.root, args.cache_dir, enabled=not args.no_cache)
    with cluster_workers(args) as workers:
        result = scan(dump, wps, ranks=ranks, iterations=its, where=args.where, jobs=args.jobs, cache=cache,
                      progress=Progress("scanning"), workers=workers)
    warnings = scan_warnings(dump, result)
    try:
        # after the scan, from what it found: a stored result is answered without listing the iterations
        selection_notes += lacking_iterations(dump, ranks, its, result.iterations)
        if not result.iterations:
            raise DumpError(dump.root, f"nothing scanned: {_nothing_dumped(dump, ranks)}")
    except DumpError:
        report_warnings(args, selection_notes + warnings)   # the load problems may say why
        raise
    warnings = selection_notes + warnings
    if args.json:
        _print_json({**result.to_dict(), "warnings": warnings}, out)
    else:
        report_warnings(args, warnings)
        _print_scan(result, out)
    return Exit.FOUND if result.hits else Exit.OK


def _nothing_dumped(dump: Any, ranks: list[int] | None) -> str:
    """Why a dump (its selected ranks) gave nothing to read: it dumped no iteration."""
    ids = ranks if ranks is not None else dump.rank_ids
    who = f"rank {ids[0]}" if len(ids) == 1 else f"ranks {ranges_text(ids, ', ')}"
    return f"{who} dumped no iteration (a recording that captured nothing, or an empty dump)"


def cmd_convert(args: argparse.Namespace, out: TextIO) -> int:
    """Convert a dump into tdbg's HDF5 format."""
    from .convert import convert
    from .model import open_dump
    from .selection import lacking_iterations, parse_iterations, parse_ranks, present_ranks

    try:
        its = parse_iterations(args.iterations)
        ranks = parse_ranks(args.ranks)
    except ValueError as exc:
        raise DumpError(None, str(exc)) from None
    dump = open_dump(args.dump)
    ranks, notes = present_ranks(dump, ranks)
    notes += lacking_iterations(dump, ranks, its)   # before a file is written: none of them is exit 2
    with cluster_workers(args) as workers:
        result = convert(dump, args.out, statistics=args.statistics, ranks=ranks, iterations=its,
                         progress=Progress("converting"), workers=workers)
    report_warnings(args, notes)
    if args.json:
        result.warnings[:0] = notes
        _print_json(result.to_dict(), out)
        return Exit.OK
    out.write(f"Converted {result.source} -> {result.target}: ranks {ranges_text(result.ranks)}, iterations "
              f"{ranges_text(result.iterations)}, {result.graphs} graph(s), {result.tensors} tensor(s), "
              f"{human_bytes(result.bytes_read)} read; {'statistics only' if result.statistics_only else 'values and statistics'}\n")
    for w in result.warnings[:20]:
        out.write(f"  warning: {w}\n")
    return Exit.OK


def _print_scan(result: Any, out: TextIO) -> None:
    out.write(f"Scanned {result.dump}: ranks {ranges_text(result.ranks)}, iterations "
              f"{ranges_text(result.iterations)}, {len(result.watchpoints)} watchpoint(s)\n")
    from .watch.steps import describe_skipped

    for line in describe_skipped(result.skipped_steps):
        out.write(f"{line}\n")
    if not result.hits:
        out.write("No watchpoint hit.\n")
    else:
        f = result.first
        out.write(f"\nFirst problem: {f.watchpoint} at iteration {f.iteration}, rank {f.rank}: "
                  f"{_tensor_label(f)}  ({f.source or 'no user code line'})\n")
        groups: dict[str, list] = {}
        for h in result.hits:
            groups.setdefault(h.watchpoint, []).append(h)
        for name, hits in sorted(groups.items(), key=lambda kv: min(h.headline_key() for h in kv[1])):
            out.write(f"\n{name}: {len(hits)} hit(s), first at iteration {hits[0].iteration}\n")
            rows = []
            for h in hits[:50]:
                vs = "; ".join(f"{k} {fmt_num(v)} vs {fmt_num(h.threshold.get(k))}" if k in h.threshold
                               else f"{k} {fmt_num(v)}" for k, v in h.actual.items())
                rows.append([h.iteration, h.rank, _tensor_label(h), f"{h.io}{h.slot}", vs, h.source or "-"])
            out.write(table(rows, ["iter", "rank", "tensor", "io", "actual vs threshold", "code"]) + "\n")
            if len(hits) > 50:
                out.write(f"  ... {len(hits) - 50} more (see --json)\n")
    if result.errors:
        kinds: dict[str, int] = {}
        for e in result.errors:
            # "/path/file.npy: truncated ..." groups by the problem, not by the file
            problem = e.error.split(": ", 1)[1] if e.error.startswith("/") and ": " in e.error else e.error
            kinds[problem] = kinds.get(problem, 0) + 1
        out.write(f"\n{len(result.errors)} check(s) could not run:\n")
        for msg, n in sorted(kinds.items(), key=lambda kv: -kv[1])[:10]:
            out.write(f"  {n} x {msg}\n")
    for s in result.skipped:
        out.write(f"\nNot applicable: {s.watchpoint} skipped {s.checks} check(s): {s.reason} "
                  f"(e.g. {s.node}, iteration {s.iteration}, rank {s.rank})\n")


def _tensor_label(h: Any) -> str:
    if h.param and h.kind == "weight":
        return h.param
    if h.param:
        return f"{h.param} ({h.kind}, {h.op_type})"
    # The whole name: a name cut from the left loses the scope that tells MatMul-op0s apart.
    return h.node


# -- graph --------------------------------------------------------------------------------------
_GRAPH_EXTS = {".dot": "dot", ".gv": "dot", ".svg": "svg", ".png": "png"}


def cmd_graph(args: argparse.Namespace, out: TextIO) -> int:
    """Export one scope level of a graph, as the web view shows it, as DOT, SVG or PNG."""
    from .export import export_scope
    from .model import open_dump

    # -o x.svg says the format when --format does not
    fmt = args.format or _GRAPH_EXTS.get(os.path.splitext(args.output or "")[1].lower(), "dot")
    if fmt == "png" and not args.output:
        raise DumpError(None, "PNG is binary: give -o FILE")
    if args.fold < 0:
        raise DumpError(None, f"bad --fold {args.fold}: expected 0 (no folding) or more")
    dump = open_dump(args.dump)
    rank = dump.rank(args.rank if args.rank is not None else dump.rank_ids[0])
    gid = args.graph if args.graph is not None else (rank.graph_ids or [0])[0]
    report_warnings(args, rank.warnings)
    exp = export_scope(rank.graph(gid), args.scope, fmt, fold=args.fold, framework=args.framework,
                       rank=rank.rank)
    if not args.output:
        out.write(exp.data.decode("utf-8"))
        return Exit.OK
    if dump.holds(args.output):
        raise DumpError(args.output, f"is inside the dump {dump.root}; tdbg never writes there")
    try:
        with open(args.output, "wb") as f:
            f.write(exp.data)
    except OSError as exc:
        raise DumpError(args.output, f"cannot write ({exc.strerror})") from None
    out.write(f"wrote {args.output} ({fmt}, {human_bytes(len(exp.data))})\n")
    return Exit.OK


# -- serve --------------------------------------------------------------------------------------
def default_sample() -> str:
    """``./dumps_sample`` if present, else the sample next to this package's source tree."""
    here = os.path.join(os.getcwd(), "dumps_sample")
    if os.path.isdir(here):
        return here
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dumps_sample")


def cmd_serve(args: argparse.Namespace, out: TextIO) -> int:
    """Start the web UI."""
    from tdbg_web import create_app

    path = args.dump or default_sample()
    from .model import find_dump_roots

    find_dump_roots(path)  # fail early, with the path, when there is nothing to serve
    from .sourceroots import parse_entries

    parse_entries(args.source_root or [])   # a malformed OLD=NEW fails here, as usage
    cluster_workers(args)                     # and so does a malformed --scheduler (nothing connects yet)
    from tdbg_web.server import serve

    app = create_app(path, {"SOURCE_ROOTS": list(args.source_root or []), "ALLOWED_HOSTS": list(args.allow_host or []),
                            "CACHE_DIR": args.cache_dir, "STATS_CACHE": not args.no_cache,
                            "SCHEDULER": args.scheduler})
    host = f"[{args.host}]" if ":" in args.host else args.host
    out.write(f"tdbg serving {path} on http://{host}:{args.port}/\n")
    out.flush()
    serve(app, args.host, args.port, threads=args.threads, access_log=args.access_log)
    return Exit.OK


# -- source roots -----------------------------------------------------------------------------------
def source_roots(args: argparse.Namespace, dump_paths: Sequence[str]) -> Any:
    """The folders source files are looked up in: ``--source-root``, ``$TDBG_SOURCE_ROOTS``, the dump, and (the
    command line reads for its own user) the recorded path itself."""
    from .sourceroots import SourceRoots

    return SourceRoots(list(dump_paths), list(getattr(args, "source_root", None) or []), trust_recorded=True)


def _add_source_root(s: argparse.ArgumentParser) -> None:
    s.add_argument("--source-root", action="append", metavar="DIR|OLD=NEW",
                   help="where the recorded source files are on this machine (repeatable; also "
                        "$TDBG_SOURCE_ROOTS, os.pathsep-separated): DIR is searched for the longest "
                        "trailing part of a recorded path, OLD=NEW rewrites a recorded prefix")


def _add_cache(s: argparse.ArgumentParser) -> None:
    s.add_argument("--no-cache", action="store_true", help="neither read nor write the statistics cache")
    s.add_argument("--cache-dir", help="statistics cache folder (default: $TDBG_CACHE_DIR or ~/.cache/tdbg)")


# -- parser -------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command."""
    p = argparse.ArgumentParser(prog="tdbg", description="Offline debugger for training dumps.")
    p.add_argument("--debug", action="store_true",
                   help="print the traceback of an internal error (exit status 3), e.g. tdbg --debug scan DUMP")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("info", help="what a dump holds")
    s.add_argument("dump", help="dump root, one rank of it, or a folder holding dumps")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=cmd_info)

    s = sub.add_parser("node", help="one node: kind, inputs, outputs, source stack")
    s.add_argument("dump", help="dump root or one rank of it")
    s.add_argument("name", help="full name, file-name spelling, parameter name or name suffix")
    s.add_argument("--rank", type=int, help="rank (default: the first)")
    s.add_argument("--graph", type=int, help="graph id (default: every graph with that node)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    _add_source_root(s)
    s.set_defaults(func=cmd_node)

    s = sub.add_parser("code", help="the nodes a source line created")
    s.add_argument("dump", help="dump root or one rank of it")
    s.add_argument("location", help="FILE:LINE; FILE matches by path suffix (train.py:14)")
    s.add_argument("--rank", type=int, help="only this rank")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    _add_source_root(s)
    s.set_defaults(func=cmd_code)

    s = sub.add_parser("scan", help="run watchpoints; exit 1 on hits")
    s.add_argument("dump", nargs="?", help="dump root or one rank of it")
    s.add_argument("--watch", action="append", metavar="NAME[:param=value,...]", help="a watchpoint (repeatable)")
    s.add_argument("--preset", help="a preset of watchpoints (recommended)")
    s.add_argument("--config", help="JSON or YAML list of {name, params} watchpoints")
    s.add_argument("--ranks", help="ranks, e.g. 0-3,7 (default: all)")
    s.add_argument("--iterations", help="iterations, e.g. 0-5,8 (default: all)")
    s.add_argument("--where", metavar="FILE:LINE", help="only nodes created by this code line")
    s.add_argument("--node", help="only nodes or parameters matching this glob")
    s.add_argument("--scope", help="only nodes under this scope prefix")
    s.add_argument("--jobs", type=int, default=None, help="worker processes (default: all cores)")
    add_scheduler(s)
    s.add_argument("--json", action="store_true", help="machine-readable output")
    _add_cache(s)
    s.add_argument("--list-conditions", action="store_true", help="list the conditions and exit")
    s.set_defaults(func=cmd_scan)

    from .compare.command import add_parser as add_compare

    add_compare(sub)

    s = sub.add_parser("convert", help="any readable dump into tdbg's HDF5 format")
    s.add_argument("dump", help="dump root or one rank of it")
    s.add_argument("out", help="a new (or empty) folder for the converted dump")
    s.add_argument("--statistics", action="store_true",
                   help="keep statistics and an exact digest per tensor instead of values (~100x smaller)")
    s.add_argument("--ranks", help="ranks, e.g. 0-3,7 (default: all)")
    s.add_argument("--iterations", help="iterations, e.g. 0-5,8 (default: all)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    add_scheduler(s)
    s.set_defaults(func=cmd_convert)

    s = sub.add_parser("graph", help="export one scope level of a graph (DOT, SVG, PNG)")
    s.add_argument("dump", help="dump root or one rank of it")
    s.add_argument("--rank", type=int, help="rank (default: the first)")
    s.add_argument("--graph", type=int, help="graph id (default: the first)")
    s.add_argument("--scope", default="", metavar="PATH",
                   help="scope or folded group, as the graph view names it (default: the root)")
    s.add_argument("--format", choices=["dot", "svg", "png"],
                   help="dot (text), svg or png (these two need Graphviz); default: from -o, else dot")
    s.add_argument("--fold", type=int, default=FOLD, metavar="N",
                   help=f"fold N or more same-type siblings into one node (0: never; default {FOLD})")
    s.add_argument("--framework", action="store_true", help="show routing nodes (those that only pass values on)")
    s.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout; PNG needs a file)")
    s.set_defaults(func=cmd_graph)

    s = sub.add_parser("serve", help="the web UI")
    s.add_argument("dump", nargs="?", help="dump or folder of dumps (default: dumps_sample/)")
    s.add_argument("--host", default="127.0.0.1", help="interface (default: loopback only)")
    s.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    s.add_argument("--allow-host", action="append", metavar="NAME",
                   help="also answer requests for this host name (repeatable; default: only the bound "
                        "host, and localhost, 127.0.0.1, [::1] when bound to loopback)")
    s.add_argument("--threads", type=int, default=8, help="request threads (default 8)")
    s.add_argument("--access-log", action="store_true", help="log every request on stderr (default: quiet)")
    add_scheduler(s)
    _add_source_root(s)
    _add_cache(s)
    s.set_defaults(func=cmd_serve)
    return p


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run tdbg; returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0) and Exit.USAGE
    args.err = err
    func: Callable[[argparse.Namespace, TextIO], int] = args.func
    try:
        if func is cmd_serve:
            return int(func(args, out))
        with paused_gc():   # a command allocates many acyclic records, then exits: no collector passes over them
            code = int(func(args, out))
            if argv is None:
                # The tdbg command itself, about to exit: the collector's last passes over every record
                # of the dump would cost 0.1-0.2 s on a 50,000-file dump and free nothing the exit does not.
                # Frozen before the collector is enabled again, else that first young pass still runs.
                gc.freeze()
        return code
    except DumpError as exc:
        err.write(f"tdbg: error: {exc}\n")
        return Exit.USAGE
    except KeyboardInterrupt:
        err.write("tdbg: interrupted\n")
        return Exit.INTERRUPTED
    except BrokenPipeError:
        return Exit.OK
    except Exception as exc:  # a bug, not the user's: its own status, one line, the file it was reading
        where = _path_being_read(exc) or _dump_argument(args)
        err.write(f"tdbg: internal error{' while reading ' + _one_line(where) if where else ''}: "
                  f"{type(exc).__name__}: {_one_line(str(exc))}"
                  f"{'' if args.debug else ' (run with --debug for the traceback)'}\n")
        if args.debug:
            traceback.print_exception(type(exc), exc, exc.__traceback__, file=err)
        return Exit.INTERNAL


def _path_being_read(exc: BaseException) -> str | None:
    """The innermost ``path`` a frame of the traceback was working on (str locals named path/location)."""
    tb = exc.__traceback__
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        for name in ("path", "location", "root"):
            v = frame.f_locals.get(name)
            # only an absolute path: a local named path can also be a scope path inside a graph
            if isinstance(v, str) and os.path.isabs(v):
                return v
    return None


def _dump_argument(args: argparse.Namespace) -> str | None:
    """The dump the command was given, when no frame names a file (the message names at least that)."""
    dump = getattr(args, "dump", None)
    dump = dump[0] if isinstance(dump, list) and dump else dump
    return os.path.abspath(dump) if isinstance(dump, str) else None


def _one_line(text: str, limit: int = 400) -> str:
    """``text`` on one line, clipped: the message of an internal error stays one readable line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 3] + "..."


def report_warnings(args: argparse.Namespace, warnings: Sequence[str], limit: int = 20) -> None:
    """A dump's load problems on stderr (every command shows them; ``--json`` carries them too)."""
    err: TextIO = getattr(args, "err", sys.stderr)
    for w in warnings[:limit]:
        err.write(f"tdbg: warning: {w}\n")
    if len(warnings) > limit:
        err.write(f"tdbg: warning: ... {len(warnings) - limit} more\n")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
