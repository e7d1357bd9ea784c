"""Reader facts over the msprobe corpus: real dumps of a tiny MLP at levels L0, L1 and mix, tasks statistics
and tensor, healthy and with a planted NaN, made by tests/data/corpus_msprobe/make_corpus_msprobe.py with
mindstudio-probe 26.2.0.

Truth comes from outside tdbg: each dump's ``*.truth.json`` (what the training loop saw with plain torch:
losses, parameters and their shapes, each weight's statistics as read and after each step's update, each
gradient's, which steps held a non-finite value) and msprobe's own dump.json and tensor files, walked here
without the reader. Scan verdicts are not asserted here (only that a watchpoint sees every weight).
"""
from __future__ import annotations

import json
import math
import os
from collections import Counter
from typing import Any, Iterator

import pytest
from clirun import run_cli

from debugger.formats.records import Kind
from debugger.model import open_dump
from debugger.model.locate import readers
from debugger.model.rank import Rank

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(HERE, "data", "corpus_msprobe")
SAMPLES = os.path.join(os.path.dirname(HERE), "dumps_sample", "msprobe")
CORPUS = ["L0_statistics", "L0_tensor", "L1_statistics", "L1_tensor", "mix_statistics", "mix_tensor",
          "mix_data_nan", "L1_op_nan"]
MODULE_LEVEL = [n for n in CORPUS if not n.startswith("L1")]   # L0 and mix: modules list their parameters
STATS = ("Max", "Min", "Mean", "Norm")


def dump(name: str) -> str:
    """A committed corpus dump."""
    return os.path.join(DATA, name)


def truth(name: str) -> dict:
    """What the training loop saw while the dump was made."""
    with open(os.path.join(DATA, f"{name}.truth.json")) as f:
        return json.load(f)


def rank0(name: str) -> Rank:
    """The one rank of a corpus dump."""
    return open_dump(dump(name)).rank(0)


def _num(v: Any) -> float:
    """A truth or msprobe statistic as a float (NaN and Inf are strings in the truth files)."""
    return float(v)


def _same_stats(got: dict, want: dict, what: str) -> None:
    """msprobe's statistics of a tensor equal plain torch's (float32 sums: to 1e-5 relative)."""
    for k in STATS:
        g, w = _num(got[k]), _num(want[k])
        if math.isnan(w):
            assert math.isnan(g), (what, k, g, w)
        else:
            assert g == pytest.approx(w, rel=1e-5, abs=1e-6), (what, k, g, w)


def _tensor_items(v: Any) -> Iterator[dict]:
    """Every tensor item of a dump.json entry, however nested (msprobe's own layout, walked without the reader)."""
    if isinstance(v, dict):
        if "dtype" in v and "shape" in v:
            yield v
            return
        for x in v.values():
            yield from _tensor_items(x)
    elif isinstance(v, list):
        for x in v:
            yield from _tensor_items(x)


def _step_folder(root: str, step: int) -> str:
    """The one process folder of a step."""
    sdir = os.path.join(root, f"step{step}")
    (proc,) = os.listdir(sdir)
    return os.path.join(sdir, proc)


def _entries(folder: str) -> tuple[Counter, set[str]]:
    """(shape, statistics) of every tensor item of a step's dump.json, and its tensor files."""
    with open(os.path.join(folder, "dump.json")) as f:
        data = json.load(f)["data"]
    items = Counter((tuple(it["shape"]), tuple((k, it[k]) for k in (*STATS, "md5") if k in it))
                    for entry in data.values() for it in _tensor_items(entry))
    ddir = os.path.join(folder, "dump_tensor_data")
    files = set(os.listdir(ddir)) if os.path.isdir(ddir) else set()
    return items, files


@pytest.mark.parametrize("name", CORPUS)
def test_the_corpus_is_three_steps_of_the_planted_kind(name: str) -> None:
    t = truth(name)
    assert rank0(name).iterations() == list(range(t["steps"]))
    assert t["nonfinite_steps"] == {"data_nan": [1, 2], "op_nan": [2], "": []}[t["planted"]]
    assert [math.isfinite(_num(x)) for x in t["losses"]] == [i not in t["nonfinite_steps"] for i in range(3)]


@pytest.mark.parametrize("root", [dump(n) for n in CORPUS] + [os.path.join(SAMPLES, n) for n in (
    "statistics_L0", "statistics_L1", "statistics_mix", "tensor_mix", "md5_baseline", "ddp_2rank_tensor",
    "mindspore_pynative_statistics", "mindspore_pynative_tensor")], ids=os.path.basename)
def test_every_dumped_entry_and_file_is_a_tensor(root: str) -> None:
    """Each tensor item of dump.json (a module's "parameters" too) is a tensor of its step, and each file of
    dump_tensor_data is read: counted per step, as msprobe wrote them."""
    d = open_dump(root)
    checked = 0
    for r in d.rank_ids:
        rank = d.rank(r)
        for step in rank.iterations():
            folder = rank.reader.steps[step]
            items, files = _entries(folder)
            refs = [t for t in rank.tensors(iteration=step) if t.source.location.startswith(folder + os.sep)]
            read = Counter((t.source.shape, tuple(t.source.raw)) for t in refs)
            assert not items - read, (step, list((items - read).items())[:3], sum((items - read).values()))
            paths = {os.path.basename(t.source.path) for t in refs if t.source.path}
            assert files <= paths, (step, sorted(files - paths)[:5], len(files - paths))
            checked += sum(items.values())
    assert checked


