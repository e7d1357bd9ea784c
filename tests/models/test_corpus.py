"""The real-model corpus: quiet on every healthy variant, and each planted fault found with the right headline.

Models are built by transformers, torchvision and timm (tests/models/corpus.py); truth comes from plain
torch, collected beside the recorder from the same run: the loss, which weights the step left bit-identical,
a layer's zero share from a forward hook, gradients from ``.grad``.
"""
from __future__ import annotations

import math
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("torchvision")
pytest.importorskip("timm")

import torch.nn as nn  # noqa: E402

import corpus  # noqa: E402
from debugger.watch.registry import preset  # noqa: E402
from corpus import HEALTHY, Loop, build, scan_recommended, train  # noqa: E402


# the levels that record weights, gradients and optimizer state: the weight and gradient findings hold at each
LEVELS_OF_WEIGHTS = ["ops", "modules", "parameters"]


@pytest.fixture(autouse=True)
def _one_thread():
    with corpus.quiet_threads():
        yield


def _cases() -> list[Any]:
    return [pytest.param(name, loop, save, id=f"{name}-{save}") for name, loop, modes in HEALTHY for save in modes]


@pytest.mark.parametrize("name, loop, save", _cases())
def test_healthy_runs_are_quiet(tmp_path, name: str, loop: Loop, save: str) -> None:
    """No hit and no error record from the recommended preset on a healthy run (the loss falls, per torch)."""
    path = str(tmp_path / "dump")
    truth = train(path, build(name), loop, save=save)
    assert all(math.isfinite(v) for v in truth.losses) and truth.losses[-1] < truth.losses[0], truth.losses
    res = scan_recommended(path)
    assert [(h.watchpoint, h.iteration, h.node) for h in res.hits] == []
    assert [(e.watchpoint, e.iteration, e.node, e.error) for e in res.errors] == []
    # what does not apply is said once per watchpoint and reason, never as a needs-values record
    assert not any("needs tensor values" in s.reason for s in res.skipped), res.skipped
    if loop.freeze_embeddings:          # left out of the optimizer: not a trained weight, not "frozen"
        weights = {n.param for n in _graph(path).nodes("weight")}
        assert not weights & {"bert.embeddings.word_embeddings.weight"}
        assert weights == truth.trained


def _graph(path: str) -> Any:
    from debugger import open_dump

    return open_dump(path).rank(0).graph(0)


# -- planted faults -----------------------------------------------------------------------------------
def _first(res: Any) -> tuple[str, int]:
    assert res.first is not None, "nothing found"
    return res.first.watchpoint, res.first.iteration


@pytest.mark.parametrize("save", ["statistics", "tensors"])
def test_a_nan_made_at_iteration_2_heads_the_scan_at_its_line(tmp_path, save: str) -> None:
    """GPT-2 (AdamW): a forward hook takes the log of block 1's MLP output at iteration 2 (GELU outputs are
    negative too: NaN). The headline is that log, on the hook's line, at iteration 2, though zero and
    saturation findings could come earlier; torch says the hook's input is finite and its output not."""
    seen: dict[str, bool] = {}

    def poison(module: nn.Module, args: Any, output: torch.Tensor) -> torch.Tensor:
        seen["finite_in"] = bool(torch.isfinite(output).all())
        bad = output.log()      # NAN_LINE
        seen["finite_out"] = bool(torch.isfinite(bad).all())
        return bad

    def at_2(i: int, m: nn.Module) -> Any:
        if i != 2:
            return None
        return corpus.ForwardHook(m.transformer.h[1].mlp, poison)

    path = str(tmp_path / "dump")
    train(path, build("gpt2"), Loop("adamw"), save=save, before_step=at_2)
    assert seen == {"finite_in": True, "finite_out": False}
    res = scan_recommended(path)
    assert _first(res) == ("overflow", 2)
    assert res.first.op_type == "log" and res.first.source == f"{__file__}:{_line('NAN_LINE')}"
    assert {h.iteration for h in res.hits if h.watchpoint == "overflow"} == {2}


