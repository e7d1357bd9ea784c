"""Cost of level "ops" on a compiled model: the operators of the compiled program (backend "tdbg",
debugger.torch.graphtaps; the results the program stores, or with --operators all every operator)
recorded every step, against the same compiled step unrecorded; beside it "parameters" every step
(what "ops" records besides the operators), the eager alternative (compiled_ops="eager": every ATen operator, the model run eagerly) and the
compilation time of the "tdbg" backend (two Inductor builds per graph) against Inductor's.

The model and step are bench_compiled_recorder.py's (GPT-2 from a config, bf16 autocast, AdamW, CPU).
One process, rounds of a plain block and one block per mode, K steps each; a recorded block opens its
Recorder before its first step and waits for its files inside its last.

    python benchmarks/bench_compiled_ops.py [--rounds 4] [--block 6] [--operators stored|all]
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import torch  # noqa: E402

from bench_compiled_recorder import build, step  # noqa: E402
from debugger.torch import tdbg_backend  # noqa: E402

MODES = {"parameters": {"level": "parameters"}, "ops (compiled program)": {},
         "ops (compiled_ops=\"eager\")": {"compiled_ops": "eager"}}


def compile_seconds(backend: str) -> float:
    """Seconds of the first compiled step (forward and backward compiled) with a fresh Dynamo."""
    torch._dynamo.reset()
    model, _, opt, ids = build(False)
    run = torch.compile(model, backend=backend)
    t0 = time.perf_counter()
    step(run, opt, ids, [])
    return time.perf_counter() - t0


def block(mode: str | None, k: int, run: Any, opt: Any, ids: Any, out: str) -> float:
    """Seconds per step of ``k`` steps, recorded every step as ``mode`` says (None: plain)."""
    from debugger.torch import Recorder
    rec = None if mode is None else Recorder(out, run, opt, save="statistics", **{"level": "ops", **MODES[mode]}).start()
    try:
        t0 = time.perf_counter()
        for _ in range(k):
            step(run, opt, ids, [])
            if rec is not None:
                rec.step()
        if rec is not None:
            rec.flush()
        return (time.perf_counter() - t0) / k
    finally:
        if rec is not None:
            rec.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--block", type=int, default=6, help="steps per block")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--operators", choices=("stored", "all"), default="stored",
                    help="the backend's taps: what the program stores (default) or every operator")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    warnings.simplefilter("ignore")
    torch._inductor.config.fx_graph_cache = False       # compile times without the disk cache
    res: dict[str, Any] = {"compile_s": {b: round(compile_seconds(b), 1) for b in ("inductor", "tdbg")}}
    torch._dynamo.reset()
    model, _, opt, ids = build(False)
    # one compiled wrapper per process (two around one model would share Dynamo's cache entries)
    run = torch.compile(model, backend=functools.partial(tdbg_backend, operators=a.operators))
    tmp = tempfile.mkdtemp(prefix="tdbg-bench-")
    times: dict[str | None, list[float]] = {m: [] for m in (None, *MODES)}
    try:
        for m in (None, *MODES):      # warm-up: compilation, Adam's state, the first files
            block(m, 2, run, opt, ids, os.path.join(tmp, f"w-{len(times[m])}-{m}"))
        for r in range(a.rounds):
            for m in (None, *MODES):
                out = os.path.join(tmp, f"{r}-{list(MODES).index(m) if m else 'plain'}")
                times[m].append(block(m, a.block, run, opt, ids, out))
                shutil.rmtree(out, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    plain = statistics.median(times[None])
    res["plain_ms"] = round(plain * 1e3, 2)
    for m in MODES:
        res[m] = {"ratio": round(statistics.median(t / p for t, p in zip(times[m], times[None])), 3),
                  "extra_ms": round((statistics.median(times[m]) - plain) * 1e3, 2)}
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
