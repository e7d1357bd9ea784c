"""Level "ops" on code compiled with the "tdbg" backend (debugger.torch.graphtaps): the compiled program's
own operators are recorded, forward and backward, with their modules and source lines, the training
bit-identical to the same program compiled by Inductor unrecorded; a NaN's origin is an operator of the
compiled program; the statistics are those of the values the compiled code computed (checked against
plain torch)."""
from __future__ import annotations

import functools
import warnings
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from clirun import run_cli, scan_quiet  # noqa: E402
from models.corpus import quiet_threads  # noqa: E402
from nanogpt_kit import inf_into_weight_at, train  # noqa: E402
from recorder_kit import tensors_by_iteration, train_steps  # noqa: E402

from debugger.model import open_dump  # noqa: E402
from debugger.stats.core import STAT_NAMES, tensor_stats  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf:UserWarning")
STEPS = 4
OPS = {"level": "ops", "save": "statistics"}
C_FC = "model/h.0-Block/c_fc-Linear/addmm-0"      # the first MLP's Linear, as the compiled graph computes it
_plain: dict[str, Any] = {}


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> None:
    """Each test compiles anew: the process's earlier compilations of the same forward (other backends,
    grad modes) would reach Dynamo's recompile limit, after which it runs the code eagerly."""
    torch._dynamo.reset()


def _inductor(mode: str) -> Any:
    """The same program compiled by Inductor, unrecorded (once per mode)."""
    if mode not in _plain:
        _plain[mode] = train(mode, STEPS, backend="inductor")
    return _plain[mode]


def _nodes(dump: str) -> dict[str, Any]:
    r = open_dump(dump).rank(0)
    return {n.name: n for g in r.graphs for n in r.graphs[g].nodes()}


@pytest.mark.parametrize("mode", ["compile", "module.compile"])
def test_compiled_program_operators_recorded_unchanged(tmp_path: Any, mode: str) -> None:
    """Every "ops" iteration holds the compiled forward and backward graphs' operators, in their modules'
    scopes, with source lines and edges to the weights; losses and weights bit-identical to Inductor's
    unrecorded run; said once; a healthy run scans clean."""
    dump = str(tmp_path / "d")
    run = train(mode, STEPS, record=OPS, path=dump, backend="tdbg")
    plain = _inductor(mode)
    assert run.losses == plain.losses, "the recorder changed a loss bit"
    for name, w in plain.weights.items():
        assert torch.equal(w, run.weights[name]), name
    said = [w for w in run.warnings if "record the operators of the compiled program" in w]
    assert len(said) == 1 and len(run.warnings) == 1 and "numbers are unchanged" in said[0], run.warnings
    r = open_dump(dump).rank(0)
    assert {r.graphs[g].level for g in r.graphs} == {"ops"}
    assert {it for g in r.graphs for it in r.iterations(g)} == set(range(STEPS))
    nodes = _nodes(dump)
    fc = nodes[C_FC]
    assert fc.op_type == "addmm" and fc.module == "h.0.c_fc" and not fc.is_backward
    assert fc.stack and fc.stack[0].file.endswith("nanogpt_kit.py") and "self.c_fc(" in fc.stack[0].code
    assert {"h.0.c_fc.weight", "h.0.c_fc.bias"} <= {src for src, _ in fc.inputs}
    backward = [n for n in nodes.values() if n.is_backward and n.module == "h.0.c_fc"]
    assert backward and all(n.name.startswith("backward/model/h.0-Block/c_fc-Linear/") for n in backward)
    assert any(src == "h.0.c_fc.weight" for n in backward for src, _ in n.inputs)
    assert sum(1 for n in nodes.values() if n.op_type not in ("Parameter", "Input")) > 100
    scan_quiet(dump)


def test_compiled_train_step_operators(tmp_path: Any) -> None:
    """A compiled train step (forward, backward and the fused optimizer in one torch.compile): after the
    iteration that finds it compiled, its graphs' operators are recorded; the run scans clean."""
    dump = str(tmp_path / "d")
    run = train("step", STEPS, record=OPS, path=dump, backend="tdbg")
    assert all(loss == loss for loss in run.losses)
    r = open_dump(dump).rank(0)
    levels = {it: r.graphs[g].level for g in r.graphs for it in r.iterations(g)}
    assert levels[STEPS - 1] == "ops", levels
    last = next(g for g in r.graphs if STEPS - 1 in r.iterations(g))
    names = [n.name for n in r.graphs[last].nodes()]
    assert any(n.startswith("model/h.0-Block/c_fc-Linear/") for n in names), names[:40]
    scan_quiet(dump)


