"""The recorder under torch.compile and fused optimizers, on a nanoGPT-style program (nanogpt_kit):
every compile mode records at "parameters", with the series and at "modules" with losses and final
weights bit-identical to the same compiled run unrecorded; level "ops" says that it runs eagerly; the
fused AdamW's weights are read anew at every step; a weight changed between steps is the headline."""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from clirun import run_cli, scan_quiet  # noqa: E402
from models.corpus import quiet_threads  # noqa: E402
from nanogpt_kit import COMPILE_MODES, inf_into_weight_at, scale_weight_at, train  # noqa: E402
from recorder_kit import tensors_by_iteration  # noqa: E402

from debugger.formats.records import Kind  # noqa: E402
from debugger.model import open_dump  # noqa: E402

# Dynamo looks up .grad of a non-leaf when it resumes after a graph break (transformers' loss, a
# training_step's loss.item()), and torch's own filter for that warning does not hold against pytest's "error"
pytestmark = pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf:UserWarning")
STEPS = 6
LEVELS = {"parameters": {"level": "parameters"}, "series": {"level": "parameters", "series": True},
          "modules": {"level": "modules"}, "ops": {"level": "ops"}}
_plain: dict[tuple[str, bool], Any] = {}


def _unrecorded(mode: str, fused: bool = True) -> Any:
    """The run without the recorder (once per mode: its compiled code is then cached for the rest)."""
    if (mode, fused) not in _plain:
        _plain[(mode, fused)] = train(mode, STEPS, fused=fused)
    return _plain[(mode, fused)]


def _assert_same_training(a: Any, b: Any) -> None:
    assert a.losses == b.losses, "the recorder changed a loss bit"
    for name, w in a.weights.items():
        assert torch.equal(w, b.weights[name]), f"the recorder changed {name}"


def _kinds(dump: str) -> dict[int, dict[str, int]]:
    """iteration -> kind -> how many nodes of that kind hold a stored output."""
    out: dict[int, dict[str, int]] = {}
    for it, tmap in tensors_by_iteration(dump).items():
        for (_, io, _), ref in tmap.items():
            if io == "output":
                out.setdefault(it, {}).setdefault(ref.kind, 0)
                out[it][ref.kind] += 1
    return out


@pytest.mark.parametrize("mode,level", [(m, lv) for m in COMPILE_MODES for lv in LEVELS if lv != "ops"] + [("eager", "ops")])
def test_compiled_training_is_recorded_unchanged(tmp_path: Any, mode: str, level: str) -> None:
    """Each compile mode x level (and eager at every level): the same losses and weights, bit for bit,
    every iteration recorded with its weights, gradients, optimizer state and loss, and the healthy run
    (its evaluation buffer included) scans clean."""
    dump = str(tmp_path / "d")
    rec = train(mode, STEPS, record={**LEVELS[level], "save": "statistics"}, path=dump)
    _assert_same_training(_unrecorded(mode), rec)
    kinds = _kinds(dump)
    assert sorted(kinds) == list(range(STEPS))
    n_weights = len(rec.weights)
    for it, k in kinds.items():
        assert k.get(Kind.WEIGHT) == n_weights and k.get(Kind.GRADIENT) == n_weights, (it, k)
        assert k.get(Kind.LOSS) == 1 and k.get(Kind.OPTIMIZER_STATE, 0) >= 2 * n_weights, (it, k)
    said = " ".join(rec.warnings)
    assert ("no optimizer step hook ran" in said) == (mode == "step"), said
    if level == "modules" and mode != "eager":      # what compilation hides at "modules" is said
        assert "runs compiled" in said, said
    if mode == "eager":
        assert not said, said
    scan_quiet(dump)


def test_compiled_step_with_its_own_zero_grad_says_gradients_are_lost(tmp_path: Any) -> None:
    """A compiled step that zeroes its gradients itself leaves none for rec.step(): said, not silent."""
    import nanogpt_kit as K

    torch.manual_seed(0)
    model = K.GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    @torch.compile
    def step(x: Any, y: Any) -> Any:
        _, loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    from debugger.torch import Recorder
    with pytest.warns(RuntimeWarning, match="gradients are not recorded .*call it before zero_grad"):
        with Recorder(tmp_path / "d", model, opt, level="parameters", save="statistics") as rec:
            for i in range(3):
                step(*K.get_batch(i))
                rec.step()
    kinds = _kinds(str(tmp_path / "d"))
    assert all(k.get(Kind.GRADIENT, 0) == 0 and k.get(Kind.WEIGHT) for k in kinds.values())


