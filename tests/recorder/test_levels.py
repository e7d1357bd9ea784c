"""Recording levels ("parameters", a schedule, capture_next) and the replay of repeating iterations,
on models built by their libraries, against truth taken by plain torch from the same tensors."""
from __future__ import annotations

import warnings
from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F

from clirun import run_cli
from debugger.formats.records import LEVEL_OPS, LEVEL_PARAMETERS, Kind
from debugger.model import open_dump
from debugger.stats.core import STAT_NAMES, tensor_stats
from debugger.torch import Recorder
from models.corpus import build

from recorder_kit import tensors_by_iteration


def _stats(t: torch.Tensor) -> dict[str, Any]:
    st = tensor_stats(t.detach().float().numpy())
    return {n: getattr(st, n) for n in STAT_NAMES}


def _assert_stats(got: Any, want: dict[str, Any]) -> None:
    for name, v in want.items():
        assert got[name] == pytest.approx(v, rel=1e-5, abs=1e-7), name


def _gpt2_steps(steps: int, on_step: Callable[[int, Any], None] | None = None,
                **recorder: Any) -> tuple[list[float], dict[str, Any]]:
    """Train the corpus GPT-2 ``steps`` steps (under a Recorder when ``recorder`` names a dump); the
    losses, and per step plain torch's view of its gradients and weights."""
    m = build("gpt2")
    opt = torch.optim.AdamW(m.module.parameters(), lr=1e-3)
    truth: dict[str, Any] = {"grads": [], "weights": [], "loss": [],
                             "initial": {n: p.detach().clone() for n, p in m.module.named_parameters()}}

    def grab(o: Any, args: Any, kwargs: Any) -> None:
        truth["grads"].append({n: p.grad.detach().clone() for n, p in m.module.named_parameters() if p.grad is not None})

    opt.register_step_pre_hook(grab)
    losses: list[float] = []
    rec = Recorder(**recorder, model=m.module, optimizer=opt) if recorder else None
    if rec is not None:
        rec.start()
    try:
        for i in range(steps):
            loss = m.loss(m.module, m.batch(i))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            truth["loss"].append(loss.detach().clone())
            truth["weights"].append({n: p.detach().clone() for n, p in m.module.named_parameters()})
            if on_step is not None:
                on_step(i, rec)
            if rec is not None:
                rec.step()
    finally:
        if rec is not None:
            rec.close()
    return losses, truth


def test_parameters_level_holds_weights_gradients_state_and_loss_equal_to_torch(tmp_path: Any) -> None:
    """level="parameters": no operator node, a dispatch-free run with the same losses; per iteration the
    loss, each weight (after the step) and each gradient (as the step began) with plain torch's
    statistics, optimizer state nodes, and the graph says its level; each weight's gradient node reads the
    weight as the step found it."""
    dump = str(tmp_path / "d")
    plain, _ = _gpt2_steps(3)
    losses, truth = _gpt2_steps(3, path=dump, save="statistics", level="parameters")
    assert losses == plain      # training unchanged, bit for bit
    r = open_dump(dump).rank(0)
    assert [r.graph(g).level for g in r.graph_ids] == [LEVEL_PARAMETERS]
    graph = r.graph(r.graph_ids[0])
    kinds = {n.kind for n in graph.nodes()}
    assert kinds == {Kind.WEIGHT, Kind.GRADIENT, Kind.OPTIMIZER_STATE, Kind.LOSS}
    assert {n.op_type for n in graph.nodes()} == {"Parameter", "Gradient", "Loss"}
    tensors = tensors_by_iteration(dump)
    assert sorted(tensors) == [0, 1, 2]
    for it in range(3):
        _assert_stats(tensors[it][("loss", "output", 0)].source.stored_stats(), _stats(truth["loss"][it]))
        for name, w in truth["weights"][it].items():
            _assert_stats(tensors[it][(name, "output", 0)].source.stored_stats(), _stats(w))
        for name, g in truth["grads"][it].items():
            _assert_stats(tensors[it][(f"{name}.grad", "output", 0)].source.stored_stats(), _stats(g))
    # a gradient is made from the loss and from its weight as the step found it, captured as an input
    # (its previous value in the first iteration: the weight before any update, per torch)
    assert [e[0] for e in graph.record_of("transformer.wte.weight.grad").inputs] == ["loss", "transformer.wte.weight"]
    for it in range(3):
        before = truth["initial"] if it == 0 else truth["weights"][it - 1]
        for name, w in before.items():
            _assert_stats(tensors[it][(f"{name}.grad", "input", 1)].source.stored_stats(), _stats(w))


