"""A nanoGPT-style program, as people train today: a causal-attention GPT with a tied head, AdamW (fused,
as the Hugging Face default, or not), a ``while True ... break`` loop, an evaluation buffer made with
``torch.zeros`` and ``torch.compile`` at the user's choice of place. Written here (nothing downloaded);
the truth about a run (its losses, its final weights) comes from the same loop run without the recorder.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, SEQ, WIDTH, HEADS, LAYERS, BATCH = 64, 16, 32, 2, 2, 4
# how the program compiles: not at all, torch.compile(model), model.compile(), or the whole train step
COMPILE_MODES = ("eager", "compile", "module.compile", "step")


class Block(nn.Module):
    """Pre-norm attention and GELU MLP, residual."""

    def __init__(self) -> None:
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.c_attn, self.c_proj = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
        self.c_fc, self.mlp_proj = nn.Linear(WIDTH, 4 * WIDTH), nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    """Token and position embeddings, blocks, final norm, a head tied to the token embedding."""

    def __init__(self) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, WIDTH), nn.Embedding(SEQ, WIDTH)
        self.h = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(WIDTH)
        self.lm_head = nn.Linear(WIDTH, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return logits, F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def get_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch of a step (the same at every run)."""
    data = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=torch.Generator().manual_seed(step))
    return data[:, :-1], data[:, 1:]


@dataclass
class Run:
    """What a run did: its losses, its final weights, the recorder's warnings."""

    losses: list[float]
    weights: dict[str, torch.Tensor]
    warnings: list[str] = field(default_factory=list)


Fault = Callable[[GPT, int], None]     # called before each step's forward: may corrupt the model


def train(compile_mode: str = "eager", max_iters: int = 6, record: dict[str, Any] | None = None,
          fault: Fault | None = None, fused: bool = True, path: str | os.PathLike[str] | None = None,
          backend: str = "inductor", prepare: Callable[[GPT], None] | None = None) -> Run:
    """nanoGPT's loop: ``while True``, ``start()`` before and ``close()`` after (no re-indent), an
    evaluation buffer every 3 steps; recorded with ``Recorder(path, ..., **record)`` when ``record``;
    ``prepare`` sees the model before it is compiled.
    One thread: Inductor's CPU kernels for the embedding's backward add in parallel in whatever order
    the threads run, so a compiled run on several threads is not bit-reproducible under load (once seen
    here: 1 ulp in 2 elements of wte.weight), recorded or not."""
    from models.corpus import quiet_threads   # one intra-op thread, as the corpus runs

    with quiet_threads():
        return _train(compile_mode, max_iters, record, fault, fused, path, backend, prepare)


def _train(compile_mode: str, max_iters: int, record: dict[str, Any] | None, fault: Fault | None, fused: bool,
           path: str | os.PathLike[str] | None, backend: str, prepare: Callable[[GPT], None] | None) -> Run:
    """:func:`train` on the threads set."""
    import warnings

    from debugger.torch import Recorder

    torch.manual_seed(1337)
    model = GPT()
    if prepare is not None:
        prepare(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1, fused=fused or None)
    run, step_fn = _compiled(model, optimizer, compile_mode, backend)
    losses: list[float] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rec = Recorder(path, run, optimizer, **record).start() if record is not None else None
        iter_num = 0
        while True:
            if iter_num % 3 == 0:
                evals = torch.zeros(2)      # bookkeeping: made from no trained input, never reaches the loss
                with torch.no_grad():
                    for k in range(2):
                        evals[k] = run(*get_batch(100 + k))[1]
            if fault is not None:
                fault(model, iter_num)
            losses.append(step_fn(*get_batch(iter_num)).item())
            if rec is not None:
                rec.step()
            optimizer.zero_grad(set_to_none=True)
            iter_num += 1
            if iter_num >= max_iters:
                break
        if rec is not None:
            rec.close()
    said = [str(w.message) for w in caught if "tdbg" in str(w.message)]
    return Run(losses, {n: p.detach().clone() for n, p in model.named_parameters()}, said)


def _compiled(model: GPT, optimizer: torch.optim.Optimizer, mode: str,
              backend: str = "inductor") -> tuple[nn.Module, Callable[..., Any]]:
    """What the loop calls for the forward pass, and its train step, compiled as ``mode`` says (with
    torch.compile's ``backend``)."""
    run: nn.Module = model
    if mode == "compile":
        run = torch.compile(model, backend=backend)
    elif mode == "module.compile":
        model.compile(backend=backend)

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        _, loss = run(x, y)
        loss.backward()
        optimizer.step()
        return loss
    return run, (torch.compile(step, backend=backend) if mode == "step" else step)


def scale_weight_at(step: int, factor: float = 1e4) -> Fault:
    """A weight multiplied between two steps, outside the optimizer (through ``.data``: no version bump)."""
    def fault(model: GPT, i: int) -> None:
        if i == step:
            model.h[0].c_fc.weight.data.mul_(factor)
    return fault


def miscompiled_mlp(model: GPT, factor: float = 1.01) -> None:
    """What a compiler bug does: the compiled program (only) computes something else, here block 1's
    MLP input scaled by ``factor`` (a pre-hook that Dynamo traces into the graph)."""
    def hook(module: nn.Module, args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...] | None:
        return (args[0] * factor,) if torch.compiler.is_compiling() else None
    model.h[1].c_fc.register_forward_pre_hook(hook)


def inf_into_weight_at(step: int) -> Fault:
    """An inf written into one element of a weight between two steps."""
    def fault(model: GPT, i: int) -> None:
        if i == step:
            with torch.no_grad():
                model.h[0].c_fc.weight[0, 0] = float("inf")
    return fault