@pytest.mark.parametrize("name", ["gpt2", "resnet18", "vit", "vit-ls"])
def test_healthy_runs_are_quiet_at_level_parameters(tmp_path, name: str) -> None:
    """At level "parameters" a healthy run is as quiet as at every operator, and the scan says what that
    level cannot answer."""
    path = str(tmp_path / "dump")
    truth = train(path, build(name), Loop("adamw"), level="parameters")
    assert truth.losses[-1] < truth.losses[0], truth.losses
    res = scan_recommended(path)
    assert [(h.watchpoint, h.iteration, h.node) for h in res.hits] == []
    assert [(e.watchpoint, e.iteration, e.node, e.error) for e in res.errors] == []
    assert res.levels == {"parameters": list(range(corpus.STEPS))}


def test_a_zero_initialised_head_is_no_vanishing_gradient_at_level_parameters(tmp_path) -> None:
    """torchvision's ViT starts with its head all zero: torch makes every gradient below it exactly zero at
    step 0 (LoRA's B does the same to its A). At "ops" the edges place the zeros at the head; "parameters"
    records no operator edges to tell, so it says so instead of reporting a healthy run's gradients as vanishing."""
    path = str(tmp_path / "dump")
    truth = train(path, build("vit"), Loop("sgd-nesterov", clip=0.5), level="parameters")
    assert truth.losses[-1] < truth.losses[0], truth.losses
    res = scan_recommended(path)
    assert [(h.watchpoint, h.iteration, h.node) for h in res.hits] == []
    said = {s.watchpoint for s in res.skipped if "found a weight all zero" in s.reason}
    assert said == {"gradient_vanishing", "tensor_all_zero"}, res.skipped


def test_tiny_initialised_weights_move_by_the_learning_rate_and_a_jump_still_fires(tmp_path) -> None:
    """timm's layer scale starts at 1e-5 and the class token at std 1e-6: AdamW's first step moves them by about
    the learning rate, an update ratio of 100 and more by torch's own numbers, on a healthy run. The preset's
    floor (epsilon=1e-3) judges such a weight by how far it moved: quiet here, while the same gamma
    multiplied by 1e4 between two steps is still the headline."""
    snaps: list[dict[str, torch.Tensor]] = []

    def keep(i: int, m: nn.Module) -> None:
        snaps.append({n: p.detach().clone() for n, p in m.named_parameters()})

    path = str(tmp_path / "healthy")
    train(path, build("vit-ls"), Loop("adamw"), level="parameters", before_step=keep)
    gamma = "blocks.0.ls1.gamma"
    before, after = snaps[0][gamma], snaps[1][gamma]
    assert float((after - before).abs().mean() / before.abs().mean()) > 10     # torch: a ratio over the threshold
    assert [(h.watchpoint, h.iteration, h.node) for h in scan_recommended(path).hits] == []

    def jump(i: int, m: nn.Module) -> None:
        if i == 2:
            with torch.no_grad():
                m.get_parameter(gamma).mul_(1e4)

    path = str(tmp_path / "jump")
    train(path, build("vit-ls"), Loop("adamw"), level="parameters", before_step=jump)
    res = scan_recommended(path)
    assert _first(res) == ("weight_change_too_large", 2) and res.first.node == gamma, res.hits


@pytest.mark.parametrize("name, loop", [("vit", Loop("sgd-nesterov", clip=0.5)), ("llama_lora", Loop("adamw"))])
def test_a_zero_initialised_weight_is_no_vanishing_gradient_at_level_modules(tmp_path, name: str, loop: Loop) -> None:
    """torchvision's ViT head and PEFT LoRA's B start all zero: torch makes the gradients of what feeds them
    exactly zero at step 0, and the head's output (and the containers returning it) all zero. Level
    "modules" links the call that read the zero weight to the calls it reads from: those gradients are
    skipped as the zero weight's, the containers' outputs as their child's, not reported."""
    if name == "llama_lora":
        pytest.importorskip("peft")
    zero_grads: set[str] = set()

    def note(i: int, m: nn.Module) -> Any:
        if i == 1:
            zero_grads.update(n for n, p in m.named_parameters() if p.grad is not None and not p.grad.any())
        return None

    path = str(tmp_path / "dump")
    train(path, build(name), loop, steps=2, before_step=note, level="modules")
    assert zero_grads, "torch made no all-zero gradient"
    res = scan_recommended(path)
    assert [(h.watchpoint, h.iteration, h.node) for h in res.hits] == []
    behind = [s for s in res.skipped if "read its weight all zero" in s.reason]
    assert {s.watchpoint for s in behind} == {"gradient_vanishing", "tensor_all_zero"}, res.skipped
    assert {node[:-len(".grad")] for s in behind for _, _, node in s.where} == zero_grads


