"""fp16 autocast with torch.amp.GradScaler: a step the scaler skips (non-finite scaled gradients) is
reported as a loss-scale overflow and a skipped step, not as frozen weights or a NaN origin.

Truth from torch: the scaler's scale after every step, and which steps changed the weights.
"""
from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from clirun import run_cli, scan_quiet  # noqa: E402

from debugger.model import open_dump  # noqa: E402
from debugger.views.triage import triage  # noqa: E402

STEPS = 5


def _train(dump: str, init_scale: float, save: str, nan_at: int = -1, level: str = "ops",
           norm: bool = False) -> tuple[list[float], list[bool], list[str]]:
    """A small MLP under fp16 autocast and GradScaler, recorded; (scales, weights changed, weight names).
    ``norm``: a LayerNorm after the first layer (its bias starts all zero, as every LayerNorm's)."""
    from debugger.torch import Recorder

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), *([torch.nn.LayerNorm(32)] if norm else []),
                                torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale)
    x = torch.randn(16, 8)
    y = x.sum(1, keepdim=True)
    scales: list[float] = []
    changed: list[bool] = []
    with Recorder(dump, model, opt, save=save, level=level) as rec:
        for it in range(STEPS):
            before = [p.detach().clone() for p in model.parameters()]
            with torch.autocast("cpu", dtype=torch.float16):
                loss = torch.nn.functional.mse_loss(model(x if it != nan_at else x.sqrt()), y)
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
            changed.append(any(not torch.equal(a, p) for a, p in zip(before, model.parameters())))
            rec.step()
    return scales, changed, [n for n, _ in model.named_parameters()]


@pytest.mark.parametrize("save", ["tensors", "statistics"])
def test_skipped_steps_are_a_loss_scale_overflow(tmp_path: Any, save: str) -> None:
    """init_scale 2**16 overflows the fp16 gradients of the first steps: the scaler halves its scale and
    skips them. The dump says which steps did not run; the recommended scan has no hit (no frozen
    weight, no NaN origin) and lists exactly those steps as loss-scale overflows."""
    dump = str(tmp_path / "d")
    scales, changed, names = _train(dump, 2.0 ** 16, save)
    skipped = [i for i, c in enumerate(changed) if not c]
    lowered = [i for i, s in enumerate(scales) if s < (scales[i - 1] if i else 2.0 ** 16)]
    assert skipped == lowered and 0 < len(skipped) < STEPS       # the truth: some steps skipped, not all
    r = open_dump(dump).rank(0)
    for it in range(STEPS):
        facts = r.iteration_facts(it)
        assert facts is not None and facts.loss_scaler
        assert facts.not_stepped == (set(names) if it in skipped else set()), it
    res = scan_quiet(dump, "--no-cache")
    out = res.json
    assert out["hits"] == [] and out["first"] is None
    assert [(s["iteration"], s["cause"]) for s in out["skipped_steps"]] == [(i, "loss_scale_overflow") for i in skipped]
    assert all(s["nonfinite_hits"] > 0 and s["weights"] == len(names) for s in out["skipped_steps"])
    if save == "tensors":
        assert out["errors"] == []
    text = run_cli("scan", dump, "--no-cache")
    assert f"{len(skipped)} optimizer step(s) skipped, loss_scale_overflow" in text.out
    # the triage (the web UI's landing page) says the same
    tri = triage(open_dump(dump))
    assert tri["findings"] == [] and [(s["iteration"], s["cause"]) for s in tri["skipped_steps"]] == [
        (i, "loss_scale_overflow") for i in skipped]


@pytest.mark.parametrize("level", ["parameters", "ops"])
def test_a_zero_initialised_bias_in_a_skipped_step_is_no_all_zero_tensor(tmp_path: Any, level: str) -> None:
    """A LayerNorm's bias starts all zero; the steps the scaler skips leave it so (the step did not run, as
    torch's weights say): the scan has no hit (no tensor_all_zero on it), and lists the skipped steps."""
    dump = str(tmp_path / "d")
    _, changed, names = _train(dump, 2.0 ** 16, "statistics", level=level, norm=True)
    skipped = [i for i, c in enumerate(changed) if not c]
    assert 0 in skipped and len(skipped) < STEPS and "1.bias" in names      # the truth: the first steps skipped
    out = run_cli("scan", dump, "--no-cache", "--json").json
    assert out["hits"] == [], out["hits"][:3]
    assert [s["iteration"] for s in out["skipped_steps"]] == skipped


def test_skipped_steps_of_sgd_in_a_process_that_compiled_something(tmp_path: Any) -> None:
    """Once Dynamo has compiled anything in the process, the recorder also looks for optimizer steps whose
    hooks did not run (a compiled step runs none). SGD keeps no step count; a step the scaler skipped must
    still read as not run (its weights bit-identical, per torch), not as a step that froze the model."""
    torch.compile(lambda t: t * 2 + 1)(torch.ones(3))       # what a model compiled earlier leaves behind
    dump = str(tmp_path / "d")
    _, changed, _ = _train(dump, 2.0 ** 16, "statistics", level="parameters", norm=True)
    skipped = [i for i, c in enumerate(changed) if not c]
    assert 0 in skipped and len(skipped) < STEPS
    out = run_cli("scan", dump, "--no-cache", "--json").json
    assert out["hits"] == [], out["hits"][:3]
    assert [s["iteration"] for s in out["skipped_steps"]] == skipped


def test_a_nan_in_the_forward_pass_stays_the_headline(tmp_path: Any) -> None:
    """A NaN made in the forward pass (sqrt of negatives) also makes the scaler skip the step, but it is
    no loss-scale overflow: the scan exits 1 with the forward sqrt as the first problem, and the step
    is listed as one whose optimizer did not run."""
    dump = str(tmp_path / "d")
    _, changed, _ = _train(dump, 2.0 ** 8, "tensors", nan_at=2)
    assert [i for i, c in enumerate(changed) if not c] == [2]
    res = run_cli("scan", dump, "--json", "--no-cache")
    assert res.code == 1, res.out[-3000:]
    first = res.json["first"]
    assert (first["watchpoint"], first["iteration"], first["op_type"]) == ("overflow", 2, "sqrt")
    assert [(s["iteration"], s["cause"]) for s in res.json["skipped_steps"]] == [(2, "optimizer_step_not_run")]
    assert not any(h["watchpoint"] == "weight_not_changed" for h in res.json["hits"])


def test_healthy_amp_run_is_quiet(tmp_path: Any) -> None:
    """A scale that never overflows: every step ran, nothing skipped, and the scaler's found-inf flag
    (zero every step) is its state, not an all-zero tensor."""
    dump = str(tmp_path / "d")
    scales, changed, _ = _train(dump, 2.0 ** 8, "tensors")
    assert all(changed) and scales == [2.0 ** 8] * STEPS
    res = scan_quiet(dump, "--no-cache")
    assert res.json["errors"] == [] and res.json["skipped_steps"] == []
