"""Differences over iterations the dump lacks (issue 37 item 4): an update ratio or an "unchanged" verdict
over k > 1 steps is computed from what the dump holds for that step (the value its forward pass read before
the update), or skipped with a reason, or labelled as k steps'; never shown as one step's."""
from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from clirun import run_cli
from watch_kit import Plant, full, make

from debugger import open_dump

CORPUS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "corpus_ms")


def test_a_mindspore_gap_takes_the_value_read_before_the_update() -> None:
    """iteration "0|2-3": iteration 2's update ratio is the step's own (the forward kernel read the weight
    before the update), computed apart from tdbg on the files; not the two steps' change from iteration 0."""
    root = os.path.join(CORPUS, "iterations_gap")
    r = run_cli("scan", root, "--watch", "weight_change_too_large:abs_mean_update_ratio_gt=0", "--json",
                "--no-cache", "--jobs", "1")
    got = {h["iteration"]: h["actual"]["abs_mean_update_ratio_gt"] for h in r.json["hits"] if h["node"] == "fc1.weight"}
    rank = open_dump(root).rank(0)
    gid = rank.graph_ids[0]
    after = {it: np.asarray(rank.tensor(gid, it, "fc1.weight").source.array(), np.float64) for it in (0, 2)}
    reader = next(n for (n, io, _), ref in rank.tensor_map(gid, 2).items()
                  if io == "input" and "fc1-Dense/MatMul" in n)
    read = next(np.asarray(ref.source.array(), np.float64) for (n, io, s), ref in rank.tensor_map(gid, 2).items()
                if n == reader and io == "input" and ref.source.header().shape == after[2].shape)
    one_step = np.abs(after[2] - read).mean() / (np.abs(read).mean() + 1e-9)
    two_steps = np.abs(after[2] - after[0]).mean() / (np.abs(after[0]).mean() + 1e-9)
    assert got[2] == pytest.approx(one_step, rel=1e-6) and abs(two_steps - one_step) > 0.2 * one_step


@pytest.fixture(scope="module")
def gapped(tmp_path_factory: Any) -> str:
    """MindSpore's layout, iterations 0 and 2 dumped of 3 run (the run history lists the dumped ones only, as
    MindSpore's does), outputs only at iteration 2: no value read before its update; fc2 frozen (lr 0)."""
    import dumpmaker

    root = dumpmaker.make_dump(str(tmp_path_factory.mktemp("gap") / "d"), iterations=3, run_history=[0, 2],
                               dumped_iterations=[0, 2])
    _outputs_only(root, 2)
    return root


def _outputs_only(root: str, iteration: int) -> None:
    """Remove the input files of one iteration (as ``input_output 2`` dumps it)."""
    for d, _, files in os.walk(os.path.join(root, "rank_0")):
        if os.path.basename(d) == str(iteration):
            for f in files:
                if ".input." in f:
                    os.remove(os.path.join(d, f))


def test_an_update_ratio_over_a_gap_is_skipped_with_its_reason(gapped: str) -> None:
    r = run_cli("scan", gapped, "--watch", "weight_change_too_large:abs_mean_update_ratio_gt=0", "--json",
                "--no-cache", "--jobs", "1")
    assert 2 not in {h["iteration"] for h in r.json["hits"]}       # its previous dumped value is 2 steps back
    [skip] = [s for s in r.json["skipped"] if "2 iterations earlier" in s["reason"]]
    assert skip["gap"] and skip["example"]["iteration"] == 2
    [cov] = r.json["coverage"]["watchpoints"]
    assert cov["status"] == "partial" and 2 not in cov["iterations"]


def test_unchanged_over_a_gap_says_over_how_many_iterations(tmp_path: Any, layout: Any) -> None:
    """A weight that never moves (planted), iterations 0 and 2 dumped, outputs only at 2: unchanged at 2 is
    said to be over the 2 iterations the comparison spans."""
    lay = layout()
    plant = Plant().weight(lay, "fc1.weight", before=full(1.0), seq=[full(1.0)] * 3)
    root = make(tmp_path, plant=plant, run_history=[0, 2], dumped_iterations=[0, 2])
    _outputs_only(root, 2)
    r = run_cli("scan", root, "--watch", "weight_not_changed:rtol=0,atol=0", "--json", "--no-cache", "--jobs", "1")
    notes = {h["iteration"]: h["note"] for h in r.json["hits"] if h["node"] == "fc1.weight"}
    assert notes == {0: "", 2: "unchanged over 2 iterations (the dump holds none between)"}
