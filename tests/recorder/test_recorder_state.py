"""The recorder on models and optimizers people train with: optimizer internals are state, constants
are no computed values, activation layers are named, and a statistics recording answers the whole
recommended preset. Truth from plain torch: ``opt.state``, weights copied around ``opt.step()``,
outputs counted in forward hooks."""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from clirun import run_cli  # noqa: E402

from debugger.model import open_dump  # noqa: E402
from debugger.torch import Recorder  # noqa: E402

STEPS = 3


def _gpt2() -> tuple[Any, Callable[[Any], Any]]:
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=16,
                                  bos_token_id=None, eos_token_id=None)
    model = transformers.GPT2LMHeadModel(cfg)

    def loss(m: Any) -> Any:
        ids = torch.randint(0, 64, (2, 8))
        return m(input_ids=ids, labels=ids).loss
    return model, loss


def _mlp() -> tuple[Any, Callable[[Any], Any]]:
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(inplace=True), torch.nn.Linear(32, 4))

    def loss(m: Any) -> Any:
        return torch.nn.functional.cross_entropy(m(torch.randn(16, 8)), torch.randint(0, 4, (16,)))
    return model, loss


OPTIMIZERS: dict[str, Callable[[Any], Any]] = {
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-3),
    "adamw_foreach": lambda p: torch.optim.AdamW(p, lr=1e-3, foreach=True),
    "adamw_fused": lambda p: torch.optim.AdamW(p, lr=1e-3, fused=True),
    "adam": lambda p: torch.optim.Adam(p, lr=1e-3),
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9),
    "sgd_nesterov": lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9, nesterov=True),
    "rmsprop": lambda p: torch.optim.RMSprop(p, lr=1e-3),
    "adagrad": lambda p: torch.optim.Adagrad(p, lr=1e-2),
}


def _record(out: str, build: Callable[[], tuple[Any, Callable[[Any], Any]]], opt_name: str, save: str,
            steps: int = STEPS) -> tuple[Any, Any]:
    torch.manual_seed(0)
    model, loss = build()
    opt = OPTIMIZERS[opt_name](model.parameters())
    with Recorder(out, model, opt, save=save) as rec:
        for _ in range(steps):
            opt.zero_grad()
            loss(model).backward()
            opt.step()
            rec.step()
    return model, opt


def _scan(dump: str) -> dict[str, Any]:
    res = run_cli("scan", dump, "--json", "--no-cache")
    assert res.code in (0, 1), res.err
    return res.json


@pytest.mark.parametrize("model,opt_name,save", [
    ("gpt2", "adamw", "statistics"), ("gpt2", "adamw", "tensors"), ("gpt2", "adamw_fused", "statistics"),
    ("gpt2", "adamw_foreach", "tensors"), ("gpt2", "sgd_nesterov", "statistics"), ("gpt2", "rmsprop", "statistics"),
    ("gpt2", "adagrad", "tensors"), ("mlp", "adam", "statistics"), ("mlp", "sgd_momentum", "tensors"),
])
def test_healthy_run_has_no_zero_hit_and_needs_no_values(tmp_path: Any, model: str, opt_name: str, save: str) -> None:
    """The recommended preset on a healthy run: no tensor_all_zero hit (optimizer state being made,
    step counters, constants) and no check that asks for values a statistics recording lacks."""
    dump = str(tmp_path / "d")
    _record(dump, {"gpt2": _gpt2, "mlp": _mlp}[model], opt_name, save)
    got = _scan(dump)
    zero_hits = [h for h in got["hits"] if h["watchpoint"] == "tensor_all_zero"]
    assert zero_hits == []
    assert [e for e in got["errors"] if "needs tensor values" in e["error"] or "cannot tell" in e["error"]] == []
    if model == "mlp":
        assert got["hits"] == [] and got["errors"] == []