@pytest.mark.parametrize("level", LEVELS_OF_WEIGHTS)
def test_a_layer_scale_is_no_vanishing_gradient(tmp_path, level: str) -> None:
    """timm's ConvNeXt scales each block's branch by gamma, 1e-6 at the start: torch's step-0 gradients of
    the first blocks' norms are below 1e-9, and above it divided by gamma. gradient_vanishing says so in
    ``skipped`` instead of reporting timm's default model."""
    grads: dict[str, float] = {}

    def note(i: int, m: nn.Module) -> Any:
        if i == 1:
            grads.update({n: float(p.grad.abs().mean()) for n, p in m.named_parameters() if p.grad is not None})
        return None

    path = str(tmp_path / "dump")
    train(path, build("convnext"), Loop("adamw"), steps=2, before_step=note, level=level)
    small = {n for n, g in grads.items() if g < 1e-9}
    assert "stages.0.blocks.0.norm.weight" in small and all(g / 1e-6 > 1e-9 for g in grads.values()), small
    res = scan_recommended(path)
    assert [h.param for h in res.hits if h.watchpoint == "gradient_vanishing"] == []
    scaled = [s for s in res.skipped if "tiny multiplier" in s.reason]
    assert {node[:-len(".grad")] for s in scaled for _, _, node in s.where} == small, res.skipped


def test_lambs_step_counter_is_no_zero_tensor(tmp_path) -> None:
    """timm's LAMB keeps its step counter in its parameter group, ``torch.tensor(0.0)`` when the first step
    makes it, and only counts with it: at level "ops" it is the loop's bookkeeping, not an all-zero tensor."""
    path = str(tmp_path / "dump")
    truth = train(path, build("convnext"), Loop("lamb"), steps=2)
    assert truth.losses[-1] < truth.losses[0], truth.losses
    res = scan_recommended(path)
    assert [h.node for h in res.hits if h.watchpoint == "tensor_all_zero"] == []
    counters = {node for s in res.skipped if s.watchpoint == "tensor_all_zero" and s.reason.startswith("bookkeeping")
                for _, _, node in s.where}
    graph = _graph(path)
    assert any(graph.record_of(n).op_type == "Input" for n in counters), res.skipped


@pytest.mark.parametrize("level", ["parameters", "ops"])
def test_a_warm_up_from_learning_rate_0_is_no_frozen_model(tmp_path, level: str) -> None:
    """transformers' linear warm-up (what the Trainer runs with warmup_steps) starts at learning rate 0: torch
    leaves every weight bit-identical at the first step, by design. That step is said, not reported as a
    frozen model; the steps after it are checked as usual."""
    path = str(tmp_path / "dump")
    truth = train(path, build("gpt2"), Loop("adamw", schedule="warmup-from-0"), level=level)
    assert truth.unchanged[0] == truth.trained and not truth.unchanged[1] & truth.trained     # torch's word
    res = scan_recommended(path)
    assert [(h.watchpoint, h.iteration, h.node) for h in res.hits] == []
    assert [(s["iteration"], s["cause"]) for s in res.skipped_steps] == [(0, "learning_rate_zero")]
    order = next(i for i, wp in enumerate(preset("recommended")) if wp.name == "weight_not_changed")
    checked = res.coverage[order].iterations
    assert set(range(1, corpus.STEPS)) <= checked, checked


