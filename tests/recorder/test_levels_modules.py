"""Recorder(level="modules") on real models: a small MLP, GPT-2 from transformers, torchvision's ResNet-18.

One node per module call, edges along the data, activation kinds, the statistics (or values) of every
module output and of its gradient equal to numpy's over what plain torch hooks saw in the same step,
the loss linked to the module that made it, the first non-finite module at the head of the scan, and
the training left bit-identical. Truth comes from forward hooks and tensor hooks registered beside the
recorder's, in the same run.
"""
from __future__ import annotations

import contextlib
import os
import sys
from collections import Counter
from typing import Any, Callable

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("torchvision")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models"))
import corpus  # noqa: E402
from recorder_kit import train_steps  # noqa: E402

from debugger import open_dump  # noqa: E402
from debugger.formats.records import LEVEL_MODULES  # noqa: E402
from debugger.stats.core import tensor_stats  # noqa: E402
from debugger.torch import Recorder  # noqa: E402


@pytest.fixture(autouse=True)
def _one_thread():
    with corpus.quiet_threads():
        yield


def _floats(x: Any) -> list[torch.Tensor]:
    """Floating tensors of a module's return value (tensor, tuple, list, dict), in order."""
    if isinstance(x, torch.Tensor):
        return [x] if x.is_floating_point() else []
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _floats(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _floats(v)]
    return []


class Truth:
    """Plain torch beside the recorder: calls per iteration (a forward hook on every module), and for the
    watched module paths a copy of output 0 and of its gradient."""

    def __init__(self, model: nn.Module, watch: tuple[str, ...] = ()) -> None:
        self.iteration = 0
        self.calls: Counter[int] = Counter()
        self.outs: dict[tuple[int, str], np.ndarray] = {}
        self.grads: dict[tuple[int, str], np.ndarray] = {}
        for path, m in model.named_modules():
            m.register_forward_hook(self._hook(path, path in watch))

    def _hook(self, path: str, watched: bool) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            self.calls[self.iteration] += 1
            outs = _floats(output)
            if not watched or not outs:
                return
            key = (self.iteration, path)
            self.outs[key] = outs[0].detach().float().numpy().copy()
            if outs[0].requires_grad:
                outs[0].register_hook(lambda g: self.grads.__setitem__(key, g.detach().float().numpy().copy()))
        return hook


def _train(model: nn.Module, opt: torch.optim.Optimizer, batch: Callable[[int], Any],
           loss_of: Callable[[nn.Module, Any], torch.Tensor], steps: int, path: str | None = None,
           save: str = "statistics", truth: Truth | None = None,
           during: Callable[[int, nn.Module], Any] | None = None, **options: Any) -> list[float]:
    """Train ``steps`` steps (recorded at level "modules" into ``path`` when given); the losses."""
    options.setdefault("level", LEVEL_MODULES)
    rec_ctx = Recorder(path, model, opt, save=save, **options) if path else contextlib.nullcontext()

    def step_loss(i: int) -> torch.Tensor:
        if truth is not None:
            truth.iteration = i
        with (during(i, model) if during else None) or contextlib.nullcontext():
            return loss_of(model, batch(i))
    with rec_ctx as rec:
        return train_steps(opt, step_loss, steps, rec)


def _graph(path: str) -> tuple[Any, Any]:
    """The rank and its one graph; no node is named like a scope (it would be a box and a node at once)."""
    rank = open_dump(path).rank(0)
    assert list(rank.graphs) == [0], "the iterations ran the same module calls: one graph"
    g = rank.graphs[0]
    scopes = {n.scope for n in g.nodes()}
    scopes |= {s.rsplit("/", k)[0] for s in scopes for k in range(1, s.count("/") + 1)}
    assert not scopes & set(g.names()), sorted(scopes & set(g.names()))[:3]
    return rank, g