def test_nan_origin_is_an_operator_of_the_compiled_program(tmp_path: Any) -> None:
    """An inf written into a weight between steps: the first non-finite operator output of the compiled
    program (the Linear that reads it) is the headline, with its source line."""
    dump = str(tmp_path / "d")
    run = train("compile", STEPS, record=OPS, path=dump, backend="tdbg", fault=inf_into_weight_at(2))
    plain = train("compile", STEPS, backend="inductor", fault=inf_into_weight_at(2)).losses
    assert run.losses[:2] == plain[:2] and all(x != x for x in run.losses[2:] + plain[2:])
    r = run_cli("scan", dump)
    assert r.code == 1, r.out
    head = next(line for line in r.out.splitlines() if line.startswith("First problem"))
    assert f"iteration 2, rank 0: {C_FC}" in head and "nanogpt_kit.py:36" in head, r.out


def test_compiled_statistics_are_the_values_torch_computes(tmp_path: Any) -> None:
    """The statistics the compiled code computed for its first MLP Linear at iteration 0 (its first call:
    the evaluation batch 100) are those of the output plain torch computes for the same weights and batch (to float32 rounding: Inductor may sum
    in another order), NaN and zero counts exact."""
    import nanogpt_kit as K
    dump = str(tmp_path / "d")
    train("compile", 1, record=OPS, path=dump, backend="tdbg")
    got = tensors_by_iteration(dump)[0][(C_FC, "output", 0)].source.stored_stats()
    with quiet_threads():
        torch.manual_seed(1337)
        model = K.GPT()
        seen: list[torch.Tensor] = []
        model.h[0].c_fc.register_forward_hook(lambda m, a, out: seen.append(out.detach().clone()))
        with torch.no_grad():
            model(*K.get_batch(100))
    want = tensor_stats(seen[0].reshape(-1, seen[0].shape[-1]).numpy())
    for name in STAT_NAMES:
        w = getattr(want, name)
        if name in ("count", "nan_count", "pos_inf_count", "neg_inf_count"):
            assert got[name] == w, name
        elif w is not None:
            assert got[name] == pytest.approx(w, rel=1e-4, abs=1e-6), name


def test_plain_backend_at_ops_names_the_tdbg_backend(tmp_path: Any) -> None:
    """Compiled by Inductor itself, an "ops" iteration is taken at the boundary, and the note says how to
    record the compiled program's operators."""
    run = train("compile", 2, record=OPS, path=tmp_path / "d", backend="inductor")
    said = [w for w in run.warnings if 'are recorded at level "modules"' in w]
    assert len(said) == 1 and 'backend="tdbg"' in said[0], run.warnings


def test_values_recording_keeps_nodes_and_says_why_no_values(tmp_path: Any) -> None:
    """save="tensors": the compiled program computes statistics, not copies: its operators are nodes
    without stored values, said once; the weights, gradients and loss are stored with their values."""
    dump = str(tmp_path / "d")
    run = train("compile", 2, record={"level": "ops", "save": "tensors"}, path=dump, backend="tdbg")
    assert any("without values" in w for w in run.warnings), run.warnings
    tensors = tensors_by_iteration(dump)[1]
    assert (C_FC, "output", 0) not in tensors and C_FC in _nodes(dump)
    assert tensors[("h.0.c_fc.weight", "output", 0)].has_values