@pytest.mark.parametrize("mode", ["compile", "module.compile"])
def test_ops_on_a_compiled_model_keeps_the_compiled_program(tmp_path: Any, mode: str) -> None:
    """Level "ops" would run compiled code eagerly: by default its iterations are recorded at the compiled
    program's boundary ("modules"), the training bit-identical, and that is said once."""
    dump = str(tmp_path / "d")
    rec = train(mode, STEPS, record={"level": "ops", "save": "statistics"}, path=dump)
    _assert_same_training(_unrecorded(mode), rec)
    said = [w for w in rec.warnings if 'are recorded at level "modules"' in w]
    assert len(said) == 1 and "compiled_ops=\"eager\"" in said[0], rec.warnings
    r = open_dump(dump).rank(0)
    assert {r.graphs[g].level for g in r.graphs} == {"modules"}
    scan_quiet(dump)


def test_ops_in_a_compiled_step_says_the_first_iteration_ran_eagerly(tmp_path: Any) -> None:
    """A compiled train step around an uncompiled model is found compiled only once it runs: the first
    "ops" iteration ran eagerly (said, with its consequence), the next ones are taken at the boundary."""
    dump = str(tmp_path / "d")
    rec = train("step", 4, record={"level": "ops", "save": "statistics"}, path=dump)
    said = [w for w in rec.warnings if "ran eagerly" in w]
    assert len(said) == 1, rec.warnings
    assert "the next iterations at \"ops\" are recorded at the compiled program's boundary" in said[0]
    # found at the first iteration whose compiled step ran (or, its code cached by Dynamo from an earlier
    # run, at the first that ran it without a module call): that one at "ops", the rest at the boundary
    found = int(said[0].split("iteration ")[1].split()[0])
    r = open_dump(dump).rank(0)
    levels = {it: r.graphs[g].level for g in r.graphs for it in r.iterations(g)}
    assert found <= 1 and levels == {i: "ops" if i <= found else "modules" for i in range(4)}, (found, levels)


def test_ops_on_a_compiled_model_eagerly_when_asked(tmp_path: Any) -> None:
    """compiled_ops="eager": every operator is recorded, the iterations running eagerly, said once."""
    rec = train("compile", 3, record={"level": "ops", "save": "statistics", "compiled_ops": "eager"},
                path=tmp_path / "d")
    eager = [w for w in rec.warnings if "ran eagerly" in w]
    assert len(eager) == 1 and "as Recorder(compiled_ops=\"eager\") asks" in eager[0], rec.warnings
    r = open_dump(str(tmp_path / "d")).rank(0)
    assert {r.graphs[g].level for g in r.graphs} == {"ops"}
    assert sum(1 for g in r.graphs for _ in r.graphs[g].nodes()) > 500


def test_parameters_level_leaves_module_calls_alone(tmp_path: Any) -> None:
    """At "parameters" no global module hook is installed (nothing for Dynamo to trace, no cost per
    call); the first iteration at "modules" installs them."""
    import nanogpt_kit as K
    from debugger.torch import Recorder

    hooks = torch.nn.modules.module._global_forward_pre_hooks
    model = K.GPT()
    opt = torch.optim.AdamW(model.parameters())
    with Recorder(tmp_path / "d", model, opt, level={"parameters": "0-1", "modules": "2"}) as rec:
        for i in range(3):
            assert len(hooks) == (1 if i == 2 else 0), i
            _, loss = model(*K.get_batch(i))
            loss.backward()
            opt.step()
            rec.step()
    assert not hooks


@pytest.mark.parametrize("optimizer", ["adamw-fused", "adamw-foreach", "adam-fused", "sgd-fused"])
@pytest.mark.parametrize("save", ["tensors", "statistics"])
@pytest.mark.parametrize("level", ["parameters", "modules"])
def test_every_optimizer_kernel_moves_the_recorded_weights(tmp_path: Any, optimizer: str, save: str,
                                                           level: str) -> None:
    """Fused and foreach kernels write weights and state without bumping their version counters: the
    recorder reads them anew at every step (weights as plain torch saw them, a healthy run scans clean)."""
    import nanogpt_kit as K
    from debugger.torch import Recorder

    torch.manual_seed(0)
    model = K.GPT()
    name, kind = optimizer.split("-")
    cls = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam, "sgd": torch.optim.SGD}[name]
    extra = {"momentum": 0.9} if name == "sgd" else {}
    opt = cls(model.parameters(), lr=1e-3, **extra, **{kind: True})
    truth = []
    with Recorder(tmp_path / "d", model, opt, level=level, save=save) as rec:
        for i in range(4):
            opt.zero_grad()
            model(*K.get_batch(i))[1].backward()
            opt.step()
            truth.append(model.h[0].c_fc.weight.detach().clone())
            rec.step()
    stored = tensors_by_iteration(str(tmp_path / "d"))
    for i, want in enumerate(truth):
        ref = stored[i][("h.0.c_fc.weight", "output", 0)]
        if save == "tensors":
            np.testing.assert_array_equal(ref.value(), want.numpy())
        else:
            assert ref.source.stored_stats()["max"] == pytest.approx(float(want.max()), rel=1e-6)
    scan_quiet(str(tmp_path / "d"))


