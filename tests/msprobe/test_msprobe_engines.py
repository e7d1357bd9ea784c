"""Scans, comparisons and conversion on msprobe dumps, through the CLI (committed samples)."""
from __future__ import annotations

import os

from clirun import run_cli

from debugger.cli.exits import Exit

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                    "dumps_sample", "msprobe")


def sample(name: str) -> str:
    """A committed sample (made by dumps_sample/make_msprobe_sample.py)."""
    return os.path.join(ROOT, name)


def _hits(res) -> list[tuple]:  # type: ignore[no-untyped-def]
    return sorted((h["iteration"], h["node"], h["io"], h["slot"], tuple(sorted(h["actual"].items())))
                  for h in res.json["hits"])


def test_the_perturbed_weight_and_its_first_reader_are_the_first_divergence() -> None:
    res = run_cli("compare", sample("pair_perturbed"), sample("pair_baseline"), "--json", "--no-cache")
    assert res.code == 1
    fd = res.json["first_divergence"]
    assert (fd["iteration"], fd["node"], fd["io"], fd["slot"]) == (0, "Functional.linear.1.forward", "input", 1)
    assert fd["kind"] == "weight" and fd["param"] == "block.0.weight" and fd["grade"] == "error"
    assert fd["source"].endswith("make_msprobe_sample.py:49")
    assert 0.97 < fd["metrics"]["cosine"] < 0.99     # what msprobe's own compare grades "pass"
    # nothing before it in step 0 diverges: fc1 and its inputs agree exactly
    early = [p for p in res.json["pairs"] if p["iteration"] == 0 and p["node"].startswith("Functional.linear.0.")]
    assert not [p for p in early if p["grade"] == "error" and ".forward" in p["node"]]


def test_identical_runs_do_not_diverge() -> None:
    res = run_cli("compare", sample("pair_baseline"), sample("tensor_mix"), "--json", "--no-cache")
    assert res.code == 0 and res.json["first_divergence"] is None
    assert res.json["summary"]["identical"] == res.json["summary"]["pairs"]


def test_ranks_of_a_ddp_dump_agree_on_what_must_agree() -> None:
    res = run_cli("compare", sample("ddp_2rank_tensor"), "--json", "--no-cache", "--all")
    assert res.code == 0
    nodes = {p["node"] for p in res.json["pairs"]}
    # 36, and the 12 values the module forwards list under "parameters" (6 a step): the weights each rank read
    assert res.json["summary"]["counted"] == 48 and "module.fc1.weight" in nodes
    every = run_cli("compare", sample("ddp_2rank_tensor"), "--json", "--no-cache", "--all-tensors", "--all")
    local = [p for p in every.json["pairs"] if p["node"] == "Module.module.fc1.Linear.parameters_grad.0.weight"]
    assert local and not any(p["counted"] for p in local)    # local gradients differ per rank by design


def test_a_nan_origin_is_found_from_statistics_alone() -> None:
    res = run_cli("scan", sample("nan_statistics"), "--watch", "overflow", "--json", "--no-cache")
    first = res.json["hits"][0]
    assert (first["iteration"], first["node"], first["io"]) == (1, "Torch.log.0.forward", "output")
    assert first["source"].endswith("make_msprobe_sample.py:51")
    assert not [h for h in res.json["hits"] if h["iteration"] == 0]
    assert not [h for h in res.json["hits"] if h["kind"] in ("activation", "other") and h["node"] != first["node"]]
    assert not res.json["errors"]


def test_statistics_answer_what_they_can_exactly_as_values_would() -> None:
    """The same run dumped twice: statistics task (3 steps) and tensor task (2 steps, values)."""
    args = ("--watch", "tensor_too_large:max_gt=0.9,mean_gt=0.2", "--json", "--no-cache", "--iterations", "0-1")
    stats = run_cli("scan", sample("statistics_mix"), *args)
    values = run_cli("scan", sample("tensor_mix"), *args)
    assert stats.json["hits"] and not stats.json["errors"]
    assert [h[:4] for h in _hits(stats)] == [h[:4] for h in _hits(values)]
    for a, b in zip(_hits(stats), _hits(values)):
        for (na, va), (nb, vb) in zip(a[4], b[4]):
            assert na == nb and abs(va - vb) <= 1e-6 * max(1.0, abs(vb))


