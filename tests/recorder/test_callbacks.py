"""debugger.torch.callbacks on the real trainers: ``transformers.Trainer`` and ``lightning.Trainer`` train
tiny models made in the test; what plain torch says (each optimizer step's gradients, read by a
step post-hook on the torch optimizer, and the final weights) is the truth the dump must hold, and
the training must be bit-identical with and without the callback."""
from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from clirun import run_cli  # noqa: E402
from recorder_kit import tensors_by_iteration  # noqa: E402

from debugger.model import open_dump  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEPS = 3


class _Truth:
    """Per optimizer step, every parameter's gradient as the torch optimizer's step used it."""

    def __init__(self) -> None:
        self.grads: list[dict[str, np.ndarray]] = []
        self.names: dict[int, str] = {}

    def watch(self, model: Any, opt: Any) -> None:
        """Read ``opt``'s gradients after each of its steps (a read-only hook)."""
        self.names = {id(p): n for n, p in model.named_parameters()}
        opt.register_step_post_hook(self._after_step)

    def _after_step(self, opt: Any, args: Any, kwargs: Any) -> None:
        self.grads.append({self.names[id(p)]: p.grad.detach().clone().numpy()
                           for grp in opt.param_groups for p in grp["params"] if p.grad is not None})


def _final(model: Any) -> dict[str, np.ndarray]:
    return {n: p.detach().clone().numpy() for n, p in model.named_parameters()}


def _losses_per_iteration(dump: str) -> dict[int, int]:
    r = open_dump(dump).rank(0)
    return {it: sum(1 for _ in r.graphs[gid].nodes("loss"))
            for gid in r.graphs for it in r.iterations(gid)}


def _assert_dump_holds(dump: str, truth: _Truth, final: dict[str, np.ndarray], trainable: set[str]) -> None:
    """Every trainable parameter is a weight with its gradient at every step (as torch's), and the
    weight recorded at the last iteration is the trained parameter."""
    info = run_cli("info", dump, "--json")
    assert info.code == 0, info.err
    tensors = tensors_by_iteration(dump)
    assert sorted(tensors) == list(range(len(truth.grads))) == list(range(STEPS))
    for it, grads in enumerate(truth.grads):
        assert set(grads) == trainable
        for name, g in grads.items():
            weight = tensors[it][(name, "output", 0)]
            assert weight.kind == "weight" and weight.param == name
            ref = tensors[it][(f"{name}.grad", "output", 0)]
            assert ref.kind == "gradient" and ref.param == name
            assert np.array_equal(np.asarray(ref.source.array()), g), (it, name)
    for name in trainable:
        assert np.array_equal(np.asarray(tensors[STEPS - 1][(name, "output", 0)].source.array()), final[name]), name


# ---- transformers.Trainer ------------------------------------------------------------------------
def _hf_run(out: str, callback: Any, accumulate: int = 2, steps: int = STEPS,
            **args: Any) -> tuple[_Truth, dict[str, np.ndarray], Any]:
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

    class Ids(torch.utils.data.Dataset):
        def __init__(self) -> None:
            self.ids = torch.randint(0, 64, (24, 16), generator=torch.Generator().manual_seed(1))

        def __len__(self) -> int:
            return len(self.ids)

        def __getitem__(self, i: int) -> dict[str, Any]:
            return {"input_ids": self.ids[i], "labels": self.ids[i]}

    truth = _Truth()

    class Watch(TrainerCallback):
        def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, optimizer: Any = None,
                           **kw: Any) -> None:
            truth.watch(model, optimizer.optimizer)       # accelerate's wrapper holds the torch optimizer

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=32,
                                       bos_token_id=0, eos_token_id=0))
    targs = TrainingArguments(output_dir=os.path.join(out, "hf"), max_steps=steps, per_device_train_batch_size=4,
                              gradient_accumulation_steps=accumulate, report_to=[], use_cpu=True,
                              save_strategy="no", logging_strategy="no", disable_tqdm=True, seed=0, **args)
    trainer = Trainer(model, targs, train_dataset=Ids(), callbacks=[Watch()] + ([callback] if callback else []))
    trainer.train()
    return truth, _final(model), trainer


