"""Write msprobe (mindstudio-probe 26.2.0) dumps of real models under tests/data/msprobe_real/.

Run with a Python that has torch, transformers and msprobe:
    python tests/data/msprobe_real/make_msprobe_real.py [NAME ...]
Each dump is made in a fresh process (msprobe's PrecisionDebugger is a per-process singleton).
Next to each dump, ``NAME.truth.json`` says what plain torch saw: the optimizer's parameters by
name (``param_groups`` and ``state`` keys), their shapes, whether each one changed at every step
(``torch.equal`` before and after ``optimizer.step()``), the losses, and what was planted.
tdbg and its tests read the results without torch or msprobe.
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from msprobe_make import make  # noqa: E402  (tests/data: what the msprobe makers share)

# name -> (model, optimizer, task, level, steps, planted). Committed: every one but those in LOCAL_ONLY
DUMPS = {
    "gpt2_adamw_statistics": ("gpt2", "adamw", "statistics", "mix", 3, ""),
    "gpt2_adamw_nan_statistics": ("gpt2", "adamw", "statistics", "mix", 2, "nan"),
    "cnn_sgdm_statistics": ("cnn", "sgdm", "statistics", "mix", 3, ""),
    "cnn_sgdm_tensor": ("cnn", "sgdm", "tensor", "mix", 2, ""),
    "cnn_sgdm_frozen_md5": ("cnn", "sgdm", "statistics-md5", "mix", 3, "frozen"),
    # about 19 MB: made on request (measured for the report), not committed
    "gpt2_adamw_tensor": ("gpt2", "adamw", "tensor", "mix", 2, ""),
}
LOCAL_ONLY = ("gpt2_adamw_tensor",)
NAN_STEP = 1


def _gpt2():  # type: ignore[no-untyped-def]
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="eager")
    return GPT2LMHeadModel(cfg)


def _cnn():  # type: ignore[no-untyped-def]
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    # no bias before BatchNorm (as ResNet): that bias gets a gradient of ~1e-9 and never changes
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
                         nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(8, 4))


def _batches(model: str, steps: int):  # type: ignore[no-untyped-def]
    import torch

    g = torch.Generator().manual_seed(1234)
    if model == "gpt2":
        return [torch.randint(0, 64, (4, 12), generator=g) for _ in range(steps)]
    return [(torch.randn(4, 3, 8, 8, generator=g), torch.randint(0, 4, (4,), generator=g)) for _ in range(steps)]


def _optimizer(kind: str, model, planted: str):  # type: ignore[no-untyped-def]
    import torch

    if kind == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    params = list(model.named_parameters())
    if planted == "frozen":   # planted: the second conv in a param group with lr=0 (a frozen layer)
        frozen = [p for n, p in params if n.startswith("3.")]
        rest = [p for n, p in params if not n.startswith("3.")]
        return torch.optim.SGD([{"params": rest}, {"params": frozen, "lr": 0.0}], lr=0.05, momentum=0.9)
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def _loss(model_kind: str, net, batch, step: int, planted: str):  # type: ignore[no-untyped-def]
    import torch.nn.functional as F

    if model_kind == "gpt2":
        net.transformer.h[0].mlp.nan_now = planted == "nan" and step == NAN_STEP
        return net(input_ids=batch, labels=batch).loss
    x, y = batch
    return F.cross_entropy(net(x), y)


def _debugger(name: str, task: str, level: str):  # type: ignore[no-untyped-def]
    from msprobe.pytorch import PrecisionDebugger

    if task != "statistics-md5":
        return PrecisionDebugger(task=task, dump_path=os.path.join(HERE, name), level=level)
    import tempfile

    # statistics with summary_mode md5 (a checksum of each tensor's bytes): an unchanged weight is exact
    cfg = os.path.join(tempfile.mkdtemp(), "config.json")
    with open(cfg, "w") as f:
        json.dump({"task": "statistics", "dump_path": os.path.join(HERE, name), "rank": [], "step": [],
                   "level": level, "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                                                  "summary_mode": "md5"}}, f)
    return PrecisionDebugger(config_path=cfg)


def _train(name: str) -> None:
    import torch

    model_kind, opt_kind, task, level, steps, planted = DUMPS[name]
    net = _gpt2() if model_kind == "gpt2" else _cnn()
    net.train()
    if planted == "nan":   # planted: log of the first MLP's output (negatives give NaN) at step NAN_STEP
        import torch

        def log_out(module, args, out):  # type: ignore[no-untyped-def]
            return torch.log(out) if module.nan_now else out

        net.transformer.h[0].mlp.register_forward_hook(log_out)
    opt = _optimizer(opt_kind, net, planted)
    names = {id(p): n for n, p in net.named_parameters()}
    truth: dict = {"model": model_kind, "optimizer": type(opt).__name__, "task": task, "level": level,
                   "planted": planted, "nan_step": NAN_STEP if planted == "nan" else None,
                   "groups": [{"lr": g["lr"], "params": [names[id(p)] for p in g["params"]]} for g in opt.param_groups],
                   "shapes": {n: list(p.shape) for n, p in net.named_parameters()},
                   "changed": [], "losses": [], "state": []}
    dbg = _debugger(name, task, level)
    for step, batch in enumerate(_batches(model_kind, steps)):
        dbg.start(net)
        loss = _loss(model_kind, net, batch, step, planted)
        opt.zero_grad()
        loss.backward()
        before = {n: p.detach().clone() for n, p in net.named_parameters()}
        opt.step()
        dbg.stop()
        dbg.step()
        truth["losses"].append(float(loss.detach()))
        truth["changed"].append({n: not torch.equal(before[n], p.detach()) for n, p in net.named_parameters()})
        truth["state"].append({names[id(p)]: sorted(s) for p, s in opt.state.items()})
    with open(os.path.join(HERE, f"{name}.truth.json"), "w") as f:
        json.dump(truth, f, indent=1, sort_keys=True)


def main() -> None:
    """Make every dump (or those named), each in a fresh process."""
    make(__file__, HERE, _train, [n for n in DUMPS if n not in LOCAL_ONLY])


if __name__ == "__main__":
    main()