def _steps(backend: Any, path: Any = None, lengths: tuple[int, ...] = (16, 16, 16), bf16: bool = False,
           dynamic: bool = False) -> tuple[list[float], list[str]]:
    """nanoGPT steps of these sequence lengths compiled with ``backend`` (under bfloat16 autocast when
    ``bf16``), recorded at "ops" when ``path``: the losses and the recorder's warnings."""
    import nanogpt_kit as K
    from debugger.torch import Recorder
    torch._dynamo.reset()
    with quiet_threads(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.manual_seed(1337)
        model = K.GPT()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        run = torch.compile(model, backend=backend, dynamic=dynamic or None)
        rec = Recorder(path, run, opt, **OPS).start() if path else None

        def loss_of(i: int) -> Any:
            x, y = K.get_batch(i)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                return run(x[:, :lengths[i]], y[:, :lengths[i]])[1]
        losses = train_steps(opt, loss_of, len(lengths), rec)
        if rec is not None:
            rec.close()
    return losses, [str(w.message) for w in caught if "tdbg" in str(w.message)]


def test_bfloat16_autocast_training_bit_identical(tmp_path: Any) -> None:
    """Under bfloat16 autocast Inductor keeps fused results in float32 registers: the default taps only
    read what the program stores anyway (matmuls, reductions, graph outputs), so the losses are Inductor's
    to the bit; options={"operators": "all"} records every operator (more nodes), said in the docs to
    possibly change the last bits."""
    from debugger.torch import tdbg_backend
    plain, _ = _steps("inductor", bf16=True)
    losses, said = _steps("tdbg", tmp_path / "d", bf16=True)
    assert losses == plain and len(said) == 1, said
    _steps(functools.partial(tdbg_backend, operators="all"), tmp_path / "all", bf16=True)
    assert len(_nodes(str(tmp_path / "all"))) > len(_nodes(str(tmp_path / "d"))) + 50


def test_dynamic_shapes_keep_one_graph(tmp_path: Any) -> None:
    """dynamic=True: the tapped graphs add no guard (the same one graph as Inductor's, the same losses),
    and each iteration's operators have the shapes that iteration ran with."""
    from torch._dynamo.utils import counters

    graphs = []
    for backend, path in (("inductor", None), ("tdbg", tmp_path / "d")):
        counters.clear()
        losses, _ = _steps(backend, path, lengths=(16, 8, 12), dynamic=True)
        graphs.append((counters["stats"]["unique_graphs"], losses))
    assert graphs[0] == graphs[1] and graphs[0][0] == 1
    tensors = tensors_by_iteration(str(tmp_path / "d"))
    assert [tensors[i][(C_FC, "output", 0)].shape for i in range(3)] == [(64, 128), (32, 128), (48, 128)]


def test_backend_options_are_checked() -> None:
    """An unknown option of the backend is a clear error at compilation."""
    import nanogpt_kit as K
    torch._dynamo.reset()
    with pytest.raises(Exception, match="options are"):
        torch.compile(K.GPT(), backend="tdbg", options={"operators": "some"})(*K.get_batch(0))


def test_backend_is_inductor_outside_recording() -> None:
    """Without a recorder the "tdbg" backend runs Inductor's build: the same outputs, bit for bit, and
    gradients, as backend="inductor"."""
    import nanogpt_kit as K
    outs = []
    with quiet_threads(), warnings.catch_warnings():
        warnings.simplefilter("error")
        for backend in ("inductor", "tdbg"):
            torch.manual_seed(1337)
            model = K.GPT()
            loss = torch.compile(model, backend=backend)(*K.get_batch(0))[1]
            loss.backward()
            outs.append((loss.detach(), model.h[0].c_fc.weight.grad.clone()))
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])


def test_statistics_operator_never_raises() -> None:
    """The operator the tapped graphs call answers every input: its statistics where it can read them
    (a transposed view, NaN counted), else a row whose count is FAILED (a sparse tensor), which the
    recorder turns into a dropped iteration with a warning instead of an error inside the training."""
    from debugger.torch import graphtaps as G
    from debugger.torch.devstats import NCOLS
    op = G._stats_op()
    sparse = op(torch.randn(3, 3).to_sparse())
    assert sparse[0].item() == G.FAILED and sparse.shape == (NCOLS + 1 + G.SHAPE_DIMS,)
    view = op(torch.arange(6.0).reshape(2, 3).t())
    assert view[:2].tolist() == [6.0, 0.0] and view[NCOLS:NCOLS + 3].tolist() == [2.0, 3.0, 2.0]
    assert op(torch.tensor([1.0, float("nan")]))[1].item() == 1.0