def test_hf_trainer_records_every_optimizer_step(tmp_path: Any) -> None:
    """GPT-2 under transformers.Trainer (AdamW through accelerate, 2 micro-batches a step, grad clipping):
    one iteration per optimizer step with both micro-batches' losses, gradients and final weights as torch
    has them, and training bit-identical without the callback."""
    pytest.importorskip("transformers")
    from debugger.torch.callbacks import TdbgTrainerCallback

    dump = str(tmp_path / "dump")
    truth, final, trainer = _hf_run(str(tmp_path), TdbgTrainerCallback(dump), max_grad_norm=0.5)
    plain, plain_final, _ = _hf_run(str(tmp_path), None, max_grad_norm=0.5)
    assert trainer.state.global_step == STEPS
    assert all(np.array_equal(final[n], plain_final[n]) for n in final)
    assert all(np.array_equal(a[n], b[n]) for a, b in zip(truth.grads, plain.grads) for n in a)
    trainable = {n for n, p in trainer.model.named_parameters() if p.requires_grad}
    _assert_dump_holds(dump, truth, final, trainable)
    assert _losses_per_iteration(dump) == {i: 2 for i in range(STEPS)}


def test_hf_trainer_passes_the_recorders_options(tmp_path: Any) -> None:
    """save, iterations and rank reach the Recorder: a statistics dump of iterations 1-2 in rank_1."""
    pytest.importorskip("transformers")
    from debugger.torch.callbacks import TdbgTrainerCallback

    dump = str(tmp_path / "dump")
    _hf_run(str(tmp_path), TdbgTrainerCallback(dump, save="statistics", iterations="1-2", rank=1), accumulate=1)
    res = run_cli("info", dump, "--json")
    assert res.code == 0, res.err
    [rank] = res.json["ranks"]
    assert (rank["rank"], rank["saved"], rank["iterations"]) == (1, "statistics", [1, 2])


def test_hf_trainer_records_the_per_step_series(tmp_path: Any) -> None:
    """series=True through the callback (no deep step: iterations=()): one series step per optimizer step of
    the Trainer, with its loss, its scheduler's learning rate as each step began, and every gradient."""
    pytest.importorskip("transformers")
    from debugger.torch.callbacks import TdbgTrainerCallback

    dump = str(tmp_path / "dump")
    _, _, trainer = _hf_run(str(tmp_path), TdbgTrainerCallback(dump, series=True, iterations=()), steps=6,
                            learning_rate=1e-3, lr_scheduler_type="linear")
    assert trainer.state.global_step == 6
    r = open_dump(dump).rank(0)
    assert r.iterations() == [] and r.series is not None and r.series.origin == "recorded"
    assert r.series.steps().tolist() == list(range(trainer.state.global_step))
    assert np.isfinite(r.series.scalar("loss")[1]).all()
    assert np.allclose(r.series.scalar("lr")[1], 1e-3 * (1 - np.arange(6) / 6))     # the linear schedule
    grads = {t.param for t in r.series.catalog() if t.role == "gradient"}
    assert grads == {n for n, p in trainer.model.named_parameters() if p.requires_grad}


def test_callbacks_take_every_recorder_option() -> None:
    """The callbacks' session takes each option of Recorder.__init__ (but what the trainer hands over)."""
    import inspect

    from debugger.torch import Recorder
    from debugger.torch.callbacks import RecordingSession

    rec = set(inspect.signature(Recorder.__init__).parameters) - {"self", "path", "model", "optimizer"}
    assert rec - set(inspect.signature(RecordingSession.__init__).parameters) == set()


def test_callbacks_check_the_options_where_they_are_written(tmp_path: Any) -> None:
    """A trigger without the series, a bad flush period or compression: an error when the callback is made,
    not when training starts; the series' options together are accepted."""
    from debugger.torch import Trigger
    from debugger.torch.callbacks import RecordingSession

    with pytest.raises(ValueError, match="series=True"):
        RecordingSession(tmp_path / "d", trigger=Trigger())
    with pytest.raises(ValueError, match="series=True"):
        RecordingSession(tmp_path / "d", touch_file=tmp_path / "now")
    with pytest.raises(ValueError, match="series_flush_seconds"):
        RecordingSession(tmp_path / "d", series=True, series_flush_seconds=0)
    with pytest.raises(ValueError, match="compression"):
        RecordingSession(tmp_path / "d", compression="zip")
    with pytest.raises(TypeError, match="Trigger"):
        RecordingSession(tmp_path / "d", series=True, trigger="loss")
    s = RecordingSession(tmp_path / "d", series=True, series_flush_seconds=1.0, trigger=Trigger(steps=2),
                         touch_file=tmp_path / "now", level="parameters", replay=False)
    assert s.options["series"] and s.options["series_flush_seconds"] == 1.0 and s.options["level"] == "parameters"