def _forward_nodes(g: Any) -> dict[str, Any]:
    """module path -> its forward module node (modules called once an iteration)."""
    return {n.module: n for n in g.nodes() if not n.is_parameter and not n.is_backward and n.op_type != "Loss"}


def _module_calls(g: Any) -> list[str]:
    return [n.name for n in g.nodes() if not n.is_parameter and not n.is_backward and n.op_type != "Loss"]


def _assert_stats(stored: Any, values: np.ndarray, where: Any) -> None:
    want = tensor_stats(values).to_dict()
    for stat in ("count", "nan", "zeros", "min", "max"):
        assert stored[stat] == want[stat], (where, stat)
    # float32 sums: a mean near 0 is exact to ~1e-6 of the mean magnitude
    for stat in ("mean", "l2norm", "abs_mean"):
        assert stored[stat] == pytest.approx(want[stat], rel=1e-5, abs=1e-5 * want["abs_mean"]), (where, stat)


class _Net(nn.Module):
    """Linear -> ReLU -> Linear -> Tanh, written as people write a model."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.act, self.fc2, self.out = nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4), nn.Tanh()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.fc1(x))       # FC1_LINE
        return self.out(self.fc2(h))    # FC2_LINE


def _line(tag: str) -> int:
    with open(__file__, encoding="utf-8") as f:
        return next(i for i, text in enumerate(f, 1) if f"# {tag}" in text)


def _mlp() -> tuple[nn.Module, torch.optim.Optimizer, Callable[[int], Any]]:
    torch.manual_seed(0)
    model = _Net()
    with torch.no_grad():
        model.fc2.weight.mul_(8)       # some Tanh outputs saturate
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def batch(i: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(i)
        return torch.randn(16, 8, generator=g) * 3, torch.randn(16, 4, generator=g)
    return model, opt, batch


def _mse(m: nn.Module, b: Any) -> torch.Tensor:
    return F.mse_loss(m(b[0]), b[1])      # MSE_LINE (outside the model: the Loss node finds the model on the autograd graph)


@pytest.mark.parametrize("save", ["statistics", "tensors"])
def test_mlp_module_graph_and_tensors_match_plain_torch(tmp_path: Any, save: str) -> None:
    """Linear -> ReLU -> Linear -> Tanh: a node per call with the data's edges and the layers' weights as
    inputs, activation kinds, the user's source lines, each output and its gradient as torch's hooks saw
    them, the saturated count of the Tanh, and the Loss linked to the model."""
    model, opt, batch = _mlp()
    paths = ("fc1", "act", "fc2", "out", "")
    truth = Truth(model, paths)
    out = str(tmp_path / "d")
    _train(model, opt, batch, _mse, 3, out, save=save, truth=truth)
    rank, g = _graph(out)
    assert g.record.level == "modules"
    assert rank.iterations(0) == [0, 1, 2]
    assert len(_module_calls(g)) == truth.calls[0] == 5
    fwd = _forward_nodes(g)
    assert {p: (n.name, n.op_type, n.kind.value, n.activation) for p, n in fwd.items()} == {
        "": ("model/_Net", "_Net", "other", ""), "fc1": ("model/fc1-Linear", "Linear", "other", ""),
        "act": ("model/act-ReLU", "ReLU", "activation", "relu"), "fc2": ("model/fc2-Linear", "Linear", "other", ""),
        "out": ("model/out-Tanh", "Tanh", "activation", "tanh")}
    assert [s for s, _ in fwd["act"].inputs] == ["model/fc1-Linear"]
    assert [s for s, _ in fwd["fc2"].inputs] == ["model/act-ReLU", "fc2.weight", "fc2.bias"]
    assert [s for s, _ in fwd["out"].inputs] == ["model/fc2-Linear"]
    data = fwd["fc1"].inputs[0][0]
    assert g.node(data).op_type == "Input" and [s for s, _ in fwd[""].inputs] == [data]
    assert [(f.file, f.line) for f in fwd["fc1"].stack[:2]] == [(__file__, _line("FC1_LINE")), (__file__, _line("MSE_LINE"))]
    assert [f.line for f in fwd["out"].stack[:2]] == [_line("FC2_LINE"), _line("MSE_LINE")]
    assert fwd[""].stack[0].line == _line("MSE_LINE")
    # children end before their parent: the execution order lists a call as it ends
    order = g.execution_order
    assert order.index("model/out-Tanh") < order.index("model/_Net")
    loss = [n for n in g.nodes() if n.op_type == "Loss"]
    assert len(loss) == 1 and loss[0].inputs == [("model/_Net", "data")]
    for it in range(3):
        tm = rank.tensor_map(0, it)
        for p in paths:
            name = fwd[p].name
            for node, want in ((name, truth.outs[(it, p)]), (f"backward/{name}", truth.grads[(it, p)])):
                src = tm[(node, "output", 0)].source
                if save == "tensors":
                    assert np.array_equal(src.array(), want), (it, node)
                else:
                    _assert_stats(src.stored_stats(), want, (it, node))
        if save == "statistics":
            tanh_out = truth.outs[(it, "out")]
            saturated = np.count_nonzero(np.abs(tanh_out) >= np.float32(1 - 1e-3))
            assert saturated > 0, "the inputs are large enough to saturate some outputs"
            assert tm[("model/out-Tanh", "output", 0)].source.stored_extras()["saturated"] == saturated
    backward = {n.name: n for n in g.nodes() if n.is_backward and n.op_type != "Gradient"}
    assert set(backward) == {f"backward/{n.name}" for n in fwd.values()}
    b1 = backward["backward/model/act-ReLU"]
    assert b1.op_type == "ReLUBackward" and b1.scope == "backward/model"
    assert b1.inputs == [("model/act-ReLU", "data"), ("backward/model/fc2-Linear", "data")]
    assert all(f.forward_candidate for f in b1.stack) and b1.stack[0].line == _line("FC1_LINE")


def test_activation_layers_by_class() -> None:
    """Activation modules of torch and transformers (and subclasses) name their function; others none."""
    from transformers.activations import GELUActivation, NewGELUActivation

    from debugger.torch.modulelevel import module_activation

    class MyReLU(nn.ReLU):
        pass

    cases = {nn.ReLU(): "relu", MyReLU(): "relu", nn.GELU(approximate="tanh"): "gelu", NewGELUActivation(): "gelu",
             GELUActivation(): "gelu", nn.Tanh(): "tanh", nn.Sigmoid(): "sigmoid", nn.SiLU(): "silu",
             nn.Softmax(dim=-1): "softmax", nn.LeakyReLU(): "leaky_relu", nn.Hardswish(): "hardswish",
             nn.Hardtanh(0.0, 6.0): "relu6", nn.Hardtanh(): "hardtanh", nn.Threshold(0.0, 0.0): "relu",
             nn.Linear(2, 2): "", nn.LayerNorm(2): "", nn.Sequential(nn.ReLU()): ""}
    assert {type(m).__name__ + repr(i): module_activation(m) for i, m in enumerate(cases)} == \
        {type(m).__name__ + repr(i): want for i, (m, want) in enumerate(cases.items())}


def test_the_modules_filter_chooses_what_is_stored_and_the_graph_stays_whole(tmp_path: Any) -> None:
    """modules=["fc*"]: the Linear layers' outputs, gradients and weights are stored, the ReLU's and the
    Tanh's are not, and every call is still a node with its edges; ops=["Tanh"] picks module classes."""
    model, opt, batch = _mlp()
    out = str(tmp_path / "d")
    _train(model, opt, batch, _mse, 2, out, modules=["fc*"])
    rank, g = _graph(out)
    assert len(_module_calls(g)) == 5 and [s for s, _ in g.node("model/fc2-Linear").inputs][0] == "model/act-ReLU"
    stored = {(node, io) for node, io, _ in rank.tensor_map(0, 1)}
    for name in ("model/fc1-Linear", "model/fc2-Linear", "backward/model/fc1-Linear"):
        assert (name, "output") in stored
    assert ("model/fc2-Linear", "input") in stored and ("fc2.weight", "output") in stored
    for name in ("model/act-ReLU", "model/out-Tanh", "backward/model/act-ReLU", "model/_Net"):
        assert (name, "output") not in stored
    # ops= globs match a module's class name at this level
    out = str(tmp_path / "ops")
    _train(model, opt, batch, _mse, 1, out, ops=["Tanh"])
    stored = {node for node, io, _ in open_dump(out).rank(0).tensor_map(0, 0) if io == "output"}
    assert {"model/out-Tanh", "backward/model/out-Tanh"} <= stored
    assert not stored & {"model/fc1-Linear", "model/act-ReLU", "backward/model/fc2-Linear", "model/_Net"}