def test_a_learning_rate_0_at_every_step_is_a_frozen_model(tmp_path) -> None:
    """The warm-up rule above never hides a model that does not train: a schedule stuck at 0 leaves every
    weight bit-identical at every step (torch), and weight_not_changed is the headline."""
    path = str(tmp_path / "dump")
    truth = train(path, build("gpt2"), Loop("adamw", schedule="zero"), level="parameters")
    assert all(u == truth.trained for u in truth.unchanged)
    res = scan_recommended(path)
    assert _first(res)[0] == "weight_not_changed" and res.skipped_steps == []


def test_a_zero_initialised_head_of_a_compiled_model_is_no_vanishing_gradient_at_level_modules(tmp_path) -> None:
    """torchvision's ViT compiled in place (``m.compile()``): at "modules" the hooks see one call, the model's,
    so no module call reads the head; its Gradient node keeps the weight as read, the all-zero head is
    found, and the gradients below it (all zero at step 0, per torch) are said, not reported."""
    grads: dict[str, torch.Tensor] = {}

    def keep(i: int, m: nn.Module) -> None:
        if i == 1:      # step 0's gradients are still there when step 1 begins
            grads.update({n: p.grad.detach().clone() for n, p in m.named_parameters() if p.grad is not None})

    model = build("vit")
    model.module.compile()
    path = str(tmp_path / "dump")
    with pytest.warns(RuntimeWarning, match="model runs compiled"):     # said once, as it should be
        train(path, model, Loop("sgd-nesterov", clip=0.5), level="modules", before_step=keep, steps=3)
    zero = {n for n, g in grads.items() if not g.any()}
    assert "heads.head.bias" not in zero and len(zero) > 10, zero     # torch: the head's zeros reach far below
    res = scan_recommended(path)
    assert [(h.watchpoint, h.iteration, h.node) for h in res.hits] == []
    said = {s.watchpoint for s in res.skipped if "found a weight all zero" in s.reason}
    assert said == {"gradient_vanishing", "tensor_all_zero"}, res.skipped


def test_a_nan_at_level_parameters_heads_the_scan_as_its_loss(tmp_path) -> None:
    """The NaN of the test above, recorded at level "parameters": no operator is recorded, so the
    headline is the first non-finite tensor the level holds, iteration 2's loss (torch says it is NaN),
    at the line that called backward(); the scan's note says the operator's origin needs level "ops"."""
    def poison(module: nn.Module, args: Any, output: torch.Tensor) -> torch.Tensor:
        return output.log()

    def at_2(i: int, m: nn.Module) -> Any:
        return corpus.ForwardHook(m.transformer.h[1].mlp, poison) if i == 2 else None

    path = str(tmp_path / "dump")
    truth = train(path, build("gpt2"), Loop("adamw"), before_step=at_2, level="parameters")
    assert math.isnan(truth.losses[2]) and all(math.isfinite(v) for v in truth.losses[:2])
    res = scan_recommended(path)
    assert _first(res) == ("overflow", 2)
    assert (res.first.node, res.first.kind) == ("loss", "loss")
    # iteration 3 began with the NaN weights the step of iteration 2 wrote: inherited, no second origin
    assert {h.iteration for h in res.hits if h.watchpoint == "overflow"} == {2}
    assert res.first.source.startswith(f"{corpus.__file__}:")
    notes = res.to_dict()["level_notes"]
    assert len(notes) == 1 and "not the operator that made it" in notes[0]


def _line(tag: str) -> int:
    with open(__file__, encoding="utf-8") as f:
        return next(i for i, text in enumerate(f, 1) if f"# {tag}" in text)