# ---- lightning.Trainer ---------------------------------------------------------------------------
def _lightning_run(callback: Any, accumulate: int = 2, steps: int = STEPS) -> tuple[_Truth, dict[str, np.ndarray]]:
    import lightning as L

    truth = _Truth()

    class Net(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))

        def forward(self, x: Any) -> Any:
            return self.net(x)

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            x, y = batch
            return torch.nn.functional.mse_loss(self(x), y)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)

    class Watch(L.Callback):
        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            truth.watch(pl_module, trainer.optimizers[0])

    torch.manual_seed(0)
    model = Net()
    x = torch.randn(48, 8, generator=torch.Generator().manual_seed(1))
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)
    trainer = L.Trainer(accelerator="cpu", max_steps=steps, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, accumulate_grad_batches=accumulate,
                        gradient_clip_val=0.5, callbacks=[Watch()] + ([callback] if callback else []))
    trainer.fit(model, data)
    return truth, _final(model)


@pytest.mark.filterwarnings("ignore:`isinstance\\(treespec, LeafSpec\\)` is deprecated")
def test_lightning_trainer_records_every_optimizer_step(tmp_path: Any) -> None:
    """A LightningModule (SGD with momentum, its forward and backward run inside optimizer.step(closure),
    2 batches accumulated per step, gradient clipping after the closure): one iteration per optimizer
    step, the forward in the model's scope (not the optimizer's), gradients as clipped and used by the
    step, final weights as trained, training bit-identical without the callback."""
    pytest.importorskip("lightning")
    from debugger.torch.callbacks import TdbgLightningCallback

    dump = str(tmp_path / "dump")
    truth, final = _lightning_run(TdbgLightningCallback(dump))
    plain, plain_final = _lightning_run(None)
    assert all(np.array_equal(final[n], plain_final[n]) for n in final)
    assert all(np.array_equal(a[n], b[n]) for a, b in zip(truth.grads, plain.grads) for n in a)
    _assert_dump_holds(dump, truth, final, set(final))
    assert _losses_per_iteration(dump) == {i: 2 for i in range(STEPS)}
    r = open_dump(dump).rank(0)
    for g in r.graphs.values():
        ops = {(n.name.split("/")[0], n.op_type) for n in g.nodes()}
        assert ("model", "addmm") in ops and not any(s.startswith("optimizer-") and op == "addmm" for s, op in ops)


def _lightning_validated(out: str, callback: Any, corrupt_at: int | None = None) -> list[float]:
    """Lightning with bf16 autocast, a validation loop after each epoch that logs its loss (Lightning sums
    the detached loss into a metric that starts at zero) and ModelCheckpoint watching it: the losses.
    ``corrupt_at``: the validation after that epoch writes an inf into a weight row."""
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint

    losses: list[float] = []

    class Net(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                                           torch.nn.Linear(32, 1))

        def forward(self, x: Any) -> Any:
            return self.net(x)

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            loss = torch.nn.functional.mse_loss(self(batch[0]).float(), batch[1])
            losses.append(float(loss.detach()))
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            self.log("val_loss", torch.nn.functional.mse_loss(self(batch[0]).float(), batch[1]))
            if self.current_epoch == corrupt_at and batch_idx == 0 and not self.trainer.sanity_checking:
                self.net[3].weight[0].fill_(float("inf"))      # a fault in validation that the training reads

        def configure_optimizers(self) -> Any:
            return torch.optim.AdamW(self.parameters(), lr=1e-2)

    torch.manual_seed(0)
    model = Net()
    g = torch.Generator().manual_seed(1)
    x, xv = torch.randn(24, 8, generator=g), torch.randn(8, 8, generator=g)
    train = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)
    val = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xv, xv.sum(1, keepdim=True)), batch_size=4)
    trainer = L.Trainer(accelerator="cpu", max_epochs=2, logger=False, precision="bf16-mixed", default_root_dir=out,
                        enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[ModelCheckpoint(dirpath=os.path.join(out, "ckpt"), monitor="val_loss")]
                        + ([callback] if callback else []))
    trainer.fit(model, train, val)
    return losses


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:`isinstance\\(treespec, LeafSpec\\)` is deprecated")
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_lightning_validation_metric_is_bookkeeping(tmp_path: Any) -> None:
    """Lightning's validation runs between two optimizer steps, so level "ops" records it inside the next
    iteration: its loss, detached by self.log and summed into an accumulator that starts at zero, never
    reaches a backward. The accumulator is bookkeeping (it fired tensor_all_zero on a healthy run); the
    validation forward stays checked: an inf it writes into a weight is the headline, at that iteration."""
    pytest.importorskip("lightning")
    from debugger.torch.callbacks import TdbgLightningCallback

    dump = str(tmp_path / "dump")
    recorded = _lightning_validated(str(tmp_path / "a"), TdbgLightningCallback(dump, level="ops", save="statistics"))
    assert recorded == _lightning_validated(str(tmp_path / "b"), None)
    r = open_dump(dump).rank(0)
    assert any(n.op_type == "mse_loss" and n.kind != "loss" for g in r.graphs.values() for n in g.nodes()), \
        "the validation loop is recorded inside a training iteration"
    res = run_cli("scan", dump, "--no-cache", "--json")
    assert res.code == 0, [(h["watchpoint"], h["node"], h["iteration"]) for h in res.json["hits"]]
    faulty = str(tmp_path / "fault")
    _lightning_validated(str(tmp_path / "c"), TdbgLightningCallback(faulty, level="ops", save="statistics"),
                         corrupt_at=0)
    res = run_cli("scan", faulty)
    assert res.code == 1, res.out
    head = next(line for line in res.out.splitlines() if line.startswith("First problem"))
    assert "at iteration 6" in head and "fill_" in head, res.out