@pytest.mark.parametrize("mode", ["eager", "compile"])
@pytest.mark.parametrize("save", ["tensors", "statistics"])
@pytest.mark.parametrize("level", ["parameters", "modules"])
def test_weight_scaled_between_steps_is_the_headline(tmp_path: Any, mode: str, save: str, level: str) -> None:
    """A weight multiplied by 1e4 between steps (through .data: no version bump, no optimizer): its
    update at that iteration is the first problem, compiled or not, in both save modes."""
    dump = str(tmp_path / "d")
    run = train(mode, STEPS, record={"level": level, "save": save}, path=dump, fault=scale_weight_at(3))
    assert run.losses == train(mode, STEPS, fault=scale_weight_at(3)).losses
    r = run_cli("scan", dump)
    assert r.code == 1, r.out
    assert "First problem: weight_change_too_large at iteration 3, rank 0: h.0.c_fc.weight" in r.out, r.out


@pytest.mark.parametrize("mode,level", [("eager", "parameters"), ("compile", "parameters"), ("compile", "modules"),
                                        ("compile", "ops")])
def test_inf_written_into_a_weight_is_the_headline(tmp_path: Any, mode: str, level: str) -> None:
    """An inf written into a weight row between steps: the first non-finite tensor is the headline at
    that iteration, never put off to an earlier iteration that reported nothing. A compiled model at "ops"
    (Inductor, not the "tdbg" backend: recorded at its boundary) keeps the weight as read, as at "modules"
    (was: the loss, its origin "not in the dump")."""
    dump = str(tmp_path / "d")
    train(mode, STEPS, record={"level": level, "save": "statistics"}, path=dump, fault=inf_into_weight_at(3))
    r = run_cli("scan", dump)
    assert r.code == 1, r.out
    head = next(line for line in r.out.splitlines() if line.startswith("First problem"))
    assert "iteration 3" in head and "h.0.c_fc.weight" in head, r.out


@pytest.mark.slow
@pytest.mark.parametrize("level", ["modules", "ops"])
def test_aot_eager_graph_is_no_module_call(tmp_path: Any, level: str) -> None:
    """Backend "aot_eager" runs the graph AOTAutograd compiled as a torch.fx.GraphModule, whose call the global
    module hooks see: it is the compiled program, not a module of the user's, so no node is recorded for it
    (its outputs hold the weights backward keeps: nanoGPT's zero-initialised LayerNorm biases were judged
    as all-zero activations), and the healthy run scans clean with the same losses and weights."""
    dump = str(tmp_path / "d")
    rec = train("compile", STEPS, record={"level": level, "save": "statistics"}, path=dump, backend="aot_eager")
    _assert_same_training(train("compile", STEPS, backend="aot_eager"), rec)
    for graph in open_dump(dump).rank(0).graphs.values():
        assert not [n for n in graph if "GraphModule" in n], "a compiled graph recorded as a module call"
        assert "model" in graph, "the compiled model's call is one node"
    scan_quiet(dump)
    if level == "ops":      # recorded at the boundary too: the fault is checked once
        return
    faulty = str(tmp_path / "f")
    train("compile", STEPS, record={"level": level, "save": "statistics"}, path=faulty, backend="aot_eager",
          fault=inf_into_weight_at(3))
    r = run_cli("scan", faulty)
    assert r.code == 1, r.out
    head = next(line for line in r.out.splitlines() if line.startswith("First problem"))
    assert "iteration 3" in head and "h.0.c_fc.weight" in head, r.out


