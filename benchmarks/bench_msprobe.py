"""msprobe dumps: `tdbg compare` against `msprobe compare` on the same pair, and scan speed on a
statistics-only msprobe dump of 100,000 tensors.

    python benchmarks/bench_msprobe.py [--msprobe /work/msprobe_env/bin/msprobe] [--tensors 100000] [--keep]

1. The committed pair dumps_sample/msprobe/pair_perturbed (block.0.weight off by noise of 0.2 x its
   std) and pair_baseline (the same script, seeds and data), 2 steps each, task tensor, level mix.
   tdbg: one `tdbg compare A B --json --no-cache` process for both steps. msprobe: `msprobe compare
   -tp A/stepN -gp B/stepN` per step (it takes one step folder), then the same with `-da` (its
   first-divergence analysis). Wall times of whole processes, side by side in this run (median of 3);
   the answers: tdbg's first divergence, msprobe's grades of the perturbed weight's row and what -da
   names.
2. A generated statistics-only dump in msprobe's real layout (step{N}/rank0/{dump.json,
   construct.json, stack.json}, task statistics, level mix): an MLP of L Linear+ReLU layers, every
   op, module, parameter, gradient and SGD update as msprobe writes them, ~30 tensors per layer and
   step, a NaN planted at one layer's linear output in one step. Times `tdbg info` and `tdbg scan
   --watch overflow --watch tensor_too_large:max_gt=100` (fresh processes), and reports tensors/s
   and whether the scan names the planted origin.
Prints a JSON report; deletes the generated data unless --keep.
"""
from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from _util import ROOT

SAMPLES = os.path.join(ROOT, "dumps_sample", "msprobe")
TDBG = [sys.executable, "-m", "debugger.cli"]


def _timed(cmd: list[str], cwd: str | None = None) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    return time.perf_counter() - t0, p


def _median(cmd: list[str], n: int = 3, cwd: str | None = None) -> tuple[float, subprocess.CompletedProcess]:
    runs = [_timed(cmd, cwd) for _ in range(n)]
    return statistics.median(t for t, _ in runs), runs[-1][1]


def _head(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read(600)


def bench_compare(msprobe: str) -> dict:
    """tdbg compare vs msprobe compare (and -da) on the perturbed pair."""
    a, b = os.path.join(SAMPLES, "pair_perturbed"), os.path.join(SAMPLES, "pair_baseline")
    t_tdbg, p = _median(TDBG + ["compare", a, b, "--json", "--no-cache"])
    res = json.loads(p.stdout)
    fd = res["first_divergence"]
    out: dict = {"tdbg": {"seconds_both_steps": round(t_tdbg, 3), "exit": p.returncode,
                          "first_divergence": {k: fd[k] for k in ("iteration", "node", "io", "slot", "kind", "param",
                                                                  "grade", "source")} if fd else None,
                          "cosine": fd["metrics"]["cosine"] if fd else None,
                          "errors": res["summary"]["error"], "pairs": res["summary"]["pairs"]}}
    if not os.path.exists(msprobe):
        out["msprobe"] = f"not run: {msprobe} not found"
        return out
    work = tempfile.mkdtemp(prefix="bench_msprobe_cmp_")
    try:
        steps = {}
        for step in ("step0", "step1"):
            o = os.path.join(work, step)
            t, _ = _median([msprobe, "compare", "-tp", f"{a}/{step}", "-gp", f"{b}/{step}", "-o", o])
            rows = list(csv.DictReader(open(sorted(glob.glob(os.path.join(o, "*.csv")))[-1], encoding="utf-8")))
            grades: dict[str, int] = {}
            for r in rows:
                grades[r["Result"]] = grades.get(r["Result"], 0) + 1
            weight = next((r for r in rows if r["NPU Name"] == "Functional.linear.1.forward.input.1"), None)
            # -da analyses a compare result already in the output folder (msprobe's documented order)
            t_da, p_da = _timed([msprobe, "compare", "-tp", f"{a}/{step}", "-gp", f"{b}/{step}", "-o", o, "-da"])
            log = p_da.stdout + p_da.stderr
            found = [f for f in glob.glob(os.path.join(o, "**", "*"), recursive=True)
                     if os.path.isfile(f) and not f.endswith(".csv")]
            da = "named nothing ('Cannot find any diff node')" if "Cannot find any diff node" in log else \
                {os.path.basename(f): _head(f) for f in found} or log[-300:]
            errs = [r["NPU Name"] for r in rows if r["Result"] not in ("pass", "Pass")]
            steps[step] = {"seconds": round(t, 3), "seconds_with_da": round(t_da, 3), "grades": grades,
                           "non_pass_rows": errs[:5],
                           "perturbed_weight_row": {"cosine": float(weight["Cosine"]), "result": weight["Result"]}
                           if weight else None, "diff_analyze": da}
        out["msprobe"] = {"per_step": steps,
                          "seconds_both_steps": round(sum(s["seconds"] for s in steps.values()), 3)}
        out["speedup_tdbg_vs_msprobe"] = round(out["msprobe"]["seconds_both_steps"] / t_tdbg, 2)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


# -- a generated statistics-only dump ------------------------------------------------------------
def _t(shape: list[int], mx: float, mn: float, mean: float, norm: float, rg: bool = True) -> dict:
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": shape, "Max": mx, "Min": mn, "Mean": mean,
            "Norm": norm, "requires_grad": rg}


