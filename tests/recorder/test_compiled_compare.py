"""`tdbg compare` of an eager run against the same run compiled (the "tdbg" backend at level "ops"): the
two programs' operators pair by module, operator type, shape and order, not by name; what one program
computes and the other does not is counted, not graded; identical training compares clean, and a change
only the compiled program makes (a compiler bug's stand-in: a pre-hook active only while Dynamo traces)
is named at the first compiled operator it reaches, with its source line, in float32 and under
bfloat16 autocast, whichever side is the baseline."""
from __future__ import annotations

import functools
import inspect
import json
from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch")

import nanogpt_kit as K  # noqa: E402
from clirun import run_cli  # noqa: E402
from models.corpus import quiet_threads  # noqa: E402
from recorder_kit import train_steps  # noqa: E402

from debugger.compare import compare_runs  # noqa: E402
from debugger.model import open_dump  # noqa: E402
from debugger.torch import tdbg_backend  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf:UserWarning")
FIRST = {"level": "ops", "save": "statistics", "iterations": [0]}     # the same step on both sides
MLP_1 = "model/h.1-Block/c_fc-Linear/addmm-0"     # block 1's MLP input Linear, its first call


def _c_fc_line() -> int:
    """The line of ``self.c_fc(...)`` in the kit's Block.forward (where the compiled-only change acts)."""
    lines, start = inspect.getsourcelines(K.Block.forward)
    return start + next(i for i, text in enumerate(lines) if "self.c_fc(" in text)


def _nanogpt(path: Any, backend: Any, prepare: Callable[[K.GPT], None] | None = None) -> list[float]:
    """nanoGPT's loop (evaluation batches, then the training step, in iteration 0), eager or compiled
    with ``backend``, recorded at "ops" in its first iteration."""
    torch._dynamo.reset()
    mode = "eager" if backend == "eager" else "compile"
    return K.train(mode, 2, record=FIRST, path=path, backend=backend if mode != "eager" else "inductor",
                   prepare=prepare).losses


def _bf16(path: Any, backend: str, prepare: Callable[[K.GPT], None] | None = None) -> list[float]:
    """Two steps under bfloat16 autocast, eager or compiled with ``backend``, the first recorded at "ops"."""
    import warnings

    torch._dynamo.reset()
    with quiet_threads(), warnings.catch_warnings():
        warnings.simplefilter("ignore")     # the recorder's one note on what "ops" records here
        torch.manual_seed(1337)
        model = K.GPT()
        if prepare is not None:
            prepare(model)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        run = model if backend == "eager" else torch.compile(model, backend=backend)

        def loss_of(i: int) -> Any:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return run(*K.get_batch(i))[1]
        return _two_steps(path, run, opt, loss_of)


def _two_steps(path: str, run: Any, opt: Any, loss_of: Callable[[int], Any]) -> list[float]:
    """Two training steps, the first recorded at "ops" (FIRST): the losses."""
    from debugger.torch import Recorder
    with Recorder(path, run, opt, **FIRST) as rec:
        return train_steps(opt, loss_of, 2, rec)


@pytest.fixture(scope="module")
def fp32(tmp_path_factory: Any) -> dict[str, str]:
    """Eager, compiled, compiled reading every operator (operators="all"), and compiled with block 1's
    MLP input scaled by 1.01 (compiled only)."""
    root = tmp_path_factory.mktemp("fp32")
    out = {k: str(root / k) for k in ("eager", "compiled", "all", "miscompiled")}
    eager = _nanogpt(out["eager"], "eager")
    assert _nanogpt(out["compiled"], "tdbg") == eager          # the truth: the same training, to the bit
    _nanogpt(out["all"], functools.partial(tdbg_backend, operators="all"))
    assert _nanogpt(out["miscompiled"], "tdbg", K.miscompiled_mlp) != eager
    return out


@pytest.fixture(scope="module")
def bf16(tmp_path_factory: Any) -> dict[str, str]:
    """The same three under bfloat16 autocast (the change 1.25: bfloat16's tolerance is 16 ulps, 6 %)."""
    root = tmp_path_factory.mktemp("bf16")
    out = {k: str(root / k) for k in ("eager", "compiled", "miscompiled")}
    _bf16(out["eager"], "eager")
    _bf16(out["compiled"], "tdbg")
    _bf16(out["miscompiled"], "tdbg", functools.partial(K.miscompiled_mlp, factor=1.25))
    return out