@pytest.mark.parametrize("opt_name", ["adam", "adamw_foreach", "adamw_fused", "sgd_nesterov", "rmsprop", "adagrad"])
def test_state_nodes_carry_their_parameter(tmp_path: Any, opt_name: str) -> None:
    """Every node the first step ran to make a state tensor is kind optimizer_state of its parameter:
    one per state tensor of every parameter (truth: opt.state), step counters included; no node of
    the step that is not the update kernel is left a computed zero."""
    dump = str(tmp_path / "d")
    model, opt = _record(dump, _mlp, opt_name, "tensors", steps=1)
    names = {id(p): n for n, p in model.named_parameters()}
    # Adagrad makes its state in its constructor, before recording: none is made in the step
    made_early = bool(OPTIMIZERS[opt_name](torch.nn.Linear(1, 1).parameters()).state)
    truth: dict[str, int] = {}
    for p, st in opt.state.items():
        if not made_early:
            truth[names[id(p)]] = sum(isinstance(v, torch.Tensor) for v in st.values())
    r = open_dump(dump).rank(0)
    (gid,) = r.graphs
    nodes = r.graphs[gid].record.nodes
    made: dict[str, int] = {}
    for n in nodes:
        if n.kind == "optimizer_state":
            assert n.param in names.values(), n
        # the first node of each state tensor: it made it (zeros_like, clone, full_like) or it is a
        # step counter torch.tensor() made outside any operator (an Input); not its leaf (Parameter): its value at rec.step()
        if n.kind == "optimizer_state" and n.op_type != "Parameter" and (n.op_type == "Input" or not any(
                src in {m.name for m in nodes if m.kind == "optimizer_state"} for src, _ in n.inputs)):
            made[n.param] = made.get(n.param, 0) + 1
    assert made == truth
    # every in-place op of the step on what made a state tensor (its first argument) is that state
    state_makers = {n.name: n.param for n in nodes if n.kind == "optimizer_state"}
    updates = [n for n in nodes if n.scope.startswith("optimizer") and n.op_type.endswith("_")
               and n.inputs and n.inputs[0][0] in state_makers]
    assert all(n.kind == "optimizer_state" and n.param == state_makers[n.inputs[0][0]] for n in updates)
    tmap = r.tensor_map(gid, 0)
    for (node, io, _), ref in tmap.items():
        if ref.kind == "other" and io == "output" and r.graphs[gid].node(node).scope.startswith("optimizer"):
            a = ref.value()
            assert not (a.size and np.all(a == 0)), node


def test_constants_are_not_computed_values(tmp_path: Any) -> None:
    """A forward op inside the model made from no tensor (zeros, arange) or from constants alone is kind
    constant; what mixes them with data is not."""

    class Masked(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x: Any) -> Any:
            pad = torch.zeros(x.shape[0], 4)                       # from nothing
            mask = torch.arange(4) < 2                              # from a constant
            return self.fc(x) * mask + pad

    dump = str(tmp_path / "d")
    torch.manual_seed(0)
    model = Masked()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with Recorder(dump, model, opt) as rec:
        model(torch.randn(3, 4)).sum().backward()
        opt.step()
        rec.step()
    nodes = {n.name: n for g in open_dump(dump).rank(0).graphs.values() for n in g.record.nodes}
    kinds = {n.op_type: n.kind for n in nodes.values() if n.scope == "model"}
    assert kinds["zeros"] == kinds["arange"] == kinds["lt"] == "constant"
    assert kinds["mul"] == kinds["add"] == "other"


def test_activation_layers_named_composites_not(tmp_path: Any) -> None:
    """NodeRecord.activation: in-place and functional variants alike, threshold(0, 0) a relu,
    hardtanh(0, 6) a relu6; GELU's tanh (GPT-2's NewGELUActivation, a module without parameters whose
    output is not the tanh's) no layer; an LSTM cell's gates (inside a module with parameters) are."""
    transformers = pytest.importorskip("transformers")
    from transformers.activations import NewGELUActivation

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(6, 6)
            self.relu = torch.nn.ReLU(inplace=True)
            self.thr = torch.nn.Threshold(0.0, 0.0)
            self.relu6 = torch.nn.ReLU6()
            self.hswish = torch.nn.Hardswish()
            self.tanh = torch.nn.Tanh()
            self.gelu = NewGELUActivation()
            self.cell = torch.nn.LSTMCell(6, 6)

        def forward(self, x: Any) -> Any:
            h = self.fc(x)
            y = self.relu(h.clone()) + self.thr(h) + self.relu6(h) + self.hswish(h) + self.tanh(h) + self.gelu(h)
            hx, cx = self.cell(y)
            return hx.sum() + cx.sum()

    dump = str(tmp_path / "d")
    model = Net()
    assert transformers is not None
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with Recorder(dump, model, opt) as rec:
        model(torch.randn(3, 6)).backward()
        opt.step()
        rec.step()
    nodes = [n for g in open_dump(dump).rank(0).graphs.values() for n in g.record.nodes if not n.is_backward]
    by_module = {}
    for n in nodes:
        if n.activation or n.op_type in ("tanh", "tanh_", "sigmoid_"):
            by_module.setdefault(n.scope.rsplit("/", 1)[-1], []).append((n.op_type, n.activation, n.kind))
    assert by_module["relu-ReLU"] == [("relu_", "relu", "activation")]
    assert by_module["thr-Threshold"] == [("threshold", "relu", "activation")]
    assert by_module["relu6-ReLU6"] == [("hardtanh", "relu6", "activation")]
    assert by_module["hswish-Hardswish"] == [("hardswish", "hardswish", "activation")]
    assert by_module["tanh-Tanh"] == [("tanh", "tanh", "activation")]
    assert by_module["gelu-NewGELUActivation"] == [("tanh", "", "other")]
    gates = sorted(by_module["cell-LSTMCell"])
    assert gates == sorted([("sigmoid_", "sigmoid", "activation")] * 3 + [("tanh_", "tanh", "activation"),
                                                                          ("tanh", "tanh", "activation")])