def test_a_schedule_mixes_the_modules_level_with_the_parameters_level(tmp_path: Any) -> None:
    """level={"parameters": None, "modules": [0, 2]}: iterations 0 and 2 hold the module calls, 1 and 3
    only weights, gradients and the loss; no module node or gradient hook leaks into the others."""
    model, opt, batch = _mlp()
    out = str(tmp_path / "d")
    _train(model, opt, batch, _mse, 4, out, level={"parameters": None, LEVEL_MODULES: [0, 2]})
    rank = open_dump(out).rank(0)
    by_level: dict[str, list[int]] = {}
    for gid, g in rank.graphs.items():
        by_level.setdefault(g.record.level, []).extend(rank.iterations(gid))
        calls = [n for n in g.nodes() if n.op_type in ("Linear", "ReLU", "Tanh", "_Net") or n.op_type.endswith("Backward")]
        assert len(calls) == (10 if g.record.level == LEVEL_MODULES else 0), (gid, g.record.level)
    assert {k: sorted(v) for k, v in by_level.items()} == {LEVEL_MODULES: [0, 2], "parameters": [1, 3]}


def test_gpt2_module_nodes_edges_and_statistics(tmp_path: Any) -> None:
    """GPT-2 from a config: one node per module call; the residual sum between modules links both its
    makers; NewGELU is a gelu activation; outputs and gradients as torch's hooks saw them; the loss the
    model computes inside links to the model; the recommended scan of the healthy run is quiet."""
    torch.manual_seed(0)
    m = corpus.gpt2()
    opt = torch.optim.AdamW(m.module.parameters(), lr=1e-3)
    watch = ("transformer.h.1.mlp.c_fc", "transformer.h.1.mlp.act", "transformer.ln_f", "transformer.h.0.ln_2")
    truth = Truth(m.module, watch)
    out = str(tmp_path / "d")
    losses = _train(m.module, opt, lambda i: m.batch(0), m.loss, 2, out, truth=truth)
    assert losses[1] < losses[0]
    rank, g = _graph(out)
    calls = _module_calls(g)
    assert len(calls) == len(set(calls)) == truth.calls[0] == truth.calls[1]
    fwd = _forward_nodes(g)
    act = fwd["transformer.h.1.mlp.act"]
    assert (act.op_type, act.kind.value, act.activation) == ("NewGELUActivation", "activation", "gelu")
    assert act.name == "model/transformer-GPT2Model/h.1-GPT2Block/mlp-GPT2MLP/act-NewGELUActivation"
    assert act.scope == "model/transformer-GPT2Model/h.1-GPT2Block/mlp-GPT2MLP"
    assert [s for s, _ in act.inputs] == [fwd["transformer.h.1.mlp.c_fc"].name]
    # ln_2 reads attn_output + residual, made by no module: both makers are its inputs
    ln2 = [s for s, _ in fwd["transformer.h.0.ln_2"].inputs]
    assert ln2[:2] == [fwd["transformer.drop"].name, fwd["transformer.h.0.attn"].name]
    assert [s for s, _ in fwd["transformer.h.1.ln_1"].inputs][0] == fwd["transformer.h.0"].name
    assert fwd["lm_head"].inputs[1] == ("transformer.wte.weight", "data")      # tied to the embedding
    loss = [n for n in g.nodes() if n.op_type == "Loss"]
    assert [n.inputs for n in loss] == [[(fwd[""].name, "data")]]
    assert fwd[""].op_type == "GPT2LMHeadModel"
    # the model returns (loss, logits): a gradient node per output, the logits' as output 1
    assert [o.shape for o in fwd[""].outputs] == [(), (2, corpus.SEQ, corpus.VOCAB)]
    assert g.node("backward/model/GPT2LMHeadModel-out1").outputs[0].shape == (2, corpus.SEQ, corpus.VOCAB)
    assert g.node("backward/model/GPT2LMHeadModel").outputs[0].shape == ()
    # position ids, made inside the model from no tensor that requires grad: a data input
    assert g.node(fwd["transformer.wpe"].inputs[0][0]).op_type == "Input"
    for it in range(2):
        tm = rank.tensor_map(0, it)
        for p in watch:
            name = fwd[p].name
            _assert_stats(tm[(name, "output", 0)].source.stored_stats(), truth.outs[(it, p)], (it, name))
            _assert_stats(tm[(f"backward/{name}", "output", 0)].source.stored_stats(), truth.grads[(it, p)], (it, name))
    res = corpus.scan_recommended(out)
    assert not res.hits and not res.errors, (res.hits[:3], res.errors[:3])