def _stats(seed: int, scale: float = 1.0) -> tuple[float, float, float, float]:
    x = ((seed * 2654435761) % 1000) / 1000.0
    return (scale * (1 + x), -scale * (1 + x / 2), scale * (x - 0.5) / 10, scale * (5 + x))


def make_stats_dump(root: str, layers: int, steps: int, nan: tuple[int, int]) -> int:
    """Write the dump; returns the number of tensor entries."""
    count = 0
    width, batch = 64, 8
    for s in range(steps):
        d = os.path.join(root, f"step{s}", "rank0")
        os.makedirs(d)
        data: dict = {}
        construct: dict = {}
        fwd_keys = []
        poisoned = False
        x = _t([batch, width], *_stats(3 + s), rg=False)
        for i in range(layers):
            mod, act = f"Module.layers.{i}.Linear.forward.0", f"Module.acts.{i}.ReLU.forward.0"
            lin, relu = f"Functional.linear.{i}.forward", f"Functional.relu.{i}.forward"
            w, bias = _t([width, width], *_stats(i * 7 + 1, 0.1)), _t([width], *_stats(i * 7 + 2, 0.1))
            y = _t([batch, width], *_stats(i * 7 + 4 + s))
            if poisoned or (s, i) == nan:
                y = _t([batch, width], float("nan"), float("nan"), float("nan"), float("nan"))
                poisoned = True
            r = _t([batch, width], y["Max"], 0.0, abs(y["Mean"]), y["Norm"] / 2)
            data[lin] = {"input_args": [x, w, bias], "input_kwargs": {}, "output": [y]}
            data[mod] = {"input_args": [x], "input_kwargs": {}, "output": [y], "parameters": {"weight": w, "bias": bias}}
            data[relu] = {"input_args": [y], "input_kwargs": {"inplace": {"type": "bool", "value": False}}, "output": [r]}
            data[act] = {"input_args": [y], "input_kwargs": {}, "output": [r], "parameters": {}}
            construct.update({lin: mod, mod: None, relu: act, act: None})
            fwd_keys += [mod, act, lin, relu]
            x = r   # the next layer reads this one's output
            count += 4 + 4 + 2 + 2
        construct["optimizer"] = None
        for i in reversed(range(layers)):
            g = _t([batch, width], *_stats(i * 11 + s, 0.01), rg=False)
            gw, gb = _t([width, width], *_stats(i * 13 + s, 0.01), rg=False), _t([width], *_stats(i * 17 + s, 0.01), rg=False)
            data[f"Functional.relu.{i}.backward"] = {"input": [g], "output": [g]}
            data[f"Module.acts.{i}.ReLU.backward.0"] = {"input": [g], "output": [g]}
            data[f"Functional.linear.{i}.backward"] = {"input": [g], "output": [gb, g, gw]}
            data[f"Module.layers.{i}.Linear.backward.0"] = {"input": [g], "output": [g]}
            data[f"Module.layers.{i}.Linear.parameters_grad.0"] = {"weight": [gw], "bias": [gb]}
            construct[f"Functional.relu.{i}.backward"] = f"Module.acts.{i}.ReLU.backward.0"
            construct[f"Functional.linear.{i}.backward"] = f"Module.layers.{i}.Linear.backward.0"
            count += 2 + 2 + 4 + 2 + 2
        for i in range(layers):
            for j, (p, g) in enumerate(((data[f"Module.layers.{i}.Linear.forward.0"]["parameters"]["weight"],
                                         data[f"Module.layers.{i}.Linear.parameters_grad.0"]["weight"][0]),
                                        (data[f"Module.layers.{i}.Linear.forward.0"]["parameters"]["bias"],
                                         data[f"Module.layers.{i}.Linear.parameters_grad.0"]["bias"][0]))):
                k = f"Tensor.add_.{2 * i + j}.forward"
                data[k] = {"input_args": [p, g], "input_kwargs": {"alpha": {"type": "float", "value": -0.1}},
                           "output": [_t(p["shape"], *_stats(i * 19 + j + s + 1, 0.1))]}
                construct[k] = "optimizer"
                count += 3
        stack = {"0": [fwd_keys, ["File /bench/train.py, line 20, in forward, \n x = layer(x)",
                                  "File /bench/train.py, line 40, in <module>, \n loss = model(x)"]]}
        with open(os.path.join(d, "dump.json"), "w") as f:
            json.dump({"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": None,
                       "data": data}, f)
        with open(os.path.join(d, "construct.json"), "w") as f:
            json.dump(construct, f)
        with open(os.path.join(d, "stack.json"), "w") as f:
            json.dump(stack, f)
    return count