def test_compiled_dump_says_it_is_a_compiled_program(fp32: dict[str, str]) -> None:
    """The graph records which program it holds; a multi-output operator is one node, as eager."""
    def graph(name: str) -> Any:
        return open_dump(fp32[name]).rank(0).graph(0)
    assert graph("compiled").compiled and not graph("eager").compiled
    details = json.loads(run_cli("info", fp32["compiled"], "--json").out)["ranks"][0]["graph_details"]
    assert [d["compiled"] for d in details] == [True] * len(details)
    # the training call's attention (its third: two evaluation calls first) keeps its logsumexp for backward
    attention = graph("compiled").record_of("model/h.0-Block/_scaled_dot_product_flash_attention_for_cpu-2")
    assert [o.shape for o in attention.outputs] == [(4, 2, 16, 16), (4, 2, 16)]


@pytest.mark.parametrize("a,b", [("compiled", "eager"), ("eager", "compiled"), ("all", "eager")])
def test_identical_training_compares_clean(fp32: dict[str, str], a: str, b: str) -> None:
    """Eager against compiled, same weights and batches: no error; every matmul of the compiled program
    (forward and backward, evaluation calls and the training call) paired with the eager one of its
    module and call, also among every operator of the compiled program (its GELU's and LayerNorm's own
    operators between them); what has no counterpart counted, never graded."""
    res = compare_runs(fp32[a], fp32[b])
    assert res.exit_code == 0 and res.first_divergence is None and res.nothing_compared() is None
    prog, = res.programs
    assert (prog.compiled_a, prog.compiled_b) == (a != "eager", b != "eager")
    assert prog.outputs_compared >= 60 and prog.unread() is None
    compiled_nodes = open_dump(fp32["compiled" if "all" not in (a, b) else "all"]).rank(0).graph(0).names()
    matmuls = [n for n in compiled_nodes if n.rsplit("/", 1)[-1].split("-")[0] in ("addmm", "mm")]
    partner = dict(prog.paired) if a != "eager" else {y: x for x, y in prog.paired}
    assert len(matmuls) >= 40 and all(partner.get(n) == n for n in matmuls)   # its own module and call
    assert prog.alone_a and prog.alone_b          # decomposed LayerNorms, eager-only operators: said
    assert not any(p.missing and p.counted for p in res.pairs)


@pytest.mark.parametrize("a,b", [("miscompiled", "eager"), ("eager", "miscompiled")])
def test_compiled_only_change_named_at_its_operator(fp32: dict[str, str], a: str, b: str) -> None:
    """The compiled program scales block 1's MLP input by 1.01 (inside a fused kernel): the first
    divergence is that MLP's matmul in the first call, with its line, whichever side is the baseline."""
    res = compare_runs(fp32[a], fp32[b])
    f = res.first_divergence
    assert res.exit_code == 1 and f is not None
    assert (f.iteration, f.node, f.io) == (0, MLP_1, "output") and f.match == "program"
    assert f.source is not None and f.source.endswith(f"nanogpt_kit.py:{_c_fc_line()}")


def test_bfloat16_autocast_clean_and_change_named(bf16: dict[str, str]) -> None:
    """Under bfloat16 autocast the two programs round differently (Inductor keeps fused results in
    float32): graded at bfloat16's precision they agree; a 25 % compiled-only change is named."""
    healthy = compare_runs(bf16["compiled"], bf16["eager"])
    assert healthy.exit_code == 0 and healthy.first_divergence is None and healthy.programs[0].paired
    bad = compare_runs(bf16["miscompiled"], bf16["eager"])
    assert bad.first_divergence is not None and bad.first_divergence.node == MLP_1
    assert bad.first_divergence.precision == "bfloat16"


def test_cli_reports_the_programs(fp32: dict[str, str]) -> None:
    """The text says which side is compiled and how much was paired and left out; --json has it as
    "programs"; the exit status is the verdict's."""
    r = run_cli("compare", fp32["miscompiled"], fp32["eager"])
    code, out = r.code, r.out
    assert code == 1
    assert "a is compiled, b is eager" in out and "not compared" in out
    assert f"First divergence: iteration 0, rank 0: {MLP_1} output 0" in out
    r = run_cli("compare", fp32["compiled"], fp32["eager"], "--json")
    doc = json.loads(r.out)
    assert r.code == 0 and doc["first_divergence"] is None
    prog, = doc["programs"]
    assert prog["a"] == "compiled" and prog["b"] == "eager" and prog["operators_paired"] >= 40
    assert prog["a_only"] > 0 and prog["b_only"] > 0 and prog["b_only_examples"]


