"""msprobe dumps through the seam: layouts, levels, hints, code <-> graph, broken inputs (committed samples)."""
from __future__ import annotations

import json
import os
import pickle
import shutil
import zipfile

import pytest

from debugger.errors import NotADumpError
from debugger.model import open_dump

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                    "dumps_sample", "msprobe")


def sample(name: str) -> str:
    """A committed sample (made by dumps_sample/make_msprobe_sample.py)."""
    return os.path.join(ROOT, name)


def copy(name: str, tmp_path) -> str:  # type: ignore[no-untyped-def]
    """A private copy of a sample, to break."""
    dst = str(tmp_path / name)
    shutil.copytree(sample(name), dst)
    return dst


@pytest.mark.parametrize("name, saved, level, steps, weights, loss", [
    ("tensor_mix", "values+statistics", "mix", [0, 1], 6, True),
    ("statistics_mix", "statistics", "mix", [0, 1, 2], 6, True),
    ("statistics_L0", "statistics", "L0", [0, 1], 6, False),     # modules only: the loss is a function
    ("statistics_L1", "statistics", "L1", [0, 1], 0, True),      # APIs only: no module holds parameters
])
def test_each_task_and_level(name: str, saved: str, level: str, steps: list[int], weights: int, loss: bool) -> None:
    d = open_dump(sample(name))
    assert d.format == "msprobe" and d.rank_ids == [0]
    r = d.rank(0)
    assert r.info.framework == "PyTorch" and r.info.saved == saved and r.info.raw["level"] == level
    assert "call sequence" in r.info.raw["dataflow"] or "no data-flow edges" in r.info.raw["dataflow"]
    assert r.iterations() == steps
    kinds = r.kind_counts()
    assert kinds.get("weight", 0) == weights and kinds.get("gradient", 0) == weights
    assert (kinds.get("loss", 0) == 1) is loss
    refs = r.tensors(iteration=steps[-1])
    assert refs and all(t.matched for t in refs)
    assert all(t.has_values for t in refs) is (saved != "statistics")
    assert not d.all_warnings() or name == "nan_statistics"


def test_hints_of_a_mix_dump() -> None:
    g = open_dump(sample("statistics_mix")).rank(0).graph(0)
    w = g.node("block.0.weight")
    assert w.kind == "weight" and g.node("block.0.weight").is_parameter and w.scope == "block-Sequential/block.0-Linear"
    # the parameter's readers: the op inside its module (stats equal), and the module itself
    lin = g.node("Functional.linear.1.forward")
    assert [s for s, _ in lin.inputs] == ["(unrecorded)", "block.0.weight", "block.0.bias"]
    assert lin.scope == "block-Sequential/block.0-Linear"
    assert "block.0.weight" in [s for s, _ in g.node("Module.block.0.Linear.forward.0").inputs]
    # the gradient belongs to its parameter; the optimizer's in-place update takes weight and gradient
    grad = g.node("Module.block.0.Linear.parameters_grad.0.weight")
    assert grad.kind == "gradient" and grad.param == "block.0.weight" and grad.is_backward
    upd = [n for n in g.nodes() if n.param == "block.0.weight" and n.input_roles]
    assert len(upd) == 1 and upd[0].op_type == "Tensor.add_" and upd[0].input_roles == ("weight", "gradient")
    assert [s for s, _ in upd[0].inputs] == ["block.0.weight", "Module.block.0.Linear.parameters_grad.0.weight"]
    assert upd[0].scope == "optimizer"
    # the loss: the forward op whose backward starts the backward pass with a scalar
    assert [n.name for n in g.nodes("loss")] == ["Functional.cross_entropy.0.forward"]
    assert g.node("Torch.tanh.0.forward").kind == "activation"
    # call order: the module's entry follows its ops; backward after forward; updates last
    order = g.execution_order
    assert order.index("Functional.linear.1.forward") < order.index("Module.block.0.Linear.forward.0")
    assert order.index("Functional.cross_entropy.0.forward") < order.index("Functional.cross_entropy.0.backward")
    assert order[-1].startswith("Tensor.add_")