def bench_scan(tensors: int, keep: bool) -> dict:
    """info and scan on a generated statistics-only dump of about ``tensors`` tensors."""
    steps = 10
    layers = max(1, round(tensors / steps / 30))
    nan = (7, layers // 2)
    root = tempfile.mkdtemp(prefix="bench_msprobe_stats_")
    try:
        t0 = time.perf_counter()
        n = make_stats_dump(root, layers, steps, nan)
        gen = time.perf_counter() - t0
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)
        t_info, p_info = _timed(TDBG + ["info", root, "--json"])
        info = json.loads(p_info.stdout)
        watches = ["--watch", "overflow", "--watch", "tensor_too_large:max_gt=100"]
        t_scan, p_scan = _timed(TDBG + ["scan", root, *watches, "--json", "--no-cache"])
        scan = json.loads(p_scan.stdout)
        first = next((h for h in scan["hits"] if h["watchpoint"] == "overflow"), None)
        return {"tensors": n, "steps": steps, "layers": layers, "dump_json_mb": round(size / 2**20, 1),
                "generate_seconds": round(gen, 2), "info_seconds": round(t_info, 2),
                "nodes": sum(info["ranks"][0]["nodes_by_kind"].values()),
                "scan_seconds": round(t_scan, 2), "scan_tensors_per_s": round(n / t_scan),
                "scan_checks_errors": len(scan["errors"]), "hits": len(scan["hits"]),
                "planted_nan": f"step {nan[0]} Functional.linear.{nan[1]}.forward output 0",
                "overflow_first_hit": f"step {first['iteration']} {first['node']} {first['io']} {first['slot']}"
                if first else None, "root": root if keep else None}
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    """Run both parts and print the report."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--msprobe", default="/work/msprobe_env/bin/msprobe")
    ap.add_argument("--tensors", type=int, default=100_000)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    report = {"compare": bench_compare(args.msprobe), "scan_statistics_only": bench_scan(args.tensors, args.keep)}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
