"""Write a corpus of real msprobe (mindstudio-probe 26.2.0) dumps of a tiny MLP under tests/data/corpus_msprobe/.

Run with a Python that has torch and msprobe (not tdbg):
    python tests/data/corpus_msprobe/make_corpus_msprobe.py [NAME ...]
Each dump is made in a fresh process (msprobe's PrecisionDebugger is a per-process singleton). Next to
each dump, ``NAME.truth.json`` says what the training loop itself saw, computed with plain torch and
never with tdbg: the losses of each step, the parameters (names, shapes), the statistics of each
weight as the forward read it and after the step's update, each gradient's statistics, which steps
held a non-finite value, and where the planted one came from. tdbg's tests read the results
without torch or msprobe.
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from msprobe_make import make  # noqa: E402  (tests/data: what the msprobe makers share)
STEPS = 3

# name -> (level, task, planted)
DUMPS: dict[str, tuple[str, str, str]] = {
    "L0_statistics": ("L0", "statistics", ""),
    "L0_tensor": ("L0", "tensor", ""),
    "L1_statistics": ("L1", "statistics", ""),
    "L1_tensor": ("L1", "tensor", ""),
    "mix_statistics": ("mix", "statistics", ""),
    "mix_tensor": ("mix", "tensor", ""),
    "mix_data_nan": ("mix", "tensor", "data_nan"),
    "L1_op_nan": ("L1", "statistics", "op_nan"),
}
DATA_NAN_STEPS = (1, 2)    # data_nan: the input batch holds a NaN at these steps
OP_NAN_STEP = 2            # op_nan: torch.sqrt of a negative tensor at this step


def _net() -> Any:
    """A tiny MLP (484 parameters) with a parameter-free module and a nested Sequential."""
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(8, 16)
            self.act = nn.ReLU()
            self.block = nn.Sequential(nn.Linear(16, 16), nn.Tanh())
            self.head = nn.Linear(16, 4)
            self.nan_now = False

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.act(self.fc1(x))
            if self.nan_now:
                # planted (op_nan): every element of h - 100 is negative; sqrt makes NaN from finite inputs
                h = torch.sqrt(h - 100.0)
            return self.head(self.block(h))

    torch.manual_seed(0)
    return Net()


def _batches(planted: str) -> list[tuple[Any, Any]]:
    """Fixed batches; data_nan puts one NaN in the input of the steps DATA_NAN_STEPS."""
    import torch

    g = torch.Generator().manual_seed(1234)
    out = []
    for step in range(STEPS):
        x, y = torch.randn(4, 8, generator=g), torch.randint(0, 4, (4,), generator=g)
        if planted == "data_nan" and step in DATA_NAN_STEPS:
            x[1, 3] = float("nan")
        out.append((x, y))
    return out


def _stats(t: Any) -> dict[str, Any]:
    """Max/Min/Mean/Norm as msprobe names them, and whether every element is finite (plain torch)."""
    import torch

    t = t.detach().float()
    return {"Max": float(t.max()), "Min": float(t.min()), "Mean": float(t.mean()), "Norm": float(t.norm()),
            "finite": bool(torch.isfinite(t).all())}


def _jsonable(v: Any) -> Any:
    """NaN and Inf as strings (JSON has no literal for them)."""
    if isinstance(v, float) and v != v or v in (float("inf"), float("-inf")):
        return str(v)
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    return v


def _train(name: str) -> None:
    """Train STEPS steps under msprobe and write the truth the loop saw."""
    import torch
    import torch.nn.functional as F
    from msprobe.pytorch import PrecisionDebugger

    level, task, planted = DUMPS[name]
    net = _net()
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    truth: dict[str, Any] = {
        "name": name, "level": level, "task": task, "steps": STEPS, "planted": planted,
        "optimizer": "SGD(lr=0.1, momentum=0.9)",
        "params": {n: list(p.shape) for n, p in net.named_parameters()},
        "losses": [], "loss_finite": [], "input_finite": [], "weights_read": [], "weights_after": [],
        "grads": [], "nonfinite_steps": [], "nan_origin": None,
    }
    if planted == "data_nan":
        truth["nan_origin"] = {"kind": "data", "steps": list(DATA_NAN_STEPS), "what": "input batch x[1, 3]",
                               "first_consumer": "fc1 (Module.fc1.Linear.forward.0 / Functional.linear.0.forward)"}
    elif planted == "op_nan":
        truth["nan_origin"] = {"kind": "op", "steps": [OP_NAN_STEP], "what": "torch.sqrt(h - 100.0)",
                               "msprobe_key": "Torch.sqrt.0.forward", "inputs_finite": True}
    dbg = PrecisionDebugger(task=task, dump_path=os.path.join(HERE, name), level=level)
    for step, (x, y) in enumerate(_batches(planted)):
        net.nan_now = planted == "op_nan" and step == OP_NAN_STEP
        truth["weights_read"].append({n: _stats(p) for n, p in net.named_parameters()})
        dbg.start(net)
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        dbg.stop()
        dbg.step()
        truth["losses"].append(float(loss.detach()))
        truth["loss_finite"].append(bool(torch.isfinite(loss).all()))
        truth["input_finite"].append(bool(torch.isfinite(x).all()))
        truth["grads"].append({n: _stats(p.grad) for n, p in net.named_parameters()})
        truth["weights_after"].append({n: _stats(p) for n, p in net.named_parameters()})
        bad = not (truth["loss_finite"][-1] and truth["input_finite"][-1]
                   and all(s["finite"] for s in truth["grads"][-1].values()))
        if bad:
            truth["nonfinite_steps"].append(step)
    with open(os.path.join(HERE, f"{name}.truth.json"), "w") as f:
        json.dump(_jsonable(truth), f, indent=1, sort_keys=True)


def main() -> None:
    """Make every dump (or those named), each in a fresh process."""
    make(__file__, HERE, _train, list(DUMPS))


if __name__ == "__main__":
    main()
