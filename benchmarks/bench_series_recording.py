"""Cost of Recorder(series=True) on a real training loop: a GPT-2 from a transformers config trained with
AdamW on CPU, plain steps and series steps interleaved in one process (blocks of --steps, --rounds
rounds), with the time spent inside the series' own calls measured apart.

    python benchmarks/bench_series_recording.py [--layers 4 --width 256 --seq 128 --batch 8]
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

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from debugger.torch import Recorder  # noqa: E402
from debugger.torch import series as S  # noqa: E402


def build(args: argparse.Namespace):
    import transformers

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=args.layers, n_embd=args.width, n_head=max(1, args.width // 64),
                                  vocab_size=args.vocab, n_positions=args.seq)
    model = transformers.GPT2LMHeadModel(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return model, opt


def train(model, opt, ids, steps: int, rec=None, cpu: list[float] | None = None) -> list[float]:
    """Wall seconds of each step (and, into ``cpu``, the process's CPU seconds: all threads, the series'
    writer thread included; steadier than wall time on a shared machine)."""
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        c0 = time.process_time()
        opt.zero_grad(set_to_none=True)
        model(ids, labels=ids).loss.backward()
        opt.step()
        if rec is not None:
            rec.step()
        times.append(time.perf_counter() - t0)
        if cpu is not None:
            cpu.append(time.process_time() - c0)
    return times


class Timed:
    """Seconds spent inside the series' own calls (wraps SeriesCapture's methods)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        for name in ("on_backward", "on_optimizer_step", "end_step"):
            orig = getattr(S.SeriesCapture, name)
            setattr(S.SeriesCapture, name, self._wrap(orig))

    def _wrap(self, fn):
        def timed(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.seconds += time.perf_counter() - t0
        return timed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: steadier on a shared machine)")
    ap.add_argument("--out", default="/work/bench_data/rec")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model, opt = build(args)
    ids = torch.randint(0, args.vocab, (args.batch, args.seq), generator=torch.Generator().manual_seed(1))
    train(model, opt, ids, 3)       # warm-up (and Adam's state made)
    timed = Timed()
    plain: list[float] = []
    series: list[float] = []
    cpu: dict[str, list[float]] = {"plain": [], "series": [], "bare": []}
    bare: list[float] = []      # a Recorder that records nothing (series=False, iterations=()): its hooks' cost
    os.makedirs(args.out, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=args.out)
    try:
        for r in range(args.rounds):
            plain += train(model, opt, ids, args.steps, cpu=cpu["plain"])
            with Recorder(os.path.join(tmp, f"r{r}"), model, opt, series=True, iterations=()) as rec:
                series += train(model, opt, ids, args.steps, rec, cpu["series"])
            with Recorder(os.path.join(tmp, f"b{r}"), model, opt, series=False, iterations=()) as rec:
                bare += train(model, opt, ids, args.steps, rec, cpu["bare"])
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(tmp) for f in fs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    n_params = sum(p.numel() for p in model.parameters())
    p_med, s_med = statistics.median(plain), statistics.median(series)
    res = {"params": n_params, "tensors": len(list(model.parameters())), "plain_ms": round(p_med * 1e3, 1),
           "series_ms": round(s_med * 1e3, 1), "ratio_median": round(s_med / p_med, 3),
           "ratio_mean": round(statistics.mean(series) / statistics.mean(plain), 3),
           "cpu_ms": {k: round(statistics.median(v) * 1e3, 1) for k, v in cpu.items()},
           "cpu_ratio_series": round(statistics.median(cpu["series"]) / statistics.median(cpu["plain"]), 3),
           "bare_recorder_ms": round(statistics.median(bare) * 1e3, 1),
           "series_own_ms_per_step": round(timed.seconds / len(series) * 1e3, 2),
           "own_fraction_of_plain": round(timed.seconds / len(series) / p_med, 3),
           "bytes_written": size, "steps_each": len(plain), "torch_threads": torch.get_num_threads()}
    print(json.dumps(res))


if __name__ == "__main__":
    main()