@pytest.mark.parametrize("level", ["parameters", "ops"])
def test_hf_trainer_compiled_with_its_default_optimizer(tmp_path: Any, level: str) -> None:
    """transformers.Trainer with torch_compile=True and its default optimizer (fused AdamW on torch >= 2.8),
    recorded by the callback: the same losses, clean, weights moving; at "ops" the Trainer's compiling
    (out of the recorder's sight) is known from its arguments: recorded at the boundary from step 0."""
    pytest.importorskip("transformers")
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

    from debugger.torch.callbacks import TdbgTrainerCallback

    class Data(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 32

        def __getitem__(self, i: int) -> dict[str, Any]:
            ids = torch.randint(0, 64, (16,), generator=torch.Generator().manual_seed(i))
            return {"input_ids": ids, "labels": ids}

    class Losses(TrainerCallback):
        def __init__(self) -> None:
            self.losses: list[float] = []

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            if logs and "loss" in logs:
                self.losses.append(float(logs["loss"]))

    def run(record: bool) -> tuple[list[float], str]:
        torch.manual_seed(0)
        model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=16))
        args = TrainingArguments(output_dir=str(tmp_path / "hf"), max_steps=6, per_device_train_batch_size=4,
                                 logging_steps=1, report_to=[], save_strategy="no", torch_compile=True,
                                 use_cpu=True, seed=0, disable_tqdm=True)
        losses = Losses()
        cbs: list[Any] = [losses]
        if record:
            cbs.append(TdbgTrainerCallback(tmp_path / "d", level=level, save="statistics"))
        Trainer(model=model, args=args, train_dataset=Data(), callbacks=cbs).train()
        return losses.losses, str(args.optim)

    plain, optim = run(False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        recorded, _ = run(True)
    said = [str(w.message) for w in caught if "tdbg" in str(w.message)]
    assert said == ([] if level == "parameters" else [said[0]]), said
    if level == "ops":
        assert "iteration 0 and the next at level \"ops\" are recorded at level \"modules\"" in said[0]
    assert "fused" in optim.lower(), optim
    assert plain == recorded and len(plain) == 6
    scan_quiet(str(tmp_path / "d"))


@pytest.mark.filterwarnings("ignore:`isinstance\\(treespec, LeafSpec\\)` is deprecated")
@pytest.mark.parametrize("level", ["parameters", "modules", "ops"])
def test_lightning_compiled_module(tmp_path: Any, level: str) -> None:
    """Lightning fitting ``torch.compile(module)`` (it keeps the module and swaps its forward), fused
    AdamW, recorded by the callback: the same losses at every level ("ops" at the boundary), clean."""
    pytest.importorskip("lightning")
    import lightning as L

    import nanogpt_kit as K
    from debugger.torch.callbacks import TdbgLightningCallback

    class Lit(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.gpt, self.losses = K.GPT(), []

        def forward(self, x: Any, y: Any) -> Any:
            return self.gpt(x, y)[1]

        def training_step(self, batch: Any, i: int) -> Any:
            loss = self(*batch)
            self.losses.append(loss.item())
            return loss

        def configure_optimizers(self) -> Any:
            return torch.optim.AdamW(self.parameters(), lr=1e-3, fused=True)

    data = [tuple(t[0] for t in K.get_batch(i)) for i in range(6)]

    def run(record: bool) -> list[float]:
        torch.manual_seed(0)
        lit = Lit()
        cbs = [TdbgLightningCallback(tmp_path / "d", level=level, save="statistics")] if record else []
        trainer = L.Trainer(max_steps=6, accelerator="cpu", logger=False, enable_checkpointing=False,
                            enable_progress_bar=False, enable_model_summary=False, callbacks=cbs)
        trainer.fit(torch.compile(lit), torch.utils.data.DataLoader(data, batch_size=2))
        return lit.losses

    with quiet_threads():
        plain = run(False)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            recorded = run(True)
    assert plain == recorded and len(plain) == 6
    said = " ".join(str(w.message) for w in caught if "tdbg" in str(w.message))
    assert ("recorded at level \"modules\"" in said) == (level == "ops"), said
    scan_quiet(str(tmp_path / "d"))


@pytest.mark.parametrize("level", ["parameters", "modules", "ops"])
def test_recorder_started_after_the_model_compiled_and_ran(tmp_path: Any, level: str) -> None:
    """The recorder started when the compiled model has already run (its code compiled without any hook):
    the same losses at every level, and every iteration from the start on recorded."""
    import nanogpt_kit as K
    from debugger.torch import Recorder

    def run(record: bool) -> list[float]:
        torch.manual_seed(0)
        model = K.GPT()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
        compiled = torch.compile(model)
        losses: list[float] = []
        rec = None
        for i in range(5):
            if record and i == 2:
                rec = Recorder(tmp_path / "d", compiled, opt, level=level, save="statistics").start()
            _, loss = compiled(*K.get_batch(i))
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
            if rec is not None:
                rec.step()
        if rec is not None:
            rec.close()
        return losses

    with quiet_threads():
        plain = run(False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)     # what compilation hides: said, tested above
            recorded = run(True)
    assert plain == recorded
    assert open_dump(str(tmp_path / "d")).rank(0).iterations() == [0, 1, 2]