@pytest.mark.parametrize("level", LEVELS_OF_WEIGHTS)
def test_a_frozen_layer_is_the_headline(tmp_path, level: str) -> None:
    """ResNet-18, SGD with momentum; its classifier in a parameter group with learning rate 0: torch leaves
    exactly fc.weight and fc.bias unchanged at every step, and weight_not_changed names them and only them,
    at every level (the weights are in each)."""
    def groups(m: nn.Module, params: list[nn.Parameter]) -> Any:
        fc = {id(p) for p in m.fc.parameters()}
        return [{"params": [p for p in params if id(p) not in fc]},
                {"params": [p for p in params if id(p) in fc], "lr": 0.0}]

    path = str(tmp_path / "dump")
    truth = train(path, build("resnet18"), Loop("sgd-momentum"), groups=groups, level=level)
    assert all(u == {"fc.weight", "fc.bias"} for u in truth.unchanged), truth.unchanged
    res = scan_recommended(path)
    assert _first(res) == ("weight_not_changed", 0)
    frozen = {(h.iteration, h.param) for h in res.hits if h.watchpoint == "weight_not_changed"}
    assert frozen == {(i, p) for i in range(corpus.STEPS) for p in ("fc.weight", "fc.bias")}
    assert {h.watchpoint for h in res.hits} == {"weight_not_changed"}


@pytest.mark.parametrize("save", ["statistics", "tensors"])
def test_a_dead_in_place_relu_layer_is_the_headline(tmp_path, save: str) -> None:
    """ResNet-18's first ReLU is ``nn.ReLU(inplace=True)`` (ATen relu_); bn1's bias at -100 kills it. torch
    counts 100 % zeros at its output; activation_dead_layer names it, and the zeros it causes below (the
    gradients of conv1 and bn1, which then do not change) are reported there, not as findings of their own."""
    zero_share: list[float] = []

    def kill(i: int, m: nn.Module) -> Any:
        if i == 0:
            with torch.no_grad():
                m.bn1.bias.fill_(-100.0)
        return corpus.ForwardHook(m.relu, lambda mod, a, out: zero_share.append(float((out == 0).float().mean())) or None)

    path = str(tmp_path / "dump")
    train(path, build("resnet18"), Loop("sgd-momentum"), save=save, before_step=kill)
    assert zero_share and all(s == 1.0 for s in zero_share), zero_share
    res = scan_recommended(path)
    assert _first(res) == ("activation_dead_layer", 0)
    dead = {h.node for h in res.hits if h.watchpoint == "activation_dead_layer"}
    assert dead == {"model/relu-ReLU/relu_-0"}, dead
    # every finding is that ReLU's (its all-zero output is also tensor_all_zero's): none below it
    assert {h.node for h in res.hits} == dead, {(h.watchpoint, h.node) for h in res.hits}


def test_a_saturated_lstm_cell_is_found_at_its_gates(tmp_path) -> None:
    """The LSTM cell's weights scaled by 30: its gates (ATen sigmoid_/tanh_ inside nn.LSTMCell) sit at their
    asymptotes; torch computes the first time step's gates by hand and finds most within 1e-3 of them."""
    model = build("char_lstm")
    with torch.no_grad():
        for p in model.module.cell.parameters():
            p.mul_(30.0)
    ids = model.batch(0)
    cell = model.module.cell
    x = model.module.embed(ids[:, 0])
    gates = x @ cell.weight_ih.T + cell.bias_ih + cell.bias_hh
    i, f, g, o = gates.chunk(4, 1)
    acts = torch.cat([torch.sigmoid(i), torch.sigmoid(f), torch.sigmoid(o)]).flatten()
    share = float(((acts < 1e-3) | (acts > 1 - 1e-3)).float().mean())
    assert share > 0.5, share
    path = str(tmp_path / "dump")
    train(path, model, Loop("sgd-momentum", clip=1.0))
    res = scan_recommended(path)
    assert _first(res) == ("activation_saturated_layer", 0)
    sat = {h.op_type for h in res.hits if h.watchpoint == "activation_saturated_layer"}
    assert sat <= {"sigmoid_", "tanh_", "tanh"} and "sigmoid_" in sat