def test_schedule_and_capture_next_choose_each_iteration_level(tmp_path: Any) -> None:
    """{"parameters": every step, "ops": [2]} plus capture_next(1) at step 4: iterations 2 and 5 hold
    every operator, the others the parameters only; `tdbg info` and `tdbg scan` say so."""
    dump = str(tmp_path / "d")

    def ask(i: int, rec: Any) -> None:
        if i == 4:
            rec.capture_next(1, "ops")

    _gpt2_steps(7, ask, path=dump, save="statistics", level={"parameters": None, "ops": [2]})
    r = open_dump(dump).rank(0)
    level_of = {it: r.graph(g).level for g in r.graph_ids for it in r.iterations(g)}
    assert level_of == {0: "parameters", 1: "parameters", 2: "ops", 3: "parameters", 4: "parameters",
                        5: "ops", 6: "parameters"}
    info = run_cli("info", dump)
    assert "recording levels: parameters at iterations 0-1,3-4,6; ops at iterations 2,5" in info.out
    scan = run_cli("scan", dump, "--json", "--no-cache")
    notes = scan.json["level_notes"]
    assert len(notes) == 1 and notes[0].startswith('Iterations 0-1,3-4,6 were recorded at level "parameters"')
    assert "activation watchpoints have nothing to check" in notes[0]
    text = run_cli("scan", dump, "--no-cache").out
    assert notes[0] in text


def test_bad_levels_are_refused() -> None:
    model = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match="level must be one of parameters, modules, ops, got 'layers'"):
        Recorder("/nonexistent", model, level="layers")
    with pytest.raises(ValueError, match="give the iterations of each level"):
        Recorder("/nonexistent", model, level={"ops": None}, iterations="0-3")
    with pytest.raises(ValueError, match="level must be one of parameters, modules, ops, got 'all'"):
        Recorder("/nonexistent", model).capture_next(2, level="all")
    from debugger.torch.callbacks import RecordingSession

    with pytest.raises(ValueError, match="got 'layers'"):     # where the user wrote it, before training starts
        RecordingSession("/nonexistent", level="layers")


def _records(dump: str) -> dict[int, dict[tuple[str, str, int], tuple[Any, Any, Any]]]:
    return {it: {k: (ref.source.stored_stats(), ref.source.stored_extras(), ref.source.digest()) for k, ref in refs.items()}
            for it, refs in tensors_by_iteration(dump).items()}