def test_code_and_graph_both_ways() -> None:
    d = open_dump(sample("tensor_mix"))
    hits = d.nodes_at("make_msprobe_sample.py", 49)      # h = self.block(h)
    by_dir = {(h["node"], h["direction"]) for h in hits}
    assert ("Functional.linear.1.forward", "forward") in by_dir
    assert ("Functional.linear.1.backward", "backward") in by_dir   # through its forward op's stack
    g = d.rank(0).graph(0)
    user = [f for f in g.node("Functional.linear.1.backward").stack if not f.is_framework]
    # the samples record the path the script ran from: compare its tail, not this checkout's path
    assert user[0].file.endswith("/dumps_sample/make_msprobe_sample.py") and user[0].line == 49


def test_ranks_and_folders() -> None:
    dp = sample("ddp_2rank_tensor")
    d = open_dump(dp)
    assert d.rank_ids == [0, 1]
    assert "module.fc1.weight" in d.rank(0).graph(0)          # DDP's wrapper attribute is part of the path
    one = open_dump(os.path.join(dp, "step1", "rank1"))        # a rank folder: that rank, every step
    assert one.root == dp and one.rank_ids == [1] and one.rank(1).iterations() == [0, 1]
    assert open_dump(os.path.join(dp, "step0")).rank_ids == [0, 1]
    single = open_dump(sample("tensor_mix"))                   # proc{PID}: one process, rank 0
    assert single.rank(0).path.endswith("proc0")
    with pytest.raises(NotADumpError):
        open_dump(os.path.join(dp, "step0", "rank0", "dump_tensor_data"))


def test_a_truncated_dump_json_skips_its_step_naming_it(tmp_path) -> None:
    root = copy("tensor_mix", tmp_path)
    path = os.path.join(root, "step1", "proc0", "dump.json")
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 3])
    d = open_dump(root)
    assert d.rank(0).iterations() == [0]
    w = d.all_warnings()
    assert any(path in x and "not valid JSON" in x and "step 1 skipped" in x for x in w), w
    # 89, and the 6 values step 0's module forwards list under "parameters" (the modules' inputs)
    assert len(d.rank(0).tensors(iteration=0)) == 95


def test_every_step_broken_leaves_no_graph(tmp_path) -> None:
    root = copy("statistics_L0", tmp_path)
    for s in ("step0", "step1"):
        with open(os.path.join(root, s, "proc0", "dump.json"), "w") as f:
            f.write('{"task": "statistics", "data": [')
    d = open_dump(root)
    assert d.rank(0).graph_ids == [] and d.rank(0).iterations() == []
    assert len([w for w in d.all_warnings() if "not valid JSON" in w]) == 2


def test_a_missing_pt_falls_back_to_its_statistics(tmp_path) -> None:
    root = copy("tensor_mix", tmp_path)
    os.unlink(os.path.join(root, "step0", "proc0", "dump_tensor_data", "Torch.tanh.0.forward.output.0.pt"))
    r = open_dump(root).rank(0)
    t = r.tensor(0, 0, "Torch.tanh.0.forward", "output", 0)
    assert not t.has_values and t.source.stored_stats()["max"] < 1
    assert any("1 tensor file(s) named in dump.json are missing" in w for w in r.warnings)