def test_update_statistics_equal_plain_torch(tmp_path: Any) -> None:
    """save=statistics stores per trained weight mean and max |cur - prev|, max(|d| - rtol |prev|) and
    mean |prev| against the value before the step, equal to plain torch's; a weight the step leaves
    alone (lr 0) is weight_not_changed from them, the others are not, without values."""
    dump = str(tmp_path / "d")
    torch.manual_seed(0)
    model, loss = _mlp()
    frozen = model[2].bias
    opt = torch.optim.SGD([{"params": [p for p in model.parameters() if p is not frozen]},
                           {"params": [frozen], "lr": 0.0}], lr=0.05, momentum=0.9)
    names = {id(p): n for n, p in model.named_parameters()}
    truth: list[dict[str, tuple[np.ndarray, np.ndarray]]] = []
    with Recorder(dump, model, opt, save="statistics") as rec:
        for _ in range(STEPS):
            opt.zero_grad()
            loss(model).backward()
            before = {names[id(p)]: p.detach().clone().double().numpy() for p in model.parameters()}
            opt.step()
            truth.append({n: (before[n], p.detach().double().numpy()) for n, p in model.named_parameters()})
            rec.step()
    r = open_dump(dump).rank(0)
    for it, weights in enumerate(truth):
        tmap = {k: v for g in r.graphs for k, v in r.tensor_map(g, it).items()} if it in r.iterations() else {}
        for name, (prev, cur) in weights.items():
            got = tmap[(name, "output", 0)].source.stored_extras()
            d = np.abs(cur - prev)
            assert got["update_abs_mean"] == pytest.approx(d.mean(), rel=1e-9, abs=1e-15)
            assert got["update_max"] == pytest.approx(d.max(), rel=1e-12, abs=0)
            assert got["update_excess"] == pytest.approx((d - 1e-5 * np.abs(prev)).max(), rel=1e-9, abs=1e-15)
            assert got["previous_abs_mean"] == pytest.approx(np.abs(prev).mean(), rel=1e-9)
            assert (got["update_max"] == 0) == (name == "2.bias")
    res = run_cli("scan", dump, "--watch", "weight_not_changed", "--watch", "weight_change_too_large",
                  "--json", "--no-cache")
    assert res.json["errors"] == []
    assert {(h["node"], h["watchpoint"]) for h in res.json["hits"]} == {("2.bias", "weight_not_changed")}
    assert len(res.json["hits"]) == STEPS


def _saturating() -> Any:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16), torch.nn.Sigmoid())
    with torch.no_grad():
        net[0].weight.mul_(50.0)      # both saturate (most outputs within 1e-3 of an asymptote)
        net[2].weight.mul_(20.0)
    return net