@pytest.mark.parametrize("level", LEVELS_OF_WEIGHTS)
def test_vanishing_gradients_of_a_deep_plain_net(tmp_path, level: str) -> None:
    """Twenty sigmoid layers, no normalisation, SGD: torch's first-layer gradients are below 1e-9 and
    gradient_vanishing heads the scan with the first layers."""
    grads: dict[str, float] = {}

    def deep() -> corpus.Model:
        return corpus.Model(corpus.MLP(depth=20, width=16, act=nn.Sigmoid), corpus._vectors, corpus._classify)

    def note(i: int, m: nn.Module) -> Any:
        if i == 1:
            for n, p in m.named_parameters():
                if p.grad is not None:
                    grads[n] = float(p.grad.abs().mean())
        return None

    torch.manual_seed(0)
    path = str(tmp_path / "dump")
    train(path, deep(), Loop("sgd-momentum"), before_step=note, level=level)
    assert grads["layers.0.weight"] < 1e-9 and grads["head.weight"] > 1e-4, grads
    res = scan_recommended(path)
    assert _first(res) == ("gradient_vanishing", 0)
    vanished = {h.param for h in res.hits if h.watchpoint == "gradient_vanishing" and h.iteration == 0}
    assert "layers.0.weight" in vanished and "head.weight" not in vanished
    # torch's truth, layer by layer, at the gradients noted before step 1 (those of step 0)
    assert {p for p in vanished if p.endswith(".weight")} == {n for n, g in grads.items()
                                                              if n.endswith(".weight") and g < 1e-9}


@pytest.mark.parametrize("level", LEVELS_OF_WEIGHTS)
def test_exploding_weights_from_a_too_high_learning_rate(tmp_path, level: str) -> None:
    """An MLP with SGD at lr 50: torch's update moves a weight by more than ten times its size in the
    first step (the losses stay finite); weight_change_too_large heads the scan."""
    ratios: dict[str, float] = {}
    before: dict[str, torch.Tensor] = {}

    def note(i: int, m: nn.Module) -> Any:
        if i == 0:
            before.update({n: p.detach().clone() for n, p in m.named_parameters()})
        elif i == 1:
            ratios.update({n: float((p.detach() - before[n]).abs().mean() / before[n].abs().mean())
                           for n, p in m.named_parameters()})
        return None

    path = str(tmp_path / "dump")
    truth = train(path, build("mlp"), Loop("sgd-momentum", lr=50.0), before_step=note, level=level)
    assert all(math.isfinite(v) for v in truth.losses), truth.losses
    assert max(ratios.values()) > 10, ratios
    res = scan_recommended(path)
    assert _first(res) == ("weight_change_too_large", 0)
    big = {h.param for h in res.hits if h.watchpoint == "weight_change_too_large" and h.iteration == 0}
    assert big == {n for n, r in ratios.items() if r > 10}


# -- every model and loop: a NaN and a frozen layer planted -------------------------------------------
def _first_with_parameters(m: nn.Module) -> nn.Module:
    """The first module (in definition order) that holds parameters of its own."""
    return next(mod for mod in m.modules() if next(mod.parameters(recurse=False), None) is not None)


def _last_layer(m: nn.Module) -> str:
    """The module path of the last trained parameter the model lists (its head, its final norm, or LoRA's
    last adapter: the base model's are frozen)."""
    return [n for n, p in m.named_parameters() if p.requires_grad][-1].rsplit(".", 1)[0]


@pytest.mark.parametrize("name, loop", [pytest.param(n, loop, id=n) for n, loop, _ in HEALTHY])
def test_every_model_and_loop_heads_a_planted_nan_with_its_line(tmp_path, name: str, loop: Loop) -> None:
    """At iteration 2 a forward hook on the model's first layer takes the square root of a negative copy
    of its output: torch says the hook's input is finite and its output not; the headline is that sqrt."""
    seen: list[tuple[bool, bool]] = []

    def poison(module: nn.Module, args: Any, output: torch.Tensor) -> torch.Tensor:
        bad = torch.sqrt(output - output.detach().abs().max() - 1)     # SQRT_LINE
        seen.append((bool(torch.isfinite(output).all()), bool(torch.isfinite(bad).all())))
        return bad

    def at_2(i: int, m: nn.Module) -> Any:
        return corpus.ForwardHook(_first_with_parameters(m), poison) if i == 2 else None

    path = str(tmp_path / "dump")
    train(path, build(name), loop, before_step=at_2)
    assert seen and seen[0] == (True, False), seen
    res = scan_recommended(path)
    assert _first(res) == ("overflow", 2)
    assert res.first.op_type == "sqrt" and res.first.source == f"{__file__}:{_line('SQRT_LINE')}"