@pytest.mark.parametrize("name", MODULE_LEVEL)
def test_weights_are_the_models_parameters_after_each_update(name: str) -> None:
    """Every parameter is a weight; its tensor in step i is its value after step i's update (the optimizer's
    record at mix, the value read in step i+1 at L0, where no update is recorded: every step but the last)."""
    t = truth(name)
    rank = rank0(name)
    assert dict(rank.parameters()) == {p: "weight" for p in t["params"]}
    g = rank.graph(0)
    steps = list(range(t["steps"])) if t["level"] == "mix" else list(range(t["steps"] - 1))
    for p, shape in t["params"].items():
        assert g.record_of(p).kind == Kind.WEIGHT and list(g.record_of(p).outputs[0].shape) == shape
        assert rank.node_iterations(0, p) == steps, p
        for i in steps:
            _same_stats(dict(rank.tensor(0, i, p).source.raw), t["weights_after"][i][p], (p, i))


@pytest.mark.parametrize("name", MODULE_LEVEL)
def test_the_value_each_step_read_is_its_readers_input(name: str) -> None:
    """The value a module forward lists under "parameters" (before the update) is an input of the weight's
    readers in every step, the last one too."""
    t = truth(name)
    rank = rank0(name)
    g = rank.graph(0)
    for p in t["params"]:
        assert readers(g).get(p), p
        for i in range(t["steps"]):
            tmap = rank.tensor_map(0, i)
            got = [tmap[(k, "input", s)] for k, s in readers(g)[p] if (k, "input", s) in tmap]
            assert got, (p, i)
            for ref in got:
                _same_stats(dict(ref.source.raw), t["weights_read"][i][p], (p, i, ref.node))


@pytest.mark.parametrize("name", MODULE_LEVEL)
def test_parameter_gradients_at_every_step(name: str) -> None:
    t = truth(name)
    rank = rank0(name)
    grads = {n.param: n.name for n in rank.graph(0).nodes() if n.kind == Kind.GRADIENT}
    assert set(grads) == set(t["params"])
    for p, node in grads.items():
        assert rank.node_iterations(0, node) == list(range(t["steps"]))
        for i in range(t["steps"]):
            _same_stats(dict(rank.tensor(0, i, node).source.raw), t["grads"][i][p], (p, i))


@pytest.mark.parametrize("name", [n for n in CORPUS if not n.startswith("L0")])
def test_the_loss_and_the_input_batch_as_the_api_level_holds_them(name: str) -> None:
    """L1 and mix record the loss function's call (L0 records modules only, and the loss is no module)."""
    t = truth(name)
    rank = rank0(name)
    g = rank.graph(0)
    (loss,) = [n.name for n in g.nodes() if n.kind == Kind.LOSS]
    first = g.execution_order[0]
    for i in range(t["steps"]):
        got = dict(rank.tensor(0, i, loss).source.raw)["Max"]
        want = _num(t["losses"][i])
        assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want, rel=1e-6), (i, got, want)
        x = rank.tensor(0, i, first, "input", 0)
        assert x.source.shape == (4, 8)
        assert math.isfinite(dict(x.source.raw)["Max"]) == t["input_finite"][i], i


def test_the_planted_op_nan_is_recorded_with_finite_inputs() -> None:
    t = truth("L1_op_nan")
    origin = t["nan_origin"]
    rank = rank0("L1_op_nan")
    (step,) = origin["steps"]
    assert rank.node_iterations(0, origin["msprobe_key"]) == [step]
    tmap = rank.tensor_map(0, step)
    out = tmap[(origin["msprobe_key"], "output", 0)].source.recorded_stats()
    ins = [v.source.recorded_stats() for k, v in tmap.items() if k[0] == origin["msprobe_key"] and k[1] == "input"]
    assert out["nan"] >= 1 and ins and all(s["nan"] == 0 for s in ins)


@pytest.mark.parametrize("root", [os.path.join(SAMPLES, "statistics_L0"), dump("L0_statistics"),
                                  os.path.join(SAMPLES, "mindspore_pynative_statistics")], ids=os.path.basename)
def test_a_weight_watchpoint_sees_every_weight_of_an_l0_dump(root: str) -> None:
    """``weight_too_large:max_gt=-100`` holds for any finite weight: it must fire on every one (it gave 0 hits
    with no note when L0 weights had no tensor)."""
    res = run_cli("scan", root, "--watch", "weight_too_large:max_gt=-100", "--json", "--no-cache")
    weights = {p for p, kind in open_dump(root).rank(0).parameters() if kind == "weight"}
    assert weights and res.code == 1
    assert {h["node"] for h in res.json["hits"]} == weights