def test_saturated_count_equals_plain_torch(tmp_path: Any) -> None:
    """The stored saturated count of every tanh/sigmoid layer output equals a plain torch count at the
    preset's tolerance; activation_saturated_layer on the statistics recording hits what it hits on
    the values recording."""
    counts: list[dict[str, int]] = []
    hits = {}
    for save in ("tensors", "statistics"):
        net = _saturating()
        opt = torch.optim.SGD(net.parameters(), lr=1e-3)
        seen: dict[str, int] = {}
        hooks = [net[i].register_forward_hook(
            lambda m, i, o, key=key, lo=lo, hi=hi: seen.__setitem__(key, int(((o <= lo + 1e-3) | (o >= hi - 1e-3)).sum())))
            for i, key, (lo, hi) in ((1, "tanh", (-1.0, 1.0)), (3, "sigmoid", (0.0, 1.0)))]
        dump = str(tmp_path / save)
        torch.manual_seed(1)
        with Recorder(dump, net, opt, save=save) as rec:
            for _ in range(2):
                opt.zero_grad()
                net(torch.randn(32, 8)).pow(2).mean().backward()
                opt.step()
                counts.append(dict(seen)) if save == "statistics" else None
                rec.step()
        for h in hooks:
            h.remove()
        res = run_cli("scan", dump, "--watch", "activation_saturated_layer", "--json", "--no-cache")
        assert res.json["errors"] == []
        hits[save] = sorted((h["iteration"], h["node"], round(h["actual"]["saturated_percentage_gt"], 9))
                            for h in res.json["hits"])
    assert hits["tensors"] == hits["statistics"] and hits["tensors"]
    r = open_dump(str(tmp_path / "statistics")).rank(0)
    for it, truth in enumerate(counts):
        tmap = {k: v for g in r.graphs for k, v in r.tensor_map(g, it).items()}
        stored = {ref.op_type: ref.source.stored_extras() for (node, io, _), ref in tmap.items()
                  if io == "output" and ref.op_type in ("tanh", "sigmoid")}
        assert {op: int(e["saturated"]) for op, e in stored.items()} == truth
        assert all(math.isclose(e["saturated_tolerance"], 1e-3) for e in stored.values())



@pytest.mark.parametrize("level", ["parameters", "modules", "ops"])
@pytest.mark.parametrize("save", ["statistics", "tensors"])
def test_a_weight_written_through_data_between_steps_is_stored_as_read(tmp_path: Any, level: str, save: str) -> None:
    """WGAN's clipping, ``p.data.clamp_(-c, c)`` between steps, bumps no version counter of the weight: every
    value the next forward is recorded to read (the reading node's input) is the clamped one, as plain torch
    saw it, not the capture of the previous step's end."""
    dump = str(tmp_path / "d")
    torch.manual_seed(0)
    model, loss = _mlp()
    opt = torch.optim.RMSprop(model.parameters(), lr=5e-2)
    read: list[np.ndarray] = []
    with Recorder(dump, model, opt, save=save, level=level) as rec:
        for _ in range(STEPS):
            for p in model.parameters():
                p.data.clamp_(-0.05, 0.05)
            read.append(model[0].weight.detach().double().numpy().copy())
            opt.zero_grad()
            loss(model).backward()
            opt.step()
            rec.step()
    r = open_dump(dump).rank(0)
    for it, want in enumerate(read):
        found = 0
        for gid in r.graphs:
            graph = r.graph(gid)
            for (node, io, slot), ref in r.tensor_map(gid, it).items():
                if io != "input" or graph.record_of(node).inputs[slot][0] != "0.weight" or node.startswith("global/"):
                    continue    # (at "ops" the loop's own .data and clamp_ are recorded: they read it before the write)
                found += 1
                if save == "tensors":
                    assert np.array_equal(ref.source.array().astype(np.float64), want), (it, node)
                    continue
                got = ref.source.stored_stats()
                assert got["max"] == pytest.approx(want.max(), rel=1e-6), (it, node)
                assert got["min"] == pytest.approx(want.min(), rel=1e-6), (it, node)
                assert got["mean"] == pytest.approx(want.mean(), rel=1e-6, abs=1e-9), (it, node)
        assert found, it


def test_a_recorder_stepped_per_micro_batch_is_told_where_rec_step_goes(tmp_path: Any) -> None:
    """Gradient accumulation over 4 micro-batches with rec.step() after each (a likely mistake): the iterations
    without an optimizer step are listed as such, and the scan says that rec.step() belongs after
    optimizer.step(); with rec.step() there, nothing is skipped and nothing is said."""
    for per_micro_batch in (True, False):
        dump = str(tmp_path / f"d{per_micro_batch}")
        torch.manual_seed(0)
        model, loss = _mlp()
        opt = torch.optim.SGD(model.parameters(), lr=1e-2)
        with Recorder(dump, model, opt, save="statistics", level="parameters") as rec:
            for i in range(16):
                (loss(model) / 4).backward()
                if i % 4 == 3:
                    opt.step()
                    opt.zero_grad()
                    if not per_micro_batch:
                        rec.step()
                if per_micro_batch:
                    rec.step()
        res = run_cli("scan", dump, "--preset", "parameters", "--no-cache")
        assert res.code in (0, 4), res.out + res.err
        said = "as if rec.step() ran once per micro-batch" in res.out
        assert said == per_micro_batch, res.out
        assert ("optimizer_step_not_run" in res.out) == per_micro_batch, res.out
