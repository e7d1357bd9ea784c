"""The worker of bench_torch_recorder.py: builds one model, runs one mode, prints ``RESULT {json}``.

Run by the benchmark as ``python benchmarks/_models.py CONFIG_JSON`` in a fresh process per
(model, mode). Models are built by their own libraries from configs (random weights, nothing
downloaded); data is made here. Nothing from ``debugger`` is imported at module level, so the
"before" column can import another checkout's package first.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import warnings
from typing import Any, Callable

import torch
import torch.nn.functional as F

Step = Callable[[], Any]


def _causal_lm(name: str) -> tuple[torch.nn.Module, torch.optim.Optimizer, Step]:
    """A 2-layer GPT-2 or Llama from transformers, batch 4 x 32 tokens, bf16 autocast, AdamW."""
    import transformers
    transformers.logging.set_verbosity_error()
    if name == "gpt2":
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
            n_layer=2, n_embd=64, n_head=2, vocab_size=1000, n_positions=32, bos_token_id=0, eos_token_id=0))
    else:
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
            hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
            num_key_value_heads=1, vocab_size=1000, max_position_embeddings=32,
            bos_token_id=0, eos_token_id=0, pad_token_id=0))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 1000, (4, 32))
    return model, opt, _step(opt, lambda: model(input_ids=ids, labels=ids).loss, bf16=True)


def _resnet(batch: int) -> tuple[torch.nn.Module, torch.optim.Optimizer, Step]:
    """torchvision ResNet-18 (10 classes), 32x32 images, SGD with momentum, cross entropy."""
    import torchvision
    model = torchvision.models.resnet18(num_classes=10)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))
    return model, opt, _step(opt, lambda: F.cross_entropy(model(x), y))


def _step(opt: torch.optim.Optimizer, loss_of: Callable[[], torch.Tensor], bf16: bool = False) -> Step:
    """One training step: the loss (under bf16 autocast when asked), zero_grad, backward, the optimizer."""
    def step() -> Any:
        with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext():
            loss = loss_of()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step


def build(name: str) -> tuple[torch.nn.Module, torch.optim.Optimizer, Step]:
    """Model, optimizer and one training step (forward, loss, zero_grad, backward, optimizer step)."""
    if name in ("gpt2", "llama"):
        return _causal_lm(name)
    if name.startswith("resnet18-b"):
        return _resnet(int(name.split("-b")[1]))
    raise ValueError(f"unknown model {name!r}")


def _alternate(n: int, step: Step, before: Callable[[int], Any] | None = None,
               after: Callable[[int], Any] | None = None) -> tuple[list[float], list[float]]:
    """2n steps, plain and mode alternating (odd steps are the mode's); seconds of each half."""
    plain: list[float] = []
    timed: list[float] = []
    for i in range(2 * n):
        t0 = time.perf_counter()
        if i % 2 and before:
            before(i)
        step()
        if after:
            after(i)
        (timed if i % 2 else plain).append(time.perf_counter() - t0)
    return plain, timed


def _floor(cfg: dict, step: Step, n: int) -> tuple[list[float], list[float], dict]:
    """A dispatch mode that only runs the op (floor:dispatch), or also reads every floating output
    once with the compiled statistics kernel (floor:stats); counts ops per mode step."""
    from torch.utils._python_dispatch import TorchDispatchMode
    sys.path.insert(0, cfg["root"])
    from debugger.stats.core import compiled_kernel
    kernel = compiled_kernel() if cfg["mode"] == "floor:stats" else None
    if cfg["mode"] == "floor:stats" and kernel is None:
        raise RuntimeError("no compiled statistics kernel (numba missing)")
    ints = {4: torch.int32, 8: torch.int64}
    count = [0]

    def read(t: torch.Tensor) -> None:
        t = t.detach()
        if t.dtype not in (torch.float32, torch.float64):
            t = t.float()
        a = t.contiguous().reshape(-1)
        kernel(a.numpy(), a.view(ints[a.element_size()]).numpy())

    class Floor(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            count[0] += 1
            if kernel is not None:
                with torch._C._DisableTorchDispatch():
                    for t in (out if isinstance(out, (tuple, list)) else (out,)):
                        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel():
                            read(t)
            return out

    def run(i: int) -> None:
        if i % 2:
            with Floor():
                step()
        else:
            step()
    plain, timed = _alternate(n, lambda: None, after=run)
    return plain, timed, {"ops": count[0] / n}


def _reader(cfg: dict) -> Callable[[torch.Tensor], None]:
    """One read of a floating tensor with debugger's compiled statistics kernel (float32 view of others)."""
    sys.path.insert(0, cfg["root"])
    from debugger.stats.core import compiled_kernel
    kernel = compiled_kernel()
    if kernel is None:
        raise RuntimeError("no compiled statistics kernel (numba missing)")
    ints = {4: torch.int32, 8: torch.int64}

    def read(t: torch.Tensor) -> None:
        t = t.detach()
        a = (t if t.dtype in (torch.float32, torch.float64) else t.float()).contiguous().reshape(-1)
        if a.numel():
            kernel(a.numpy(), a.view(ints[a.element_size()]).numpy())
    return read


def _read_parameters(model: torch.nn.Module, opt: torch.optim.Optimizer, read: Callable[[torch.Tensor], None]) -> int:
    """Every weight, gradient and optimizer state tensor read once; how many."""
    tensors = [p.detach() for p in model.parameters()] + [p.grad for p in model.parameters() if p.grad is not None]
    tensors += [v for st in opt.state.values() for v in st.values() if isinstance(v, torch.Tensor)]
    floating = [t for t in tensors if t.is_floating_point()]
    for t in floating:
        read(t)
    return len(floating)


def _floor_parameters(cfg: dict, model: torch.nn.Module, opt: torch.optim.Optimizer, step: Step,
                      n: int) -> tuple[list[float], list[float], dict]:
    """floor:parameters: after each mode step, every weight, gradient and optimizer state tensor read
    once with the compiled statistics kernel (what level "parameters" reads, with no graph, digest or
    file); counts tensors per step."""
    read = _reader(cfg)
    count = [0]

    def after(i: int) -> None:
        if i % 2:
            count[0] += _read_parameters(model, opt, read)
    plain, timed = _alternate(n, step, after=after)
    return plain, timed, {"tensors": count[0] / n}


def _floor_modules(cfg: dict, model: torch.nn.Module, opt: torch.optim.Optimizer, step: Step,
                   n: int) -> tuple[list[float], list[float], dict]:
    """floor:modules: on the mode steps, a global module hook reads each call's floating outputs once
    and a tensor hook reads their gradients once, then floor:parameters' reads (what level "modules"
    stores, with no graph, names, digest or file)."""
    read = _reader(cfg)
    on = [False]

    def read_grad(g: torch.Tensor) -> None:
        read(g)

    def outputs(module: torch.nn.Module, args: Any, out: Any) -> None:
        if not on[0]:
            return
        items = out.values() if isinstance(out, dict) else out if isinstance(out, (tuple, list)) else [out]
        for t in items:
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                read(t)
                if t.requires_grad:
                    t.register_hook(read_grad)

    def run(i: int) -> None:
        on[0] = bool(i % 2)
        step()
        on[0] = False
        if i % 2:
            _read_parameters(model, opt, read)

    handle = torch.nn.modules.module.register_module_forward_hook(outputs)
    try:
        plain, timed = _alternate(n, lambda: None, after=run)
    finally:
        handle.remove()
    return plain, timed, {}


_BLOCK = 3     # steps per block in the :steady modes


def _recorder(cfg: dict, model: torch.nn.Module, opt: torch.optim.Optimizer, step: Step,
              n: int) -> tuple[list[float], list[float], dict]:
    """debugger.torch.Recorder on the odd (mode) steps; a recorded step waits for its file."""
    mode = cfg["mode"]
    if mode.startswith("before:"):
        sys.path.insert(0, cfg["baseline"])
    else:
        sys.path.insert(0, cfg["root"])
    from debugger.torch import Recorder
    steady = mode.endswith(":steady")
    if steady:       # blocks of K unrecorded and K recorded steps: the writer overlaps the next step
        mode = mode.split(":")[0]
        selected = [i for i in range(2 * n * _BLOCK) if (i // _BLOCK) % 2]
    else:
        selected = list(range(1, 2 * n, 2))
    kwargs: dict[str, Any] = {"save": "statistics", "iterations": selected}
    extra: dict[str, Any] = {}
    if not mode.startswith("before:"):
        try:
            rec = Recorder(cfg["out"], model, opt, level=mode, **kwargs)
        except TypeError as e:
            if "level" not in str(e):
                raise
            if mode != "ops":
                raise RuntimeError("n/a (this checkout has no level=)") from None
            extra["note"] = "no level= in this checkout: its only level (ops)"
            rec = Recorder(cfg["out"], model, opt, **kwargs)
    else:
        rec = Recorder(cfg["out"], model, opt, **kwargs)

    def after(i: int) -> None:
        rec.step()
        if i % 2:
            rec.flush()

    def block() -> None:
        for _ in range(_BLOCK):
            step()
            rec.step()

    with rec:
        if steady:      # a block's time per step; a recorded block ends waiting for its files
            plain, timed = _alternate(n, block, after=lambda i: rec.flush() if i % 2 else None)
            plain, timed = [t / _BLOCK for t in plain], [t / _BLOCK for t in timed]
        else:
            plain, timed = _alternate(n, step, after=after)
    return plain, timed, extra


def _msprobe(cfg: dict, model: torch.nn.Module, step: Step, n: int) -> tuple[list[float], list[float], dict]:
    """msprobe's PrecisionDebugger, task statistics, at L0, L1 or mix; start(model) on mode steps."""
    from msprobe.pytorch import PrecisionDebugger
    level = cfg["mode"].split(":")[1]
    os.makedirs(cfg["out"], exist_ok=True)
    path = os.path.join(cfg["out"], "config.json")
    with open(path, "w") as f:
        json.dump({"task": "statistics", "dump_path": os.path.join(cfg["out"], "dump"), "rank": [],
                   "step": [], "level": level, "async_dump": False,
                   "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}}, f)
    dbg = PrecisionDebugger(config_path=path)

    def before(i: int) -> None:
        dbg.start(model)

    def after(i: int) -> None:
        if i % 2:
            dbg.stop()
            dbg.step()
    plain, timed = _alternate(n, step, before=before, after=after)
    return plain, timed, {}


def worker(cfg: dict) -> dict:
    """Run one (model, mode) as configured; the measured plain and mode seconds per step."""
    torch.set_num_threads(2)
    torch.manual_seed(0)
    model, opt, step = build(cfg["model"])
    n, mode = cfg["warmup"] + cfg["steps"], cfg["mode"]
    extra: dict[str, Any] = {}
    if mode == "plain":
        plain, timed = _alternate(n, step)
    elif mode == "floor:parameters":
        plain, timed, extra = _floor_parameters(cfg, model, opt, step, n)
    elif mode == "floor:modules":
        plain, timed, extra = _floor_modules(cfg, model, opt, step, n)
    elif mode.startswith("floor:"):
        plain, timed, extra = _floor(cfg, step, n)
    elif mode.startswith("msprobe:"):
        plain, timed, extra = _msprobe(cfg, model, step, n)
    else:
        plain, timed, extra = _recorder(cfg, model, opt, step, n)
    w = cfg["warmup"]
    return {"plain": plain[w:], "mode": timed[w:], **extra}


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    try:
        print("RESULT " + json.dumps(worker(json.loads(sys.argv[1]))), flush=True)
    except Exception as e:     # the benchmark prints the last line and goes on
        print(f"ERROR {type(e).__name__}: {e}".splitlines()[0], flush=True)
        sys.exit(1)
