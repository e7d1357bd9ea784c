"""A GPT-2 (transformers, from a config) trained a few steps under tdbg's Recorder at the operator level,
with a fault planted on request: before one step's forward pass, the last block's ``mlp.c_fc`` weight is
multiplied by 1e4 outside the optimizer. Plain torch's view of that layer's output is the truth the
overlay tests and the overlay benchmark measure against."""
from __future__ import annotations

from typing import Any

import torch

PLANTED = "c_fc"        # the planted layer's module name, in the last block's mlp
SCALE = 1e4


def gpt2(n_layer: int = 2) -> Any:
    """GPT-2 with ``n_layer`` blocks (2: 841 recorded nodes a step; 3: about 1,100)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=n_layer, n_embd=32, n_head=2, vocab_size=64, n_positions=16, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(cfg)


def record(out: str, steps: int = 3, plant_at: int | None = None, n_layer: int = 2) -> dict[int, float]:
    """Train under the Recorder into ``out``; per step, torch's max |output| of the planted layer."""
    from debugger.torch import Recorder

    model = gpt2(n_layer)
    layer = getattr(model.transformer.h[-1].mlp, PLANTED)
    seen: dict[int, float] = {}
    step = {"i": 0}
    layer.register_forward_hook(lambda m, a, o: seen.__setitem__(step["i"], float(o.detach().abs().max())))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with Recorder(out, model, opt, save="statistics") as rec:
        for i in range(steps):
            step["i"] = i
            if i == plant_at:
                with torch.no_grad():
                    layer.weight.mul_(SCALE)
            ids = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(1000 + i))
            loss = model(input_ids=ids, labels=ids).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step()
    return seen