@pytest.mark.filterwarnings("ignore:`isinstance\\(treespec, LeafSpec\\)` is deprecated")
def test_a_recorder_that_cannot_start_warns_and_training_goes_on(tmp_path: Any) -> None:
    """A dump path that is a file: a RuntimeWarning naming it, and the same training as without the callback."""
    pytest.importorskip("lightning")
    from debugger.torch.callbacks import TdbgLightningCallback

    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    with pytest.warns(RuntimeWarning, match="could not start recording in .*a-file"):
        _, final = _lightning_run(TdbgLightningCallback(blocked))
    _, plain_final = _lightning_run(None)
    assert all(np.array_equal(final[n], plain_final[n]) for n in final)
    assert blocked.read_text() == "not a folder"


@pytest.mark.filterwarnings("ignore:`isinstance\\(treespec, LeafSpec\\)` is deprecated")
def test_lightning_trainer_records_the_per_step_series(tmp_path: Any) -> None:
    """series=True with level="parameters" through the Lightning callback, 2 batches a step: one series step
    and one deep iteration per optimizer step of the Trainer, with its loss, learning rate and gradients."""
    pytest.importorskip("lightning")
    from debugger.torch.callbacks import TdbgLightningCallback

    dump = str(tmp_path / "dump")
    truth, _ = _lightning_run(TdbgLightningCallback(dump, series=True, level="parameters"), steps=5)
    r = open_dump(dump).rank(0)
    assert len(truth.grads) == 5 and r.series is not None and r.series.origin == "recorded"
    assert r.series.steps().tolist() == r.iterations() == list(range(5))
    assert np.allclose(r.series.scalar("lr")[1], 0.1) and np.isfinite(r.series.scalar("loss")[1]).all()
    assert {t.param for t in r.series.catalog() if t.role == "gradient"} == set(truth.grads[0])


@pytest.mark.filterwarnings("ignore:`isinstance\\(treespec, LeafSpec\\)` is deprecated")
def test_lightning_series_gradients_are_the_ones_each_step_used(tmp_path: Any) -> None:
    """The series' gradient of each step is the one its optimizer step used (as the deep capture's is)."""
    pytest.importorskip("lightning")
    from debugger.torch.callbacks import TdbgLightningCallback

    dump = str(tmp_path / "dump")
    truth, _ = _lightning_run(TdbgLightningCallback(dump, series=True, iterations=()), accumulate=1, steps=4)
    _, l2 = open_dump(dump).rank(0).series.curve("net.0.weight.grad", "l2norm")
    assert np.allclose(l2, [np.linalg.norm(g["net.0.weight"]) for g in truth.grads], rtol=1e-5)


def test_recorder_follows_a_positional_step_closure(tmp_path: Any) -> None:
    """opt.step(closure) in a plain loop: the closure's forward is the model's, its gradients recorded."""
    from debugger.torch import Recorder

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    truth = _Truth()
    truth.watch(model, opt)
    x = torch.randn(5, 3)

    def closure() -> Any:
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        return loss

    dump = str(tmp_path / "dump")
    with Recorder(dump, model, opt) as rec:
        for _ in range(STEPS):
            opt.step(closure)
            rec.step()
    _assert_dump_holds(dump, truth, _final(model), {"weight", "bias"})


def test_importing_callbacks_imports_neither_trainer_library() -> None:
    """debugger.torch.callbacks loads transformers or lightning only when their class is asked for."""
    code = ("import sys, debugger.torch.callbacks as c; "
            "assert not {'transformers', 'lightning', 'pytorch_lightning'} & set(sys.modules), 'eager'; "
            "import transformers, lightning.pytorch as lp; "
            "assert issubclass(c.TdbgTrainerCallback, transformers.TrainerCallback); "
            "assert issubclass(c.TdbgLightningCallback, lp.Callback)")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": ROOT})
    assert p.returncode == 0, p.stderr[-2000:]
