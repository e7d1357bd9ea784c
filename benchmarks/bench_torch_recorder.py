"""Cost of debugger.torch.Recorder per training step, per level, beside the dispatch floors and msprobe.

One invocation, models x modes; each (model, mode) runs in its own fresh process (benchmarks/_models.py:
same seed, torch.set_num_threads(2), OMP_NUM_THREADS=2), where plain steps and mode steps alternate
(plain, mode, plain, mode ...) so both halves of a pair see the same machine load. A recorded step
includes waiting for its iteration's file (rec.flush() inside the timed step). Default: 3 warm-up
pairs, then 9 measured pairs (the median of steps 4-12).

    python benchmarks/bench_torch_recorder.py [--models gpt2,resnet18-b8,resnet18-b32,llama]
        [--modes plain,floor:dispatch,...] [--steps 9] [--warmup 3] [--baseline OLD_CHECKOUT]
        [--msprobe /work/msprobe_env/bin/python] [--pairs] [--markdown] [--json FILE] [--timeout S]

Modes: plain (plain vs plain: the noise floor); floor:dispatch (a TorchDispatchMode that only runs
the op; gives ops per step); floor:stats (it also reads every floating output once with the
compiled statistics kernel); floor:parameters (no dispatch mode: every weight, gradient and
optimizer state tensor read once a step with that kernel, what level "parameters" cannot do without);
floor:modules (a global module hook and tensor hooks reading each call's outputs and their gradients
once, plus floor:parameters' reads: what level "modules" cannot do without);
ops, modules, parameters (Recorder save="statistics", level=...); ops:steady, parameters:steady
(blocks of 3 recorded steps and 3 plain ones alternate; a recorded block waits for its files at its
end, so the writer thread overlaps the next step, as in a run that records every step);
before:ops (the Recorder of --baseline DIR, e.g. `git archive 374b461 | tar -x -C DIR`);
msprobe:L0, msprobe:L1, msprobe:mix (PrecisionDebugger, task statistics, with its Python).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = ["gpt2", "resnet18-b8", "resnet18-b32", "llama"]
MODES = ["plain", "floor:dispatch", "floor:stats", "floor:parameters", "floor:modules", "ops", "modules", "parameters",
         "ops:steady", "parameters:steady", "before:ops",
         "msprobe:L0", "msprobe:L1", "msprobe:mix"]
# msprobe's level beside tdbg's comparable level
COMPARABLE = {"msprobe:L0": "modules", "msprobe:L1": "ops", "msprobe:mix": "ops"}


def du(path: str) -> int:
    """Bytes of the files under ``path``."""
    return sum(os.path.getsize(os.path.join(d, n)) for d, _, ns in os.walk(path) for n in ns)


def run_one(model: str, mode: str, a: argparse.Namespace) -> dict:
    """One (model, mode) in a fresh process: its measured pairs and dump size, or its error line."""
    python = a.msprobe if mode.startswith("msprobe:") else sys.executable
    tmp = tempfile.mkdtemp(prefix="tdbg-bench-")
    cfg = {"model": model, "mode": mode, "steps": a.steps, "warmup": a.warmup, "root": ROOT,
           "out": os.path.join(tmp, "dump"), "baseline": a.baseline}
    env = dict(os.environ, OMP_NUM_THREADS="2")
    try:
        p = subprocess.run([python, os.path.join(HERE, "_models.py"), json.dumps(cfg)], capture_output=True,
                           text=True, env=env, timeout=a.timeout)
        size = du(tmp)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {a.timeout} s"}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return {**json.loads(line[7:]), "bytes": size}
        if line.startswith("ERROR "):
            return {"error": line[6:]}
    text = (p.stderr or p.stdout).strip()
    return {"error": text.splitlines()[-1] if text else f"exit {p.returncode}"}


def summarize(res: dict, ops: float | None) -> dict:
    """Medians of plain and mode steps, of per-pair ratios and overheads; us per op when known."""
    pairs = list(zip(res["plain"], res["mode"]))
    over = statistics.median(m - p for p, m in pairs)
    return {"plain_ms": 1e3 * statistics.median(res["plain"]), "mode_ms": 1e3 * statistics.median(res["mode"]),
            "ratio": statistics.median(m / p for p, m in pairs), "overhead_ms": 1e3 * over,
            "us_per_op": 1e6 * over / ops if ops else None, "dump_mib": res.get("bytes", 0) / 2**20}


def row(mode: str, s: dict) -> str:
    """One printed table line."""
    uso = f"{s['us_per_op']:7.1f}" if s["us_per_op"] is not None else f"{'':7s}"
    return (f"  {mode:16s} {s['plain_ms']:9.1f} {s['mode_ms']:9.1f} {s['ratio']:6.2f}x "
            f"{s['overhead_ms']:+10.1f} {uso} {s['dump_mib']:9.2f}")


def bench_model(model: str, modes: list[str], a: argparse.Namespace, quiet: bool) -> dict:
    """Every mode on one model; prints its table unless ``quiet``."""
    out: dict = {}
    ops = None
    say = (lambda *x: None) if quiet else print
    say(f"\n{model}: {a.warmup} warm-up + {a.steps} measured pairs per mode; load {os.getloadavg()[0]:.1f}")
    say(f"  {'mode':16s} {'plain ms':>9s} {'mode ms':>9s} {'ratio':>7s} {'overhead ms':>10s} {'us/op':>7s} {'dump MiB':>9s}")
    for mode in modes:
        res = run_one(model, mode, a)
        if "error" in res:
            out[mode] = {"error": res["error"]}
            na = "n/a (" in res["error"]
            say(f"  {mode:16s} {'n/a' if na else 'failed'}: {res['error'].split(': ', 1)[-1] if na else res['error']}", flush=True)
            continue
        if mode == "floor:dispatch":
            ops = res.get("ops")
        dispatch_based = mode in ("floor:dispatch", "floor:stats", "ops:steady") or mode in ("ops", "before:ops", "msprobe:L1", "msprobe:mix")
        s = summarize(res, ops if dispatch_based else None)
        out[mode] = {**s, **{k: res[k] for k in ("plain", "mode", "ops", "note") if k in res}}
        say(row(mode, s), flush=True)
        if "ops" in res:
            say(f"      ATen ops per step: {res['ops']:.0f}")
        if "note" in res:
            say(f"      {res['note']}")
        if "plain" in out and s["plain_ms"] > 1.5 * out["plain"]["plain_ms"]:
            say(f"      its plain steps are {s['plain_ms'] / out['plain']['plain_ms']:.1f}x the plain row's: "
                "what it installs stays active between its steps (the ratio understates its cost)")
        if mode.startswith("msprobe:") and not res.get("bytes"):
            say("      WARNING: msprobe wrote nothing: this row measures no dump")
        if a.pairs:
            say("      pairs ms (plain, mode): " + ", ".join(f"({1e3 * p:.1f}, {1e3 * m:.1f})"
                                                         for p, m in zip(res["plain"], res["mode"])))
    return out


def markdown(table: dict) -> str:
    """The README table: one line per (model, mode)."""
    lines = ["| model | mode | plain ms | mode ms | ratio | overhead ms | us/op | dump MiB |",
             "|---|---|---|---|---|---|---|---|"]
    for model, modes in table.items():
        for mode, s in modes.items():
            if "error" in s:
                note = s["error"].split(": ", 1)[-1] if "n/a (" in s["error"] else "failed: " + s["error"]
                lines.append(f"| {model} | {mode} | | | {note} | | | |")
                continue
            uso = f"{s['us_per_op']:.0f}" if s["us_per_op"] is not None else ""
            lines.append(f"| {model} | {mode} | {s['plain_ms']:.1f} | {s['mode_ms']:.1f} | {s['ratio']:.2f}x "
                         f"| {s['overhead_ms']:.1f} | {uso} | {s['dump_mib']:.2f} |")
    return "\n".join(lines)


def msprobe_ratios(table: dict) -> list[str]:
    """msprobe's overhead over each tdbg level's comparable level, per model."""
    lines = []
    for model, modes in table.items():
        for ms, ours in COMPARABLE.items():
            a, b = modes.get(ms, {}), modes.get(ours, {})
            if "overhead_ms" in a and "overhead_ms" in b and b["overhead_ms"] > 0:
                lines.append(f"  {model}: overhead {ms} / {ours} = {a['overhead_ms'] / b['overhead_ms']:.1f}x")
    return lines


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--modes", default="", help="comma-separated subset of " + ",".join(MODES))
    ap.add_argument("--steps", type=int, default=9, help="measured pairs (default 9)")
    ap.add_argument("--warmup", type=int, default=3, help="warm-up pairs (default 3)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per (model, mode) process")
    ap.add_argument("--msprobe", default="/work/msprobe_env/bin/python", help="a Python with msprobe")
    ap.add_argument("--baseline", help="another tdbg checkout: its Recorder is the before:ops column")
    ap.add_argument("--pairs", action="store_true", help="print every measured (plain, mode) pair")
    ap.add_argument("--markdown", action="store_true", help="print only the markdown table")
    ap.add_argument("--json", help="write every number to this file")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run every (model, mode) and print the tables."""
    a = parse(argv)
    modes = [m for m in (a.modes.split(",") if a.modes else MODES) if m in MODES]
    if not a.baseline:
        modes = [m for m in modes if not m.startswith("before:")]
    if not os.path.exists(a.msprobe):
        modes = [m for m in modes if not m.startswith("msprobe:")]
    t0 = time.perf_counter()
    table = {m: bench_model(m, modes, a, a.markdown) for m in a.models.split(",")}
    wall = time.perf_counter() - t0
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"table": table, "wall_s": wall, "steps": a.steps, "warmup": a.warmup}, f, indent=1)
    if not a.markdown:
        print("\n" + "\n".join(msprobe_ratios(table)))
        print(f"\nwall time {wall:.0f} s\n")
    print(markdown(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
