"""debugger.torch.Recorder: real training runs (in real processes), expectations from plain torch.

Every run is tests/recorder/train_script.py in a subprocess: it trains a small net under the
recorder and, as it goes, writes what plain torch says (gradient means per parameter, the
parameters the optimizer step left unchanged, rank equality under DDP) to a JSON file.
"""
from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")

from clirun import run_cli, scan_quiet  # noqa: E402
from recorder_kit import tensors_by_iteration  # noqa: E402

from debugger.model import open_dump  # noqa: E402
from debugger.stats.core import STAT_NAMES, tensor_stats  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "train_script.py")
STEPS = 4


def _line(tag: str) -> int:
    with open(SCRIPT, encoding="utf-8") as f:
        for i, text in enumerate(f, 1):
            if f"# {tag}" in text:
                return i
    raise AssertionError(tag)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _train(out: str, *args: str, check: bool = True) -> tuple[subprocess.CompletedProcess, list[list[dict]]]:
    expect = out + ".expect"
    p = subprocess.run([sys.executable, SCRIPT, out, "--expect", expect, *args], capture_output=True, text=True,
                       timeout=240)
    if check:
        assert p.returncode == 0, p.stderr[-3000:]
    facts = []
    for r in range(4):
        if os.path.exists(f"{expect}.{r}"):
            with open(f"{expect}.{r}", encoding="utf-8") as f:
                facts.append(json.load(f))
    return p, facts


@pytest.fixture(scope="module")
def values_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[dict]]:
    """A 4-step run, values; the NaN starts at iteration 2."""
    out = str(tmp_path_factory.mktemp("torch") / "values")
    _, facts = _train(out, "--steps", str(STEPS), "--nan-at", "2")
    return out, facts[0]


@pytest.fixture(scope="module")
def stats_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[dict]]:
    """The same run, statistics only."""
    out = str(tmp_path_factory.mktemp("torch") / "stats")
    _, facts = _train(out, "--steps", str(STEPS), "--nan-at", "2", "--save", "statistics")
    return out, facts[0]


def _graph_of(dump: str, rank: int = 0):
    r = open_dump(dump).rank(rank)
    return r, r.graphs


def test_gradients_match_plain_torch(values_run: tuple[str, list[dict]]) -> None:
    """The gradient node of every parameter holds what p.grad held before the step (its mean)."""
    dump, facts = values_run
    tensors = tensors_by_iteration(dump)
    assert sorted(tensors) == list(range(STEPS))
    for it, fact in enumerate(facts):
        for name, mean in fact["grad_mean"].items():
            ref = tensors[it][(f"{name}.grad", "output", 0)]
            assert ref.kind == "gradient" and ref.param == name
            got = float(np.asarray(ref.source.array(), np.float64).mean())
            assert got == pytest.approx(mean, rel=1e-6, abs=1e-12) or (math.isnan(got) and math.isnan(mean))


def test_first_nan_iteration_and_operator(values_run: tuple[str, list[dict]]) -> None:
    """scan overflow: the first NaN is the sqrt of the forward pass in the first iteration whose loss plain torch
    saw turn NaN."""
    dump, facts = values_run
    first = next(i for i, f in enumerate(facts) if math.isnan(f["loss"]))
    res = run_cli("scan", dump, "--watch", "overflow", "--json", "--no-cache")
    assert res.code == 1, res.err
    hits = res.json["hits"]
    assert min(h["iteration"] for h in hits) == first
    firsts = sorted((h for h in hits if h["iteration"] == first), key=lambda h: h["position"])
    assert firsts[0]["op_type"] == "sqrt" and not firsts[0]["node"].startswith("backward/")
    assert firsts[0]["source"].endswith(f"train_script.py:{_line('LINE_SQRT')}")