def test_resnet18_module_calls_and_inplace_relu(tmp_path: Any) -> None:
    """torchvision ResNet-18: a block's ReLU called twice is two nodes (``-1``); a BatchNorm's output is
    stored as the BatchNorm returned it, before the in-place ReLU wrote over it; conv1 of a block reads
    the block's input."""
    from torchvision.models import resnet18

    torch.manual_seed(0)
    model = resnet18(num_classes=10)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    watch = ("layer1.0.bn1", "layer2.1.conv2", "fc")
    truth = Truth(model, watch)

    def batch(i: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(i)
        return torch.randn(2, 3, 32, 32, generator=g), torch.randint(0, 10, (2,), generator=g)

    out = str(tmp_path / "d")
    _train(model, opt, batch, lambda m, b: F.cross_entropy(m(b[0]), b[1]), 2, out, truth=truth)
    rank, g = _graph(out)
    calls = _module_calls(g)
    assert len(calls) == len(set(calls)) == truth.calls[0]
    relu = "model/layer1-Sequential/0-BasicBlock/relu-ReLU"
    assert {relu, relu + "-1"} <= set(calls)
    assert g.node(relu + "-1").activation == "relu" and g.node(relu + "-1").module == "layer1.0.relu"
    fwd = {n.name: n for n in g.nodes()}
    conv1 = fwd["model/layer1-Sequential/0-BasicBlock/conv1-Conv2d"]
    assert [s for s, _ in conv1.inputs] == ["model/maxpool-MaxPool2d", "layer1.0.conv1.weight"]
    bn1 = "model/layer1-Sequential/0-BasicBlock/bn1-BatchNorm2d"
    assert [s for s, _ in fwd[relu].inputs] == [bn1]
    loss = [n for n in g.nodes() if n.op_type == "Loss"]
    assert [n.inputs for n in loss] == [[("model/ResNet", "data")]]
    names = {"layer1.0.bn1": bn1, "layer2.1.conv2": "model/layer2-Sequential/1-BasicBlock/conv2-Conv2d",
             "fc": "model/fc-Linear"}
    for it in range(2):
        tm = rank.tensor_map(0, it)
        assert (truth.outs[(it, "layer1.0.bn1")] < 0).any(), "the stored BatchNorm output is the one before ReLU"
        for p, name in names.items():
            _assert_stats(tm[(name, "output", 0)].source.stored_stats(), truth.outs[(it, p)], (it, name))
            _assert_stats(tm[(f"backward/{name}", "output", 0)].source.stored_stats(), truth.grads[(it, p)], (it, name))


class _Poison:
    """A forward hook that writes NaN into one element of a module's output at one iteration."""

    def __init__(self, module: nn.Module, iteration: int) -> None:
        self.module, self.iteration, self.finite_after = module, iteration, None

    def __call__(self, i: int, model: nn.Module) -> Any:
        if i != self.iteration:
            return None
        return corpus.ForwardHook(self.module, self._hook)

    def _hook(self, module: nn.Module, args: Any, output: torch.Tensor) -> None:
        with torch.no_grad():
            output[0, 0, 0] = float("nan")
        self.finite_after = bool(torch.isfinite(output).all())


def test_a_nan_written_into_a_layer_output_heads_the_scan_at_the_module_that_read_it(tmp_path: Any) -> None:
    """GPT-2: a forward hook writes NaN into block 1's MLP c_fc output at iteration 1. The recorder's
    global hook saw that output before the user's hook ran (it is stored finite), so the scan's headline is
    the first module call whose output went non-finite: the GELU that read it, at iteration 1."""
    torch.manual_seed(0)
    m = corpus.gpt2()
    opt = torch.optim.AdamW(m.module.parameters(), lr=1e-3)
    poison = _Poison(m.module.transformer.h[1].mlp.c_fc, 1)
    out = str(tmp_path / "d")
    _train(m.module, opt, lambda i: m.batch(0), m.loss, 3, out, during=poison)
    assert poison.finite_after is False
    res = corpus.scan_recommended(out)
    first = res.first
    assert first is not None and (first.watchpoint, first.iteration) == ("overflow", 1)
    assert first.node == "model/transformer-GPT2Model/h.1-GPT2Block/mlp-GPT2MLP/act-NewGELUActivation"
    assert first.op_type == "NewGELUActivation" and first.source.startswith(corpus.__file__.rstrip("c"))
    rank = open_dump(out).rank(0)
    tm = rank.tensor_map(next(gid for gid in rank.graphs if 1 in rank.iterations(gid)), 1)
    c_fc = "model/transformer-GPT2Model/h.1-GPT2Block/mlp-GPT2MLP/c_fc-Conv1D"
    assert tm[(c_fc, "output", 0)].source.stored_stats()["nan"] == 0
    assert not any(h.iteration == 0 for h in res.hits if h.watchpoint == "overflow")


def test_training_is_bit_identical_with_the_modules_level(tmp_path: Any) -> None:
    """GPT-2 with dropout (random numbers) and AdamW: the same losses and weights, bit for bit, with and
    without the recorder at level "modules"."""
    def run(path: str | None) -> tuple[list[float], dict[str, torch.Tensor]]:
        torch.manual_seed(0)
        m = corpus.gpt2()
        opt = torch.optim.AdamW(m.module.parameters(), lr=1e-3)
        losses = _train(m.module, opt, lambda i: m.batch(0), m.loss, 3, path)
        return losses, {k: v.detach().clone() for k, v in m.module.state_dict().items()}

    plain_losses, plain_weights = run(None)
    rec_losses, rec_weights = run(str(tmp_path / "d"))
    assert rec_losses == plain_losses
    assert all(torch.equal(plain_weights[k], rec_weights[k]) for k in plain_weights)


def test_activation_checkpointing_records_the_same_module_graph(tmp_path: Any) -> None:
    """GPT-2 with activation checkpointing runs its blocks' forward again inside backward (torch's hooks
    see more calls); the recorded graph is the one recorded without checkpointing, node for node."""
    def graph(path: str, checkpointing: bool) -> tuple[set[tuple[str, tuple]], Truth]:
        torch.manual_seed(0)
        m = corpus.gpt2()
        if checkpointing:
            m.module.activation_checkpointing_enable()
        truth = Truth(m.module)
        _train(m.module, torch.optim.AdamW(m.module.parameters(), lr=1e-3), lambda i: m.batch(0), m.loss, 2, path,
               truth=truth)
        _, g = _graph(path)
        return {(n.name, tuple(n.inputs)) for n in g.nodes()}, truth

    plain, plain_truth = graph(str(tmp_path / "plain"), False)
    checkpointed, truth = graph(str(tmp_path / "ckpt"), True)
    assert truth.calls[0] > plain_truth.calls[0]
    assert checkpointed == plain


class _Scaled(nn.Module):
    """A residual block with a layer scale of its own (ConvNeXt's): a container that reads a weight."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.gamma = nn.Parameter(torch.full((8,), 1e-6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.gamma * self.fc(x)


def test_a_container_weight_is_captured_at_the_containers_node(tmp_path: Any) -> None:
    """The value of a weight a container reads is captured under the container's own node (named
    ``<scope>/<class>`` once its children are known), as each call's weights are: a capture under a name no
    node has is a value no rule can find."""
    torch.manual_seed(0)
    model = nn.Sequential(_Scaled(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    path = str(tmp_path / "dump")
    _train(model, opt, lambda i: torch.randn(4, 8), lambda m, x: m(x).square().mean(), 1, path)
    rank, g = _graph(path)
    captured = rank.tensor_map(0, 0)
    assert {node for node, _, _ in captured} <= set(g.names())
    block = next(n for n in g.nodes() if n.op_type == "_Scaled")
    slot = next(i for i, (src, _) in enumerate(block.record.inputs) if src == "0.gamma")
    gamma = captured[(block.name, "input", slot)].source.stored_stats()
    assert gamma["abs_mean"] == pytest.approx(1e-6)


class _Lists(nn.Module):
    """Weights no module call reads: a ParameterList's and a ParameterDict's (containers never called) and
    a child's weight read by the parent's own code (the child never called)."""

    def __init__(self) -> None:
        super().__init__()
        self.ws = nn.ParameterList([nn.Parameter(torch.randn(8, 8) * 0.3) for _ in range(2)])
        self.bs = nn.ParameterDict({"a": nn.Parameter(torch.randn(8) * 0.1)})
        self.head = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(x @ self.ws[0] + self.bs["a"]) @ self.ws[1]
        return F.linear(h, self.head.weight, self.head.bias)


def test_weights_no_module_call_reads_keep_their_value_as_read(tmp_path: Any) -> None:
    """At "modules" a weight that no module call read (a ParameterList's, a ParameterDict's, a child's weight
    read by its parent's code) is kept as read by its Gradient node, as each call's weights are: its first
    iteration's update is judged (was: "no previous iteration", a check the scan could not run), the value
    equal to the weight torch held before the first step. No module call is seen, and that is no sign of a
    compiled model even once this process compiled something (the model's own call ran eagerly)."""
    torch.compile(lambda x: x * 2)(torch.ones(3))      # something compiled in this process
    torch.manual_seed(0)
    model = _Lists()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    path = str(tmp_path / "dump")
    _train(model, opt, lambda i: torch.randn(4, 8), lambda m, x: m(x).square().mean(), 3, path, save="tensors")
    captured = open_dump(path).rank(0).tensor_map(0, 0)
    for name, value in before.items():
        ref = captured[(f"{name}.grad", "input", 1)]
        assert np.array_equal(ref.value(), value.numpy()), name
    from debugger.watch.engine import scan
    from debugger.watch.registry import preset
    res = scan(open_dump(path), preset("recommended"))
    assert res.hits == [] and res.errors == [], res.errors[:3]
