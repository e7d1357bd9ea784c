"""Issue 38 item 2: runs never mix. A path that holds a run is refused unless the new run resumes it
(``Recorder(resume=True)``, after a checkpoint restart): then its iterations, graphs and series steps follow
the earlier run's, the rank lists both runs with the iteration where each began, and info tells them apart."""
from __future__ import annotations

import json
import os

import pytest
import torch

import debugger
from clirun import run_cli, scan_quiet
from debugger.torch import Recorder
from resumerun import record_restarted


def test_a_run_restarted_from_a_checkpoint_resumes_into_its_dump(tmp_path):
    dump = str(tmp_path / "run")
    recorded, plain = record_restarted(dump, str(tmp_path))
    assert recorded == plain and len(recorded) == 10      # the recorder changed no loss, before or after
    rank = debugger.open_dump(dump).rank(0)
    assert rank.iterations() == list(range(10))           # the restart's steps follow, none replaced
    runs = rank.info.runs
    assert [r["first_iteration"] for r in runs] == [0, 6] and runs[1]["resumed"] and not runs[0].get("resumed")
    assert runs[0]["levels"] == {"parameters": "all"} and runs[1]["levels"] == {"ops": "all"}
    levels = {rank.graph(g).level for g in rank.graph_ids}
    assert levels == {"parameters", "ops"}                 # each run's graphs its own (new ids after the restart)
    assert list(rank.series.steps()) == list(range(10))   # one series, contiguous across the restart
    deep = rank.series.captures()["deep"]
    assert [d[:3] for d in deep] == [[0, 5, "parameters"], [6, 9, "ops"]]     # both runs' deep steps
    info = run_cli("info", dump)
    assert "holds 2 runs" in info.out and "run 1: iterations 0-5; run 2: iterations 6-9 (resumed" in info.out
    assert [r["first_iteration"] for r in run_cli("info", dump, "--json").json["ranks"][0]["runs"]] == [0, 6]
    scan_quiet(dump, "--no-cache")


def test_a_reused_path_is_refused_and_another_save_mode_cannot_resume(tmp_path):
    """Without resume=True the second run is refused, naming the folder and the way to resume; resuming in
    another save mode is refused too (its files would not read as one rank), before any hook is installed."""
    dump = str(tmp_path / "run")
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with Recorder(dump, model, opt, save="statistics", level="parameters") as rec:
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
        rec.step()
    with pytest.raises(FileExistsError) as err:
        Recorder(dump, model, opt, save="statistics").start()
    assert os.path.join(dump, "rank_0") in str(err.value) and "resume=True" in str(err.value)
    backward = torch.autograd.backward
    with pytest.raises(ValueError) as err:
        Recorder(dump, model, opt, save="tensors", resume=True).start()
    assert "save='statistics'" in str(err.value) and torch.autograd.backward is backward
    assert not opt._optimizer_step_pre_hooks
    with open(os.path.join(dump, "rank_0", "rank.json")) as f:
        assert "runs" not in json.load(f)["metadata"]         # the refused runs left the dump as it was


def test_resume_on_a_new_folder_is_a_first_run(tmp_path):
    dump = str(tmp_path / "new")
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with Recorder(dump, model, opt, save="statistics", level="parameters", resume=True) as rec:
        for _ in range(2):
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
            rec.step()
    rank = debugger.open_dump(dump).rank(0)
    assert rank.iterations() == [0, 1] and rank.info.runs == []