def test_unchanged_parameters_match_plain_torch(values_run: tuple[str, list[dict]]) -> None:
    """weight_not_changed hits exactly the parameters the step left bit-identical (the lr-0 group)."""
    dump, facts = values_run
    res = run_cli("scan", dump, "--watch", "weight_not_changed:rtol=0,atol=0", "--json", "--no-cache")
    got: dict[int, set[str]] = {}
    for h in res.json["hits"]:
        if h["watchpoint"] == "weight_not_changed":
            got.setdefault(h["iteration"], set()).add(h["node"])
    for it, fact in enumerate(facts):
        # after the NaN appears every later step writes NaN into the trained weights (never "unchanged")
        assert got.get(it, set()) == set(fact["unchanged"]), it
    assert {"fc2.weight", "fc2.bias"} <= set(facts[0]["unchanged"])
    # no watchpoint of this scan looks for NaN: the always-on sweep tells the first one, the forward sqrt
    first = next(i for i, f in enumerate(facts) if math.isnan(f["loss"]))
    [sweep] = [h for h in res.json["hits"] if h["watchpoint"] == "nonfinite_sweep"]
    assert (sweep["iteration"], sweep["op_type"]) == (first, "sqrt") and sweep["note"].startswith("made here")


def test_kinds_roles_and_backward_links(values_run: tuple[str, list[dict]]) -> None:
    """Weights, gradients, state and loss come from facts; the optimizer update has input roles;
    backward nodes name their forward node's scope and source line."""
    dump, _ = values_run
    r, graphs = _graph_of(dump)
    g = graphs[max(graphs)]
    nodes = {n: vars(g.record_of(n)) for n in g}
    assert nodes["fc1.weight"]["kind"] == "weight" and nodes["fc1.weight"]["is_parameter"]
    assert nodes["fc1.weight.grad"]["kind"] == "gradient" and nodes["fc1.weight.grad"]["param"] == "fc1.weight"
    assert nodes["momentum_buffer.fc1.weight"]["kind"] == "optimizer_state"
    assert [n for n, a in nodes.items() if a.get("kind") == "loss"] == ["global/nll_loss_forward-0"]
    updates = [n for n, a in nodes.items() if "weight" in (a.get("input_roles") or ())]
    assert len(updates) == 6     # one in-place update per parameter
    assert all(g.value_inputs(n)[list(nodes[n]["input_roles"]).index("weight")] in
               {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"} for n in updates)
    bw = [n for n, a in nodes.items() if a.get("is_backward") and a.get("op_type") == "tanh_backward"]
    assert bw == ["backward/model/tanh_backward-0"]
    frames = g.stack(bw[0])
    assert any(f.location.endswith(f"train_script.py:{_line('LINE_FC1')}") for f in frames)
    assert all(f.forward_candidate and not f.is_framework for f in frames)


def test_code_to_graph_both_directions(values_run: tuple[str, list[dict]]) -> None:
    """tdbg code FILE:LINE lists the forward and backward nodes of a line; tdbg node shows the line."""
    dump, _ = values_run
    line = _line("LINE_FC1")
    res = run_cli("code", dump, f"train_script.py:{line}", "--json")
    assert res.code == 0, res.err
    found = {(n["direction"], n["op_type"]) for n in res.json["nodes"]}
    assert {("forward", "addmm"), ("forward", "tanh"), ("backward", "tanh_backward"), ("backward", "mm")} <= found
    assert not any(n["op_type"] == "sqrt" for n in res.json["nodes"])
    res = run_cli("node", dump, "model/fc1-Linear/addmm-0", "--json")
    assert res.code == 0, res.err
    for node in res.json["nodes"]:
        first = node["stack"][0]
        assert first["file"].endswith("train_script.py") and first["line"] == line and not first["is_framework"]


def test_statistics_mode_equals_values(values_run: tuple[str, list[dict]], stats_run: tuple[str, list[dict]]) -> None:
    """save="statistics" stores, for every tensor, the statistics debugger.stats computes from the values
    of the same (deterministic) run; exact digests for weights and gradients."""
    vals, sts = tensors_by_iteration(values_run[0]), tensors_by_iteration(stats_run[0])
    assert sorted(vals) == sorted(sts)
    n = 0
    for it in vals:
        assert set(vals[it]) == set(sts[it])
        for key, ref in vals[it].items():
            want = tensor_stats(ref.source.array()).to_dict()
            got = sts[it][key].source.stored_stats()
            for name in STAT_NAMES:
                w, v = want[name], got.get(name)
                if w is None:
                    assert v is None or math.isnan(v), (it, key, name)
                else:
                    assert v == pytest.approx(w, rel=1e-5, abs=1e-6), (it, key, name)
            # the leaves (an optimizer step's ops that make its state are of kind optimizer_state too,
            # hashed like any op output: when made only from weights, state and collectives)
            if ref.kind in ("weight", "gradient", "optimizer_state") and ref.op_type in ("Parameter", "Gradient"):
                assert sts[it][key].source.digest() == ref.source.digest(), key
            elif ref.kind == "activation":    # not hashed on the device: stored empty, read as unknown
                assert sts[it][key].source.digest() is None, key
            n += 1
    assert n > 100


def test_statistics_mode_scan_finds_frozen_weights(stats_run: tuple[str, list[dict]]) -> None:
    """Without values, exact digests still tell the frozen parameters."""
    dump, facts = stats_run
    res = run_cli("scan", dump, "--watch", "weight_not_changed", "--json", "--no-cache")
    hit = {(h["iteration"], h["node"]) for h in res.json["hits"]}
    for it, fact in enumerate(facts):
        assert {(it, n) for n in fact["unchanged"]} <= hit


def test_killed_mid_iteration_reads_up_to_last_complete(tmp_path: pytest.TempPathFactory) -> None:
    """SIGKILL inside iteration 3's forward pass: iterations 0-2 read, nothing else is listed."""
    out = str(tmp_path / "killed")
    p, _ = _train(out, "--steps", "6", "--kill-at", "3", check=False)
    assert p.returncode == -9, p.stderr[-2000:]
    res = run_cli("info", out, "--json")
    assert res.code == 0, res.err
    tensors = tensors_by_iteration(out)
    assert sorted(tensors) == [0, 1, 2]
    for it in tensors:
        for ref in tensors[it].values():
            ref.source.array()          # every listed tensor reads
    res = run_cli("scan", out, "--preset", "recommended", "--no-cache")
    assert res.code in (0, 1, 4), res.err


def test_ddp_two_ranks(tmp_path: pytest.TempPathFactory, save: str = "statistics") -> None:
    """2-rank DDP over gloo: one rank folder each; compare --ranks finds the parameters, optimizer state and
    all-reduced gradients equal (plain torch agrees), and the gradients are the all-reduced ones; in
    statistics mode through exact digests of what must agree."""
    out = str(tmp_path / "ddp")
    # 5 steps: the iterations after the run repeats (3 and 4) are replayed, collectives included
    _, facts = _train(out, "--steps", "5", "--ranks", "2", "--port", str(_free_port()), "--save", save)
    assert len(facts) == 2
    assert all(f["params_equal_across_ranks"] and f["grads_equal_across_ranks"] for f in facts[0])
    res = run_cli("info", out, "--json")
    assert res.code == 0, res.err
    res = run_cli("compare", "--ranks", out, "--json", "--no-cache")
    assert res.code == 0, res.out[-3000:]
    from debugger.compare.ranks import invariant_nodes

    d = open_dump(out)
    for g in d.rank(0).graphs.values():
        inv = invariant_nodes(g)
        for name in facts[0][0]["grad_mean"]:
            assert {name, f"{name}.grad", f"momentum_buffer.{name}"} & set(g) <= inv
    for r in (0, 1):
        tensors = tensors_by_iteration(out, r)
        for it, fact in enumerate(facts[r]):
            for name, mean in fact["grad_mean"].items():
                st = tensors[it][(f"{name}.grad", "output", 0)].source.stored_stats()
                # debugger.stats sums float32 in float32: a mean near 0 is exact to ~1e-6 of mean |g|
                assert st["mean"] == pytest.approx(mean, rel=1e-5, abs=1e-5 * st["abs_mean"])


@pytest.mark.parametrize("optim", ["adam-foreach", "sgd-foreach"])
def test_foreach_optimizers(tmp_path: pytest.TempPathFactory, optim: str) -> None:
    """Optimizers over lists of tensors (_foreach_* kernels) become one update node per parameter,
    with roles; gradients and frozen parameters are still exact."""
    out = str(tmp_path / optim)
    _, facts = _train(out, "--steps", "3", "--optim", optim)
    facts0 = facts[0]
    r, graphs = _graph_of(out)
    g = graphs[max(graphs)]
    updates = {g.value_inputs(n.name)[list(n.input_roles).index("weight")]
               for n in g.nodes() if "weight" in n.input_roles}
    assert updates == set(facts0[0]["grad_mean"])
    assert any(n.startswith("optimizer-") and "_foreach_" in n for n in g)
    res = run_cli("scan", out, "--watch", "weight_not_changed:rtol=0,atol=0", "--json", "--no-cache")
    got: dict[int, set[str]] = {}
    for h in res.json["hits"]:
        got.setdefault(h["iteration"], set()).add(h["node"])
    tensors = tensors_by_iteration(out)
    for it, fact in enumerate(facts0):
        assert got.get(it, set()) == set(fact["unchanged"]), it
        for name, mean in fact["grad_mean"].items():
            got_mean = float(np.asarray(tensors[it][(f"{name}.grad", "output", 0)].source.array(), np.float64).mean())
            assert got_mean == pytest.approx(mean, rel=1e-6, abs=1e-12)


def test_ddp_sample_ranks_agree() -> None:
    """The committed 2-rank DDP sample (values): compare --ranks passes on weights, state and gradients."""
    root = os.path.join(os.path.dirname(os.path.dirname(HERE)), "dumps_sample", "torch_dp2")
    if not os.path.isdir(root):
        pytest.skip("dumps_sample/torch_dp2 is not present")
    res = run_cli("compare", "--ranks", root, "--json", "--no-cache")
    assert res.code == 0, res.out[-2000:]
    res = run_cli("scan", root, "--preset", "recommended", "--json", "--no-cache")
    assert {h["watchpoint"] for h in res.json["hits"]} == {"activation_saturated_layer", "weight_not_changed"}


def test_single_sample_planted_problems_and_healthy_run_quiet(tmp_path: pytest.TempPathFactory) -> None:
    """The recommended preset finds the planted saturation and frozen fc2 in the committed sample, and
    nothing in the same script's healthy run."""
    root = os.path.join(os.path.dirname(os.path.dirname(HERE)), "dumps_sample")
    if not os.path.isdir(os.path.join(root, "torch_single")):
        pytest.skip("dumps_sample/torch_single is not present")
    res = run_cli("scan", os.path.join(root, "torch_single"), "--preset", "recommended", "--json", "--no-cache")
    hits = res.json["hits"]
    assert {h["watchpoint"] for h in hits} == {"activation_saturated_layer", "weight_not_changed"}
    assert {h["node"] for h in hits if h["watchpoint"] == "activation_saturated_layer"} == {"model/sigmoid-0"}
    frozen = {(h["iteration"], h["node"]) for h in hits if h["watchpoint"] == "weight_not_changed"}
    assert {(i, n) for i in range(8) for n in ("fc2.weight", "fc2.bias")} <= frozen
    healthy = str(tmp_path / "healthy")
    p = subprocess.run([sys.executable, os.path.join(root, "make_torch_sample.py"), "--out", healthy, "--healthy",
                        "--steps", "4"], capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr[-2000:]
    scan_quiet(healthy, "--preset", "recommended", "--no-cache")


def test_out_argument_is_overwritten_not_read(tmp_path: pytest.TempPathFactory) -> None:
    """An out= destination is written whatever it held (as DDP's first backward writes gradients into
    bucket memory allocated before the recorder started): its old bits are no input of the op."""
    import torch

    from debugger.torch import Recorder

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    bucket = torch.full((4, 2), float("nan"))       # memory nobody initialised, made before recording
    out = str(tmp_path / "d")
    with Recorder(out, model, opt) as rec:
        y = model(torch.ones(4, 3))
        torch.mul(y.detach(), 2.0, out=bucket)
        loss = (y * bucket).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.step()
    scan_quiet(out, "--watch", "tensor_overflow", "--no-cache")
    g = open_dump(out).ranks[0].graphs[0]
    mul = next(n.name for n in g.nodes() if n.op_type == "mul" and not n.is_backward)
    edges = {src: kind for src, _, kind in g.in_edges(mul)}
    assert sorted(edges.values()) == ["control", "data"], edges


def test_memory_that_left_and_came_back_is_not_credited_to_its_old_maker(tmp_path: pytest.TempPathFactory) -> None:
    """FSDP frees its unsharded parameters after the forward pass and re-allocates them for the backward;
    the allocator may hand back the same address. What the forward wrote there is gone: a read of it in
    the backward is of an input, in every iteration (the graphs of steady steps used to differ by it)."""
    import torch

    from debugger.torch import Recorder

    class Gathered(torch.nn.Module):
        """A parameter gathered into ``full`` for the forward and again for the backward, as FSDP does;
        the memory comes back at its old address, as it often does from a real allocator."""

        def __init__(self) -> None:
            super().__init__()
            self.shard = torch.nn.Parameter(torch.randn(64))
            self.memory = torch.empty(64)
            self.full = torch.empty(0)
            self.register_full_backward_pre_hook(self._gather_again)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.full.data = self.memory                                # .data= is no operator (nor is
            self.full.copy_(self.shard.detach())                        # FSDP's storage resize_)
            y = x * self.full + self.shard
            self.full.data = torch.empty(0)                             # freed
            return y

        def _gather_again(self, module: Any, grad_output: Any) -> None:
            self.full.data = self.memory                                # back at the same address
            self.full.view(8, 8).sum()
            self.full.copy_(self.shard.detach())

    torch.manual_seed(0)
    model = Gathered()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    out = str(tmp_path / "d")
    with Recorder(out, model, opt) as rec:
        for _ in range(3):
            opt.zero_grad()
            model(torch.ones(64)).sum().backward()
            opt.step()
            rec.step()
    rank = open_dump(out).ranks[0]
    for gid in rank.graph_ids:
        g = rank.graph(gid)
        view = next(n for n in g.nodes() if n.op_type == "view" and n.is_backward)
        (src, _, _), = g.in_edges(view.name)
        assert g.node(src).op_type == "Input", (gid, src)


def _recorded_and_plain(out: str, build: Any, loop: Any, **recorder: Any) -> tuple[Any, Any]:
    """What ``loop(model, opt, rec)`` returns on a freshly seeded ``build()``: recorded into ``out``,
    then plain (``rec`` None)."""
    import torch

    from debugger.torch import Recorder

    def run(record: str | None) -> Any:
        torch.manual_seed(0)
        model, opt = build()
        if record is None:
            return loop(model, opt, None)
        with Recorder(record, model, opt, **recorder) as rec:
            return loop(model, opt, rec)

    return run(out), run(None)


def test_two_optimizer_steps_in_one_iteration(tmp_path: pytest.TempPathFactory) -> None:
    """An iteration holding two optimizer steps (a loop calling rec.step() less often than opt.step())
    records both gradients of every parameter under names of their own, each equal to plain torch's."""
    import torch

    def build() -> Any:
        model = torch.nn.Linear(3, 2)
        return model, torch.optim.SGD(model.parameters(), lr=0.1)

    def loop(model: Any, opt: Any, rec: Any) -> list[list[float]]:
        means: list[list[float]] = []
        for it in range(2):
            for k in range(2):
                loss = (model(torch.full((4, 3), float(it + k + 1))) ** 2).sum()
                opt.zero_grad()
                loss.backward()
                means.append([float(p.grad.double().mean()) for p in model.parameters()])
                opt.step()
            if rec is not None:
                rec.step()
        return means

    out = str(tmp_path / "d")
    recorded, plain = _recorded_and_plain(out, build, loop)
    assert recorded == plain
    tensors = tensors_by_iteration(out)
    for it in range(2):
        for k, suffix in enumerate(("grad", "grad-1")):
            got = [float(np.asarray(tensors[it][(f"{p}.{suffix}", "output", 0)].source.array(), np.float64).mean())
                   for p in ("weight", "bias")]
            assert got == pytest.approx(plain[2 * it + k], rel=1e-6)


def test_gradient_statistics_follow_accumulation_and_clipping(tmp_path: pytest.TempPathFactory) -> None:
    """A gradient's statistics and digest are those of p.grad when step() starts, whether backward made
    it fresh, accumulated it over two micro-batches, or clipping rescaled it in place afterwards."""
    import torch

    from debugger.formats.tdbg_h5.arrays import digest_of

    def build() -> Any:
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        return model, torch.optim.SGD(model.parameters(), lr=0.1)

    def loop(model: Any, opt: Any, rec: Any) -> list[dict[str, np.ndarray]]:
        grads: list[dict[str, np.ndarray]] = []
        for it in range(3):
            opt.zero_grad()
            for micro in range(2 if it == 1 else 1):       # iteration 1 accumulates two backward passes
                (model(torch.full((5, 4), float(it + micro + 1))) ** 2).mean().backward()
            if it == 2:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1e-3, foreach=True)
            grads.append({n: p.grad.detach().clone().numpy() for n, p in model.named_parameters()})
            opt.step()
            if rec is not None:
                rec.step()
        return grads

    out = str(tmp_path / "d")
    recorded, plain = _recorded_and_plain(out, build, loop, save="statistics")
    for a, b in zip(recorded, plain):
        assert all(np.array_equal(a[n], b[n]) for n in a)
    tensors = tensors_by_iteration(out)
    for it, want in enumerate(plain):
        for name, g in want.items():
            src = tensors[it][(f"{name}.grad", "output", 0)].source
            got, exp = src.stored_stats(), tensor_stats(g).to_dict()
            for stat in ("min", "max", "mean", "l2norm", "zeros"):
                assert got[stat] == pytest.approx(exp[stat], rel=1e-6), (it, name, stat)
            assert src.digest() == digest_of(g), (it, name)


def test_gradient_that_is_a_view_of_a_larger_tensor(tmp_path: pytest.TempPathFactory) -> None:
    """Gradients handed over as views (a slice of a larger buffer, a transpose of one of the same size)
    get the statistics and digest of exactly their own elements."""
    import torch

    from debugger.formats.tdbg_h5.arrays import digest_of
    from debugger.torch import Recorder

    class Views(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, a, b):      # type: ignore[no-untyped-def]
            return x * a.sum() + b.sum()

        @staticmethod
        def backward(ctx, g):           # type: ignore[no-untyped-def]
            buf = torch.arange(30.0).reshape(6, 5) - 7.0
            return None, buf[2:5], (buf * 2).t()     # a slice of rows; the whole buffer transposed

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.Parameter(torch.ones(3, 5))
            self.b = torch.nn.Parameter(torch.ones(6, 5).t())    # laid out as its gradient: kept as it is

        def forward(self, x):           # type: ignore[no-untyped-def]
            return Views.apply(x, self.a, self.b)

    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    out = str(tmp_path / "d")
    with Recorder(out, model, opt, save="statistics") as rec:
        opt.zero_grad()
        model(torch.ones(2)).sum().backward()
        opt.step()
        rec.step()
    want = {n: p.grad.numpy() for n, p in model.named_parameters()}
    tensors = tensors_by_iteration(out)
    for name, g in want.items():
        src = tensors[0][(f"{name}.grad", "output", 0)].source
        got, exp = src.stored_stats(), tensor_stats(g).to_dict()
        for stat in ("count", "min", "max", "mean", "l2norm", "zeros"):
            assert got[stat] == pytest.approx(exp[stat], rel=1e-6), (name, stat)
        assert src.digest() == digest_of(np.ascontiguousarray(g)), name


def test_inference_mode_forward_is_recorded(tmp_path: pytest.TempPathFactory) -> None:
    """A forward pass under torch.inference_mode (tensors without version counters) is recorded like
    any other, in both modes (a RuntimeWarning, an error under pytest, would say it was dropped)."""
    import torch

    from debugger.torch import Recorder

    for save in ("statistics", "tensors"):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1)).eval()
        out = str(tmp_path / save)
        with Recorder(out, model, save=save) as rec:
            with torch.inference_mode():
                y = model(torch.ones(2, 3))
            rec.step()
        relu = [ref for key, ref in tensors_by_iteration(out)[0].items() if "relu" in key[0] and key[1] == "output"]
        assert len(relu) == 1
        want = torch.relu(model[0](torch.ones(2, 3))).detach().numpy()
        src = relu[0].source
        st = src.stored_stats() if save == "statistics" else tensor_stats(src.array()).to_dict()
        assert st["max"] == pytest.approx(float(want.max()), rel=1e-6), save
        assert y.shape == (2, 1)


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads the resident size from /proc")
def test_host_copies_are_freed_after_their_iteration(tmp_path: pytest.TempPathFactory) -> None:
    """Values mode keeps host copies of one iteration only until its file is written: iterations
    that are not recorded afterwards hold none of them (the memory bound of the writer hand-over)."""
    code = r'''
import os, sys, torch
from debugger.torch import Recorder
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(2_000_000, 8)           # 64 MB: its copy and the outputs' are what a leak would hold
model(x).sum().backward()              # a plain step first: the training's own memory is in use
opt.step(); opt.zero_grad()
base = rss()
with Recorder(sys.argv[1], model, opt, save="tensors", iterations=[0]) as rec:
    for it in range(3):
        model(x).sum().backward()
        opt.step(); opt.zero_grad()
        rec.step()
        rec.flush()
    print(round((rss() - base) / 2**20))
'''
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path / "d")], capture_output=True, text=True,
                       timeout=240)
    assert p.returncode == 0, p.stderr[-2000:]
    # iteration 0 copies x and both layers' outputs (3 x 64 MB): held, they would show as +192 MB
    assert int(p.stdout.split()[-1]) < 64, p.stdout