def test_what_statistics_cannot_answer_is_said() -> None:
    res = run_cli("scan", sample("statistics_mix"), "--watch", "weight_not_changed", "--watch", "tensor_all_zero",
                  "--json", "--no-cache")
    assert not res.json["errors"]      # the dump cannot answer: said once per rule, in the summary
    msgs = {s["reason"] for s in res.json["skipped"]}
    # every weight's value after the step differs from the one its forward read by more than the
    # tolerance, which msprobe's four statistics prove: weight_not_changed is answered, not skipped
    assert {s["watchpoint"] for s in res.json["skipped"]} == {"tensor_all_zero"} and not res.json["hits"]
    assert any("needs statistic zeros" in m for m in msgs)
    assert "count, l2norm, max, mean, min, nan, neg_inf, pos_inf" in next(iter(msgs))


def test_the_cli_commands_run_on_the_samples(tmp_path) -> None:
    info = run_cli("info", sample("statistics_mix"))
    assert info.code == Exit.OK and "msprobe: PyTorch" in info.out and "block.0.weight" in info.out
    node = run_cli("node", sample("tensor_mix"), "Tensor.add_.2.forward")
    assert node.code == Exit.OK and "block.0.weight" in node.out and "parameters_grad" in node.out
    code = run_cli("code", sample("tensor_mix"), "make_msprobe_sample.py:48")
    assert code.code == Exit.OK and "Functional.linear.0.forward" in code.out and "backward" in code.out
    scan = run_cli("scan", sample("tensor_mix"), "--preset", "recommended", "--no-cache")
    assert scan.code in (Exit.OK, 1) and "Scanned" in scan.out
    out = str(tmp_path / "h5")
    conv = run_cli("convert", sample("tensor_mix"), out)
    assert conv.code == Exit.OK
    back = run_cli("compare", out, sample("tensor_mix"), "--json", "--no-cache")
    # 178, and the 12 values the module forwards list under "parameters" (6 a step, read since they are inputs)
    assert back.code == 0 and back.json["summary"]["pairs"] == 190
    assert run_cli("info", out, "--json").json["ranks"][0]["nodes_by_kind"]["weight"] == 6


def test_statistics_only_runs_compare_by_msprobes_checksum() -> None:
    """summary_mode md5: equal checksums are identical, different ones graded by their statistics; the same
    first divergence."""
    res = run_cli("compare", sample("md5_perturbed"), sample("md5_baseline"), "--json", "--no-cache")
    fd = res.json["first_divergence"]
    assert (fd["iteration"], fd["node"], fd["io"], fd["slot"], fd["param"]) == \
        (0, "Functional.linear.1.forward", "input", 1, "block.0.weight")
    assert "statistics differ" in fd["reason"] and "from statistics" in fd["reason"]
    same = run_cli("compare", sample("md5_baseline"), sample("md5_baseline"), "--json", "--no-cache")
    # 178 and the modules' 12 "parameters" entries
    assert same.code == 0 and same.json["summary"]["identical"] == same.json["summary"]["pairs"] == 190
    plain = run_cli("compare", sample("statistics_mix"), sample("statistics_mix"), "--json", "--no-cache",
                    "--iterations", "0", "--all")
    # no checksum: graded by the statistics both sides recorded (equal here), and said so
    assert plain.code == 0 and plain.json["first_divergence"] is None
    assert plain.json["pairs"] and all(p["grade"] == "pass" and p["reason"].startswith("statistics equal")
                                       for p in plain.json["pairs"])


def test_a_statistics_only_dump_converts_to_statistics_only_and_scans_the_same(tmp_path) -> None:
    """msprobe records four statistics; the conversion keeps exactly those (no digest: md5 is not tdbg's)."""
    out = str(tmp_path / "h5")
    conv = run_cli("convert", sample("statistics_mix"), out, "--json")
    assert conv.code == Exit.OK and conv.json["statistics_only"] is True
    assert conv.json["tensors"] == run_cli("info", sample("statistics_mix"), "--json").json["ranks"][0]["tensor_files"]
    scans = [run_cli("scan", d, "--preset", "recommended", "--json", "--no-cache", "--jobs", "1").json
             for d in (sample("statistics_mix"), out)]
    key = lambda h: (h["watchpoint"], h["iteration"], h["node"], h["io"], h["slot"])   # noqa: E731
    assert sorted(map(key, scans[0]["hits"])) == sorted(map(key, scans[1]["hits"]))
    assert sorted((e["watchpoint"], e["node"]) for e in scans[0]["errors"]) == \
        sorted((e["watchpoint"], e["node"]) for e in scans[1]["errors"])
    assert run_cli("info", out, "--json").json["ranks"][0]["saved"] == "statistics"