def _resnet_run(dump: str, steps: int, replay: bool, change_at: int | None = None) -> None:
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(2, 3, 32, 32, generator=g), torch.randint(0, 10, (2,), generator=g)
    with Recorder(dump, model, opt, save="statistics", replay=replay) as rec:
        for i in range(steps):
            out = model(x)
            if i == change_at:
                out = out * 1.0     # one operator more: this iteration is not the one traced
            loss = F.cross_entropy(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step()


def test_replayed_iterations_store_what_full_recording_stores(tmp_path: Any) -> None:
    """Iterations replayed against the trace of a repeated graph hold the very statistics, extras and
    digests a full recording of the same run holds, under the same graph."""
    full, fast = str(tmp_path / "full"), str(tmp_path / "fast")
    _resnet_run(full, 5, replay=False)
    _resnet_run(fast, 5, replay=True)
    a, b = _records(full), _records(fast)
    assert sorted(a) == sorted(b) == [0, 1, 2, 3, 4]
    for it in a:
        assert a[it] == b[it], it
    ra, rb = open_dump(full).rank(0), open_dump(fast).rank(0)
    assert ra.graph_ids == rb.graph_ids
    assert {g: ra.iterations(g) for g in ra.graph_ids} == {g: rb.iterations(g) for g in rb.graph_ids}
    assert all(rb.graph(g).level == LEVEL_OPS for g in rb.graph_ids)


def test_an_iteration_unlike_its_trace_is_recorded_in_full_from_where_it_differs(tmp_path: Any) -> None:
    """Iteration 4 runs one operator more than the repeated graph (a NaN check people add, here a
    multiplication): nothing is lost. Its graph so far is rebuilt from the trace and the rest recorded
    in full: every iteration holds what a full recording of the same run holds, under equal graphs."""
    full, fast = str(tmp_path / "full"), str(tmp_path / "fast")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _resnet_run(full, 7, replay=False, change_at=4)
        _resnet_run(fast, 7, replay=True, change_at=4)
    a, b = _records(full), _records(fast)
    assert sorted(a) == sorted(b) == list(range(7))
    for it in a:
        assert a[it] == b[it], it
    ra, rb = open_dump(full).rank(0), open_dump(fast).rank(0)
    assert {g: ra.iterations(g) for g in ra.graph_ids} == {g: rb.iterations(g) for g in rb.graph_ids}
    changed = [g for g in rb.graph_ids if rb.iterations(g) == [4]]
    assert len(changed) == 1
    for g in rb.graph_ids:
        ga, gb = ra.graph(g), rb.graph(g)
        # the stacks' outer frames are this test's two calls, on two lines: their innermost frame is compared
        assert [(n.name, n.op_type, n.kind, n.inputs, n.stack[:1], n.module) for n in map(ga.record_of, ga.names())] == \
            [(n.name, n.op_type, n.kind, n.inputs, n.stack[:1], n.module) for n in map(gb.record_of, gb.names())]
        assert ga.execution_order == gb.execution_order


def test_every_command_reads_a_parameters_level_dump(tmp_path: Any) -> None:
    """info, node, code, graph, scan, compare (run against itself) and convert all answer on a dump
    recorded at level "parameters", with the nodes that level holds."""
    dump = str(tmp_path / "d")
    _gpt2_steps(2, path=dump, save="statistics", level="parameters")
    assert run_cli("info", dump).code == 0
    node = run_cli("node", dump, "transformer.wte.weight.grad")
    assert node.code == 0 and "Gradient, kind gradient" in node.out and "dumped in iterations: 0-1" in node.out
    loss = run_cli("node", dump, "loss")
    assert loss.code == 0 and "Loss, kind loss" in loss.out
    line = next(f"{f.file}:{f.line}" for f in open_dump(dump).rank(0).graph(0).stack("loss"))
    code = run_cli("code", dump, line)
    assert code.code == 0 and " loss " in code.out
    dot = str(tmp_path / "g.dot")
    assert run_cli("graph", dump, "--format", "dot", "-o", dot).code == 0
    assert '"loss"' in open(dot).read()
    assert run_cli("scan", dump, "--no-cache").code in (0, 1, 4)
    same = run_cli("compare", dump, dump, "--json", "--no-cache")
    assert same.code == 0 and same.json
    assert run_cli("convert", dump, str(tmp_path / "out")).code == 0


def test_a_layer_made_inside_a_recorded_iteration_reads_no_uninitialised_memory(tmp_path: Any) -> None:
    """nn.Linear made while "ops" records fills torch.empty's memory with nn.init's uniform_. That memory held
    whatever bytes it had (here NaN, freed just before), and its tensor object is gone once nn.Parameter wraps
    it: uniform_'s destination was taken for an unknown data input and its garbage dumped, a false overflow
    in about 1 run of 12. Now the destination is the allocation's, overwritten (no data edge, nothing read)."""
    from clirun import scan_quiet

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with Recorder(str(tmp_path / "d"), model, opt, save="statistics", level="ops") as rec:
        for step in range(3):
            if step == 1:
                junk = torch.full((64, 64), float("nan"))
                del junk        # the allocator hands this memory to the next allocation of its size
                model.append(torch.nn.Linear(64, 64))
                opt.add_param_group({"params": model[1].parameters()})
            loss = model(torch.randn(4, 64)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step()
    rank = open_dump(str(tmp_path / "d")).rank(0)
    graph = rank.graph(next(g for g in rank.graph_ids if 1 in rank.iterations(g)))
    fills = [graph.node(n) for n in graph.names() if graph.node(n).op_type == "uniform_"]
    assert len(fills) == 2
    assert all(n.inputs == [(n.inputs[0][0], "control")] and graph.node(n.inputs[0][0]).op_type == "empty"
               for n in fills), [n.inputs for n in fills]
    assert not [n for n in graph.names() if graph.node(n).op_type == "Input" and graph.node(n).kind == Kind.INPUT]
    scan_quiet(str(tmp_path / "d"), "--no-cache")     # no activation function in this model