def test_compiled_train_step_against_eager(tmp_path: Any) -> None:
    """A compiled train step (forward, backward and the optimizer in one graph) recorded at iterations
    1-2 (its first "ops" iteration runs eagerly: the step is found compiled there) against an eager run
    recorded at 2 only: the recorders number their graphs differently (1 and 0), iteration 2 is compared
    across them, said, and is clean."""
    step, eager = str(tmp_path / "step"), str(tmp_path / "eager")
    torch._dynamo.reset()
    K.train("step", 3, record={**FIRST, "iterations": [1, 2]}, path=step, backend="tdbg")
    K.train("eager", 3, record={**FIRST, "iterations": [2]}, path=eager)
    res = compare_runs(step, eager, iterations="2")
    assert res.exit_code == 0 and res.first_divergence is None and res.nothing_compared() is None
    prog, = res.programs
    assert (prog.graph, prog.compiled_a, prog.compiled_b) == (1, True, False) and len(prog.paired) >= 40
    assert any("graph 1 of" in w and "compared with graph 0 of" in w for w in res.warnings)


def _llama(path: str, backend: str) -> list[float]:
    """Two steps of a tiny Hugging Face Llama (built from its config; its forward is wrapped, so Dynamo
    names the model ``L['args'][0]``), fused AdamW, eager or compiled, the first recorded at "ops"."""
    import warnings

    from transformers import LlamaConfig, LlamaForCausalLM

    torch._dynamo.reset()
    with quiet_threads(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        model = LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                                             num_attention_heads=4, num_key_value_heads=2, vocab_size=128))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
        run = model if backend == "eager" else torch.compile(model, backend=backend)

        def loss_of(i: int) -> Any:
            ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(i))
            return run(input_ids=ids, labels=ids).loss
        return _two_steps(path, run, opt, loss_of)


def test_hugging_face_llama_eager_against_compiled(tmp_path: Any) -> None:
    """A model nobody here wrote: every projection's matmul of the compiled Llama pairs with the eager
    one of its own module (the compiled scopes are the eager ones), and the comparison is clean."""
    pytest.importorskip("transformers")
    eager, compiled = str(tmp_path / "eager"), str(tmp_path / "compiled")
    _llama(eager, "eager")
    _llama(compiled, "tdbg")
    res = compare_runs(compiled, eager)
    assert res.exit_code == 0 and res.first_divergence is None
    prog, = res.programs
    partner = dict(prog.paired)
    projections = [n for n in open_dump(compiled).rank(0).graph(0).names()
                   if not n.startswith("backward/") and "_proj-Linear/mm-" in n]
    assert len(projections) == 2 * 7 and all(partner.get(n) == n for n in projections)


def test_compiled_operators_without_statistics_are_said(tmp_path: Any) -> None:
    """Both runs recorded with save="tensors": the compiled program's operators hold no values, so their
    outputs cannot be compared; the comparison says so instead of passing on the weights alone."""
    tensors = {**FIRST, "save": "tensors"}
    eager, compiled = str(tmp_path / "eager"), str(tmp_path / "compiled")
    torch._dynamo.reset()
    K.train("eager", 2, record=tensors, path=eager)
    K.train("compile", 2, record=tensors, path=compiled, backend="tdbg")
    res = compare_runs(compiled, eager)
    prog, = res.programs
    assert prog.outputs_one_side > 40 and prog.outputs_compared <= 1         # the loss only
    assert any("mostly not compared" in w and 'save="statistics"' in w for w in res.warnings)


def test_two_compiled_runs_pair_by_name(fp32: dict[str, str]) -> None:
    """Two dumps of the same program keep the name pairing (no program pairing, nothing left out)."""
    res = compare_runs(fp32["miscompiled"], fp32["compiled"])
    assert res.programs == [] and res.first_divergence is not None
    assert res.first_divergence.node == MLP_1 and res.first_divergence.match == "exact"