@pytest.mark.parametrize("name, loop", [pytest.param(n, loop, id=n) for n, loop, _ in HEALTHY])
def test_every_model_and_loop_heads_a_layer_at_learning_rate_0(tmp_path, name: str, loop: Loop) -> None:
    """The model's last layer in a parameter group with learning rate 0: torch leaves exactly its
    parameters unchanged at every step, and weight_not_changed is the headline, on exactly those."""
    model = build(name)
    layer = _last_layer(model.module)
    frozen = {n for n, _ in model.module.named_parameters() if n.rsplit(".", 1)[0] == layer}

    def groups(m: nn.Module, params: list[nn.Parameter]) -> Any:
        names = {id(p): n for n, p in m.named_parameters()}
        return [{"params": [p for p in params if names[id(p)] not in frozen]},
                {"params": [p for p in params if names[id(p)] in frozen], "lr": 0.0}]

    path = str(tmp_path / "dump")
    truth = train(path, model, loop, groups=groups)
    assert all(frozen <= u for u in truth.unchanged), (frozen, truth.unchanged)
    res = scan_recommended(path)
    assert _first(res) == ("weight_not_changed", 0)
    found = {h.param for h in res.hits if h.watchpoint == "weight_not_changed"}
    assert found == frozen


@pytest.mark.parametrize("level", LEVELS_OF_WEIGHTS)
def test_a_top1_router_that_gets_no_gradient_is_found_at_its_first_step(tmp_path, level: str) -> None:
    """transformers' Mixtral with one expert per token and no auxiliary loss: the routing weight, renormalised
    over the top-1 (x / x.sum()), is 1 whatever the router says, so torch gives the router's weight an
    all-zero gradient from step 0: it never trains. The zeros start at a backward intermediate (the
    renormalisation's gradient, x' - x'), which no rule judges: at "ops" they are reported at the router's
    gradient from iteration 0, as at the coarser levels (was: skipped as "reported where the zeros start",
    the first finding put off to a step where rounding left 1e-11)."""
    from transformers import MixtralConfig, MixtralForCausalLM

    from debugger.torch import Recorder

    cfg = MixtralConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
                        num_attention_heads=2, num_key_value_heads=1, num_local_experts=4, num_experts_per_tok=1,
                        max_position_embeddings=32, router_aux_loss_coef=0.0, attn_implementation="eager")
    torch.manual_seed(0)
    m = MixtralForCausalLM(cfg)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    gate = m.model.layers[0].mlp.gate.weight
    grad_max: list[float] = []
    path = str(tmp_path / "dump")
    with Recorder(path, m, opt, level=level, save="statistics") as rec:
        for i in range(2):
            ids = torch.randint(0, 64, (1, 3), generator=torch.Generator().manual_seed(i))
            loss = m(input_ids=ids, labels=ids).loss
            opt.zero_grad()
            loss.backward()
            grad_max.append(gate.grad.abs().max().item())
            opt.step()
            rec.step()
    assert grad_max[0] == 0 and max(grad_max) < 1e-9, grad_max     # torch: the router gets no gradient
    res = scan_recommended(path)
    found = {(h.watchpoint, h.iteration) for h in res.hits if h.node == "model.layers.0.mlp.gate.weight.grad"}
    assert {("gradient_vanishing", 0), ("tensor_all_zero", 0), ("gradient_vanishing", 1)} <= found, res.hits
    assert (res.first.watchpoint, res.first.iteration, res.first.node) == (
        "gradient_vanishing", 0, "model.layers.0.mlp.gate.weight.grad")
