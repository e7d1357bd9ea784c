"""Real PyTorch runs (debugger.torch.Recorder, eager, CPU) scanned with the recommended preset (issue 36).

- Non-finite values at every level are findings: an inf written into a weight between two steps is the
  headline at the first iteration that reads it, at levels "parameters" and "modules", with values and
  with statistics only; it is never put down to "an earlier iteration" that reported nothing. A NaN loss
  at "parameters", and a weight that the (unrecorded) optimizer step turns NaN, are findings too.
- Bookkeeping is not a finding: at "ops", a nanoGPT-style evaluation buffer (``torch.zeros(eval_iters)``)
  and a Trainer-style loss accumulator (``tr_loss -= tr_loss``) leave a healthy run quiet, while a ReLU
  layer made dead by its bias still fires.
"""
from __future__ import annotations

from typing import Callable

import pytest

from clirun import run_cli

torch = pytest.importorskip("torch")
nn = torch.nn

from debugger.torch import Recorder  # noqa: E402

STEPS = 6
BROKEN_AT = 3       # the inf is written after step 2's rec.step(), before step 3's forward


class Net(nn.Module):
    """Two linear layers with a ReLU between them, and a parameter only the eps=0 run reads."""

    def __init__(self, gate: bool = False) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 8), nn.Linear(8, 2)
        self.gate = nn.Parameter(torch.ones(2)) if gate else None

    def forward(self, x: "torch.Tensor") -> "torch.Tensor":
        out = self.fc2(torch.relu(self.fc1(x)))
        return out + 0 * self.gate if self.gate is not None else out


Hook = Callable[[int, Net, "torch.Tensor"], None]


def _train(root: str, level: str, save: str = "tensors", before_step: Hook | None = None, net: Net | None = None,
           opt: "torch.optim.Optimizer | None" = None, bookkeeping: bool = False) -> None:
    """STEPS steps of AdamW on a fixed batch, recorded; ``before_step(step, net, batch)`` runs before each
    forward (on a copy of the batch)."""
    torch.manual_seed(0)
    net = net or Net()
    opt = opt or torch.optim.AdamW(net.parameters(), lr=1e-2)
    x, y = torch.randn(16, 4), torch.randn(16, 2)
    with Recorder(root, net, opt, save=save, level=level) as rec:
        tr_loss = torch.tensor(0.0)
        for step in range(STEPS):
            xs = x.clone()
            if before_step is not None:
                before_step(step, net, xs)
            if bookkeeping and step % 2 == 0:
                _estimate_loss(net, x, y)
            loss = ((net(xs) - y) ** 2).mean()
            opt.zero_grad()
            # the Trainer backpropagates the loss divided by the accumulation steps and accumulates the
            # undivided one, detached: a value taken off the loss's computation, not the loss node itself
            (loss / 1.0 if bookkeeping else loss).backward()
            opt.step()
            tr_loss += loss.detach()            # the HF Trainer's accumulator, reset when it logs
            if bookkeeping and step % 3 == 2:
                tr_loss -= tr_loss
            rec.step()


def _estimate_loss(net: Net, x: "torch.Tensor", y: "torch.Tensor", eval_iters: int = 2) -> float:
    """nanoGPT's estimate_loss: a zero buffer filled with .item() of evaluation losses."""
    with torch.no_grad():
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            losses[k] = ((net(x) - y) ** 2).mean().item()
        return float(losses.mean())


def _write_inf(step: int, net: Net, batch: "torch.Tensor") -> None:
    if step == BROKEN_AT:
        with torch.no_grad():
            net.fc1.weight[0, 0] = float("inf")