def test_transformer_statistics_equal_its_values(tmp_path: pytest.TempPathFactory) -> None:
    """A transformer's operators (embedding lookups by int64 ids, attention, layer norm, GELU, dropout
    masks) under AdamW (one-signed second moments), with weights, gradients and state larger than a
    chunk: save="statistics" stores, for every tensor, the statistics numpy's passes give over the
    values that save="tensors" stores for the same seeded run (counts, min and max exactly)."""
    import torch

    from debugger.stats.core import CHUNK, COUNT_NAMES
    from debugger.torch import Recorder

    def build() -> Any:
        vocab, width = CHUNK // 256 + 77, 256           # the embedding: more elements than one chunk
        model = torch.nn.Sequential(
            torch.nn.Embedding(vocab, width),
            torch.nn.TransformerEncoderLayer(width, nhead=4, dim_feedforward=64, dropout=0.1,
                                             activation="gelu", batch_first=True),
            torch.nn.Flatten(), torch.nn.Linear(12 * width, 5))
        return model, torch.optim.AdamW(model.parameters(), lr=1e-3)

    def loop(model: Any, opt: Any, rec: Any) -> None:
        ids = torch.randint(0, 1000, (6, 12))
        y = torch.randint(0, 5, (6,))
        for _ in range(2):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(ids), y).backward()
            opt.step()
            rec.step()

    runs = {}
    for save in ("tensors", "statistics"):
        out = runs[save] = str(tmp_path / save)
        torch.manual_seed(0)
        model, opt = build()
        with Recorder(out, model, opt, save=save) as rec:
            loop(model, opt, rec)
    vals, sts = tensors_by_iteration(runs["tensors"]), tensors_by_iteration(runs["statistics"])
    assert sorted(vals) == sorted(sts) == [0, 1]
    kinds: set[str] = set()
    big = 0
    for it in vals:
        assert set(vals[it]) == set(sts[it])
        for key, ref in vals[it].items():
            a = ref.source.array()
            want, got = tensor_stats(a).to_dict(), sts[it][key].source.stored_stats()
            for name in STAT_NAMES:
                w, v = want[name], got.get(name)
                if w is None:
                    assert v is None or math.isnan(v), (it, key, name)
                elif name in COUNT_NAMES or name in ("min", "max"):
                    assert v == w, (it, key, name)
                else:
                    assert v == pytest.approx(w, rel=1e-5, abs=1e-6), (it, key, name)
            kinds.add(ref.kind)
            big += a.size > CHUNK
    assert {"weight", "gradient", "optimizer_state", "activation"} <= kinds and big >= 4


def test_a_second_run_into_the_same_dump_is_refused(tmp_path: Any) -> None:
    """Runs never mix (issue 38): recording again into a rank folder that holds a run is refused at start,
    naming the folder and what it holds, before any hook or file; the earlier run stays byte for byte;
    another rank of the same dump is a part of the same job and records."""
    import nanogpt_kit as K
    import torch
    from treehash import tree_digest

    from debugger.torch import Recorder
    path = str(tmp_path / "d")
    K.train("eager", 3, record={"level": "parameters", "series": True, "save": "statistics"}, path=path)
    before = tree_digest(path)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(FileExistsError) as err:
        Recorder(path, model, opt).start()
    rank_dir = os.path.join(path, "rank_0")
    assert str(err.value).startswith(f"{rank_dir} already holds a recorded run (3 iteration(s), 1 graph(s), ")
    assert tree_digest(path) == before and torch.autograd.backward.__module__ == "torch.autograd"
    with Recorder(path, model, opt, rank=1) as rec:
        model(torch.ones(1, 4)).sum().backward()
        opt.step()
        rec.step()
    assert open_dump(path).rank_ids == [0, 1]
