"""Real small training runs written as a per-step series, with a planted cause at a known step.

A tiny GPT-2 (transformers, random init) trained with AdamW on a fixed set of sequences. Each step's
statistics are computed here with plain torch, apart from tdbg: at step t the loss of step t's forward,
the gradients of its backward, the weights after its optimizer step, the update w_t - w_(t-1) (as the
recorder's: the change since the previous step's record, a change made outside the optimizer included)
and Adam's exp_avg_sq after the step.
"""
from __future__ import annotations

import os
from typing import Callable

import numpy as np
import torch

from debugger.formats.records import GraphRecord, NodeRecord, OutputType, StackFrame
from debugger.formats.tdbg_h5.series import SeriesWriter
from debugger.formats.tdbg_h5.writer import DumpWriter

VOCAB, SEQ, BATCH = 64, 16, 8
RARE = VOCAB - 1          # a token the healthy data never holds


def torch_stats(t: torch.Tensor) -> list[float]:
    """The 13 statistics of debugger.stats.STAT_NAMES, computed with plain torch."""
    x = t.detach().double().flatten()
    fin = x[torch.isfinite(x)]
    vals = [x.numel(), int(torch.isnan(x).sum()), int((x == float("inf")).sum()),
            int((x == float("-inf")).sum()), int((x == 0).sum()), int((x > 0).sum()), int((x < 0).sum())]
    if fin.numel() == 0:
        return vals + [float("nan")] * 6
    return vals + [float(fin.min()), float(fin.max()), float(fin.mean()), float(fin.abs().mean()),
                   float(fin.std(unbiased=False)), float(fin.norm())]


def gpt2(seed: int = 0) -> torch.nn.Module:
    """A 2-layer GPT-2 of width 32 from a config, random init."""
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=2,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(cfg)


def healthy_batches(seed: int = 0) -> torch.Tensor:
    """A fixed pool of 32 sequences over tokens 0..VOCAB-2 (a learnable, repeating corpus)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, VOCAB - 1, (32, SEQ), generator=g)


Plant = Callable[[int, torch.nn.Module, torch.optim.Optimizer, torch.Tensor], torch.Tensor]


def gpt2_task() -> tuple[torch.nn.Module, torch.Tensor, Callable[[torch.nn.Module, torch.Tensor], torch.Tensor]]:
    """(model, pool of batches, loss of a batch): the tiny GPT-2 on its fixed corpus."""
    return gpt2(), healthy_batches(), lambda m, b: m(input_ids=b, labels=b).loss


class MLP(torch.nn.Module):
    """Three Linear layers with ReLU: a classifier of 16 features into 4 classes."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = torch.nn.Linear(16, 64), torch.nn.Linear(64, 64), torch.nn.Linear(64, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def mlp_task() -> tuple[torch.nn.Module, torch.Tensor, Callable[[torch.nn.Module, torch.Tensor], torch.Tensor]]:
    """(model, pool of batches, loss): the MLP on 32 fixed samples whose class is the sign pattern of two features."""
    torch.manual_seed(0)
    x = torch.randn(32, 16)
    y = (x[:, 0] > 0).long() * 2 + (x[:, 1] > 0).long()
    pool = torch.cat([x, y[:, None].float()], dim=1)
    loss = lambda m, b: torch.nn.functional.cross_entropy(m(b[:, :16]), b[:, 16].long())  # noqa: E731
    return MLP(), pool, loss


def train_series(root: str, steps: int, plant: Plant | None = None, *, lr: float = 1e-3,
                 task: Callable = gpt2_task, activations: bool = False) -> str:
    """Train a task's model for ``steps`` steps into the series of ``root``/rank_0; ``plant(step, model,
    optimizer, batch)`` is called before each step (it returns the batch to use) and after its optimizer
    step (with -step-1). ``activations``: also the max of each Linear's output. Returns root."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)     # tiny tensors: threads only contend (10x slower on a busy 2-core machine)
    try:
        return _train(root, steps, plant, lr, task, activations)
    finally:
        torch.set_num_threads(threads)


def _train(root: str, steps: int, plant: Plant | None, lr: float, task: Callable, activations: bool) -> str:
    """train_series's loop."""
    model, pool, loss_of = task()
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    params = [(n, p) for n, p in model.named_parameters()]
    names, roles, owners = [], [], []
    for n, _ in params:
        for suffix, role in (("", "weight"), (".grad", "gradient"), (".update", "update"),
                             (".exp_avg_sq", "optimizer_state")):
            names.append(n + suffix), roles.append(role), owners.append(n)
    outputs: dict[str, torch.Tensor] = {}
    if activations:
        for mod_name, mod in model.named_modules():
            if isinstance(mod, torch.nn.Linear):
                names.append(mod_name + ".output"), roles.append("activation"), owners.append(None)
                mod.register_forward_hook(lambda m, i, o, key=mod_name: outputs.__setitem__(key, o.detach()))
    _write_deep_capture(root, sorted({n.rsplit('.', 1)[0] for n, _ in params}))
    with SeriesWriter(os.path.join(root, "rank_0"), names, roles=roles, params=owners) as series:
        before = [p.detach().clone() for _, p in params]     # w_(t-1): as the previous step recorded it
        for step in range(steps):
            at = (step * BATCH) % len(pool)
            batch = pool[at:at + BATCH]
            if plant is not None:
                batch = plant(step, model, opt, batch)
            loss = loss_of(model, batch)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if plant is not None:
                plant(-step - 1, model, opt, batch)
            rows = []
            for (_, p), old in zip(params, before):
                rows += [torch_stats(p), torch_stats(p.grad), torch_stats(p.detach() - old),
                         torch_stats(opt.state[p]["exp_avg_sq"])]
            rows += [torch_stats(outputs[k]) for k in outputs]
            before = [p.detach().clone() for _, p in params]
            series.add(step, np.array(rows), {"loss": float(loss.detach()), "lr": opt.param_groups[0]["lr"]})
    return root


DEEP_STEP = 100            # the one deep capture of every run
LAYER_FILE = "model.py"   # the capture's graph puts the i-th layer (sorted by name) at line 100 + i


def _write_deep_capture(root: str, layers: list[str]) -> None:
    """A tdbg-h5 dump beside the series: one iteration (DEEP_STEP) of a graph with one node per layer,
    made at LAYER_FILE:100+i (the series lives in the same rank folder)."""
    nodes = [NodeRecord(f"{layer}/out", "Linear", layer.replace(".", "/"), module=layer,
                        stack=(StackFrame(LAYER_FILE, 100 + i, code="y = layer(x)"),),
                        outputs=[OutputType("float32", (2,))]) for i, layer in enumerate(layers)]
    graph = GraphRecord(0, "step", nodes, outputs=[], source_file="", execution_order=[n.name for n in nodes])
    with DumpWriter(root, rank=0, saved="values", framework="PyTorch", framework_version=torch.__version__,
                    device_target="CPU") as w:
        w.write_graph(graph)
        with w.iteration(DEEP_STEP) as it:
            for i, n in enumerate(nodes):
                it.add(i, n.name, "Linear", "output", 0, values=np.ones(2, np.float32))