@pytest.mark.parametrize("save", ["tensors", "statistics"])
@pytest.mark.parametrize("level", ["parameters", "modules"])
def test_an_inf_written_between_steps_is_the_headline(tmp_path, level, save):
    root = str(tmp_path / "run")
    _train(root, level, save, _write_inf)
    res = run_cli("scan", root, "--no-cache", "--json")
    assert res.code == 1, res.out
    first = res.json["first"]
    assert (first["watchpoint"], first["iteration"], first["param"], first["kind"], first["io"]) == \
        ("overflow", BROKEN_AT, "fc1.weight", "weight", "input")
    assert first["actual"]["pos_inf"] == 1
    assert "between steps" in first["note"] and "not in the dump" in first["note"]
    assert f"end of iteration {BROKEN_AT - 1}" in first["note"]
    # the iterations after it read the weight non-finite because of that iteration: no second finding
    assert {h["iteration"] for h in res.json["hits"] if h["watchpoint"] == "overflow"} == {BROKEN_AT}
    text = run_cli("scan", root, "--no-cache")
    assert f"First problem: overflow at iteration {BROKEN_AT}, rank 0: fc1.weight" in text.out
    assert "changed outside the recorded operators (between steps)" in text.out


def test_an_inf_before_the_first_recorded_iteration_has_no_origin_in_the_dump(tmp_path):
    root = str(tmp_path / "run")
    torch.manual_seed(0)
    net = Net()
    with torch.no_grad():
        net.fc1.weight[0, 0] = float("inf")
    _train(root, "parameters", net=net)
    first = run_cli("scan", root, "--no-cache", "--json").json["first"]
    assert (first["iteration"], first["param"]) == (0, "fc1.weight")
    assert "holds no earlier value" in first["note"] and "not in the dump" in first["note"]


def test_level_parameters_heads_with_a_nan_loss_and_with_a_nan_the_optimizer_step_made(tmp_path):
    """A NaN sample: the loss is the first non-finite value the level records, and the headline (this
    worked before; kept beside the new case). Adam with eps=0 divides 0 by 0 for a parameter whose gradient
    is zero: the weight is NaN after the first step, from a finite gradient and loss, and no operator of
    the step is recorded at "parameters": the weight is the finding, not nothing."""
    def nan_sample(step: int, net: Net, batch: "torch.Tensor") -> None:
        if step == BROKEN_AT:
            batch[0, 0] = float("nan")
    _train(str(tmp_path / "nan_loss"), "parameters", before_step=nan_sample)
    res = run_cli("scan", str(tmp_path / "nan_loss"), "--no-cache", "--json")
    first = res.json["first"]
    assert res.code == 1
    assert (first["watchpoint"], first["iteration"], first["kind"], first["io"]) == \
        ("overflow", BROKEN_AT, "loss", "output")

    torch.manual_seed(0)
    net = Net(gate=True)
    _train(str(tmp_path / "eps0"), "parameters", net=net, opt=torch.optim.Adam(net.parameters(), lr=1e-2, eps=0.0))
    res = run_cli("scan", str(tmp_path / "eps0"), "--no-cache", "--json")
    assert res.code == 1
    first = res.json["first"]
    assert (first["watchpoint"], first["iteration"], first["param"], first["io"]) == ("overflow", 0, "gate", "output")
    assert "made by no operator the dump holds" in first["note"]


def test_bookkeeping_of_a_healthy_loop_is_no_finding(tmp_path):
    root = str(tmp_path / "run")
    _train(root, "ops", bookkeeping=True)
    res = run_cli("scan", root, "--no-cache", "--json")
    assert res.code == 0, [(h["watchpoint"], h["node"], h["iteration"]) for h in res.json["hits"]]
    reasons = {(s["watchpoint"], s["reason"].split(":")[0]) for s in res.json["skipped"]}
    assert {("tensor_all_zero", "bookkeeping"), ("overflow", "bookkeeping")} <= reasons


def test_a_dead_relu_layer_still_fires_beside_bookkeeping(tmp_path):
    root = str(tmp_path / "run")

    def dead(step: int, net: Net, batch: "torch.Tensor") -> None:
        if step == 0:
            with torch.no_grad():
                net.fc1.bias.fill_(-1e3)
    _train(root, "ops", before_step=dead, bookkeeping=True)
    res = run_cli("scan", root, "--no-cache", "--json")
    assert res.code == 1
    fired = {(h["watchpoint"], h["node"]) for h in res.json["hits"]}
    assert ("activation_dead_layer", "model/relu-0") in fired
    assert ("tensor_all_zero", "model/relu-0") in fired
    assert not any(n.startswith(("global/zeros", "global/sub_", "global/add_")) for _, n in fired)