def test_a_pt_that_is_no_tensor_or_hostile_is_an_error_naming_it(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    root = copy("tensor_mix", tmp_path)
    ddir = os.path.join(root, "step0", "proc0", "dump_tensor_data")

    class Evil:
        def __reduce__(self):  # type: ignore[no-untyped-def]
            return (os.system, ("touch PWNED",))

    for name, obj in (("Torch.tanh.0.forward.output.0.pt", Evil()), ("Functional.relu.0.forward.output.0.pt", {"a": 1})):
        with zipfile.ZipFile(os.path.join(ddir, name), "w") as z:
            z.writestr("x/data.pkl", pickle.dumps(obj, protocol=2))
    from clirun import run_cli

    res = run_cli("scan", root, "--watch", "tensor_overflow", "--no-cache", "--json", "--iterations", "0")
    errs = {e["node"]: e["error"] for e in res.json["errors"]}
    assert "refused (nothing in it was run)" in errs["Torch.tanh.0.forward"]
    assert "Torch.tanh.0.forward.output.0.pt" in errs["Torch.tanh.0.forward"]
    assert "holds a dict, not a tensor" in errs["Functional.relu.0.forward"]
    assert not os.path.exists(tmp_path / "PWNED")


def test_dump_json_is_never_written(tmp_path) -> None:
    root = copy("statistics_mix", tmp_path)
    before = {os.path.join(d, n): os.stat(os.path.join(d, n)).st_mtime_ns for d, _, ns in os.walk(root) for n in ns}
    d = open_dump(root)
    d.all_warnings()
    after = {os.path.join(d_, n): os.stat(os.path.join(d_, n)).st_mtime_ns for d_, _, ns in os.walk(root) for n in ns}
    assert before == after
    with open(os.path.join(root, "step0", "proc0", "dump.json")) as f:
        assert json.load(f)["task"] == "statistics"


def test_a_mindspore_pynative_msprobe_dump() -> None:
    """msprobe's MindSpore dumps: Cell.* modules, Primitive.* ops, .npy tensors (dumps_sample/make_msprobe_mindspore_sample.py)."""
    d = open_dump(sample("mindspore_pynative_tensor"))
    r = d.rank(0)
    assert r.info.framework == "MindSpore" and r.info.saved == "values+statistics"
    g = r.graph(0)
    assert g.node("fc1.weight").kind == "weight" and g.node("Cell.fc1.Dense.parameters_grad.0.weight").param == "fc1.weight"
    mm = g.node("Primitive.matmul.MatMul.0.forward")
    assert mm.scope == "fc1-Dense" and [s for s, _ in mm.inputs] == ["(unrecorded)", "fc1.weight"]
    t = r.tensor(0, 1, "Primitive.matmul.MatMul.0.forward", "output", 0)
    a = t.value()
    st = t.source.recorded_stats()
    assert t.source.stored_stats() is None     # with values, tdbg computes every statistic itself
    assert t.location.endswith(".npy") and a.shape == (8, 32)
    assert abs(st["max"] - float(a.max())) < 1e-6 and abs(st["l2norm"] - float((a.astype("f8") ** 2).sum() ** 0.5)) < 1e-4
    s = open_dump(sample("mindspore_pynative_statistics")).rank(0)
    assert s.info.saved == "statistics" and s.kind_counts() == r.kind_counts()
    same = s.tensor(0, 1, "Primitive.matmul.MatMul.0.forward", "output", 0).source.stored_stats()
    assert same == st


def test_broken_construct_and_stack_files_are_named_and_read_around(tmp_path) -> None:
    root = copy("statistics_L0", tmp_path)
    c0 = os.path.join(root, "step0", "proc0", "construct.json")
    s0 = os.path.join(root, "step0", "proc0", "stack.json")
    with open(c0, "w") as f:
        f.write('{"Module.fc1.Linear.forward.0": nu')
    with open(s0, "w") as f:
        f.write("[" * 100000)
    d = open_dump(root)
    w = d.all_warnings()
    assert any(c0 in x and "not valid JSON" in x and "read without it" in x for x in w), w
    assert any(s0 in x and "nested too deeply" in x for x in w), w
    assert d.rank(0).iterations() == [0, 1] and d.rank(0).kind_counts()["weight"] == 6


def test_steps_that_called_different_ops_are_not_called_incomplete() -> None:
    """A step records what ran in it: the NaN sample's later steps call other ops, by design."""
    d = open_dump(sample("nan_statistics"))
    index = d.ranks[0].index   # building the index is what checks completeness
    counts = {len(refs) for refs in index.values()}
    assert len(counts) > 1, "the sample's steps differ in what they recorded"
    assert not [w for w in d.all_warnings() if "incomplete" in w]


@pytest.mark.parametrize("name, calls", [("statistics_L0", "module calls"), ("statistics_L1", "API calls"),
                                         ("tensor_mix", "module and API calls")])
def test_info_says_what_an_msprobe_dump_records_and_what_it_does_not(name: str, calls: str) -> None:
    """`tdbg info` prints what the dump knows (no "?" for what msprobe never records) and a line saying
    what it records and what not; --json carries the same sentence."""
    from clirun import run_cli
    r = run_cli("info", sample(name))
    head, records = r.out.splitlines()[1:3]
    assert r.code == 0 and "?" not in head and head.strip().startswith("msprobe: PyTorch, saved ")
    assert records.strip().startswith("records: msprobe level") and calls in records
    assert "not recorded: the framework version, the device and the network's name" in records
    assert "no data-flow edges" in records
    j = run_cli("info", sample(name), "--json").json
    assert j["ranks"][0]["records"] == records.strip().removeprefix("records: ")
    mindspore = run_cli("info", os.path.join(os.path.dirname(ROOT), "single"), "--json").json
    assert mindspore["ranks"][0]["records"] is None
