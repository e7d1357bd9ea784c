"""Cost of debugger.torch.Recorder at the levels a long run keeps on ("parameters" every step, the
per-step series, both) on GPT-2, eager and under torch.compile, against the same plain step.

The model is the recording benchmark's GPT-2 (benchmarks/_models.py: 2 layers, width 64, vocabulary
1,000, batch 4 x 32 tokens, bf16 autocast, AdamW), built by transformers from a config. One process:
a warm-up (compilation included), then rounds of a plain block and one block per mode, K steps each,
so every mode sees the same machine load; a recorded block opens its Recorder before its first step
and waits for its files (rec.flush()) inside its last, so the writer's work is in the figure. Also:
the floor (every weight, gradient and optimizer state read once a step with the statistics kernel)
and the optimizer step's own time, against which the overhead is given as a multiple.

    python benchmarks/bench_compiled_recorder.py [--compile both|eager|compiled] [--rounds 6] [--block 8]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import torch  # noqa: E402

MODES = ("parameters", "series", "parameters+series", "floor")


def build(compiled: bool) -> tuple[torch.nn.Module, torch.nn.Module, torch.optim.Optimizer, torch.Tensor]:
    """The model, what the step calls (compiled or not), AdamW, and the batch."""
    import transformers
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_layer=2, n_embd=64, n_head=2, vocab_size=1000, n_positions=32, bos_token_id=0, eos_token_id=0))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 1000, (4, 32), generator=torch.Generator().manual_seed(1))
    return model, (torch.compile(model) if compiled else model), opt, ids


def step(run: torch.nn.Module, opt: torch.optim.Optimizer, ids: torch.Tensor, optimizer_s: list[float]) -> None:
    """One training step: bf16 forward and loss, zero_grad, backward, the optimizer (timed apart)."""
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = run(input_ids=ids, labels=ids).loss
    opt.zero_grad()
    loss.backward()
    t0 = time.perf_counter()
    opt.step()
    optimizer_s.append(time.perf_counter() - t0)


def recorder(mode: str, model: torch.nn.Module, run: torch.nn.Module, opt: torch.optim.Optimizer,
             out: str) -> Any:
    """The Recorder of a mode (statistics), not started."""
    from debugger.torch import Recorder
    deep = mode.startswith("parameters")
    return Recorder(out, run, opt, save="statistics", level="parameters", iterations=None if deep else (),
                    series="series" in mode)


def floor_reader(model: torch.nn.Module, opt: torch.optim.Optimizer) -> Callable[[], None]:
    """Every weight, gradient and optimizer state tensor read once with the statistics kernel."""
    from _models import _read_parameters, _reader
    read = _reader({"root": os.path.dirname(HERE)})
    return lambda: _read_parameters(model, opt, read)


def block(mode: str, k: int, model: torch.nn.Module, run: torch.nn.Module, opt: torch.optim.Optimizer,
          ids: torch.Tensor, out: str, optimizer_s: list[float]) -> float:
    """Seconds per step of ``k`` steps in ``mode`` ("plain", a recorder mode, "floor")."""
    sink: list[float] = []
    if mode in ("plain", "floor"):
        after = floor_reader(model, opt) if mode == "floor" else (lambda: None)
        t0 = time.perf_counter()
        for _ in range(k):
            step(run, opt, ids, optimizer_s if mode == "plain" else sink)
            after()
        return (time.perf_counter() - t0) / k
    rec = recorder(mode, model, run, opt, out)
    rec.start()
    try:
        t0 = time.perf_counter()
        for _ in range(k):
            step(run, opt, ids, sink)
            rec.step()
        rec.flush()
        return (time.perf_counter() - t0) / k
    finally:
        rec.close()


def bench(compiled: bool, a: argparse.Namespace) -> dict[str, Any]:
    """Rounds of plain and mode blocks; medians, ratios (pair by pair) and the optimizer step."""
    model, run, opt, ids = build(compiled)
    optimizer_s: list[float] = []
    tmp = tempfile.mkdtemp(prefix="tdbg-bench-")
    times: dict[str, list[float]] = {m: [] for m in ("plain", *MODES)}
    try:
        for m in ("plain", *MODES):      # warm-up: compilation, Adam's state, numba, the first files
            block(m, 3, model, run, opt, ids, os.path.join(tmp, f"w-{m}"), [])
        for r in range(a.rounds):
            for m in ("plain", *MODES):
                out = os.path.join(tmp, f"{r}-{m.replace('+', '-')}")
                times[m].append(block(m, a.block, model, run, opt, ids, out, optimizer_s))
                shutil.rmtree(out, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    plain = statistics.median(times["plain"])
    opt_ms = statistics.median(optimizer_s) * 1e3
    res: dict[str, Any] = {"plain_ms": round(plain * 1e3, 2), "optimizer_step_ms": round(opt_ms, 2)}
    for m in MODES:
        ratio = statistics.median(t / p for t, p in zip(times[m], times["plain"]))
        extra = (statistics.median(times[m]) - plain) * 1e3
        res[m] = {"ratio": round(ratio, 3), "extra_ms": round(extra, 2),
                  "x_optimizer_step": round(extra / opt_ms, 2) if opt_ms else None}
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--compile", choices=("both", "eager", "compiled"), default="both")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--block", type=int, default=8, help="steps per block")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    warnings.simplefilter("ignore")
    kinds = {"both": (False, True), "eager": (False,), "compiled": (True,)}[a.compile]
    print(json.dumps({("compiled" if c else "eager"): bench(c, a) for c in kinds}, indent=1))


if __name__ == "__main__":
    main()
