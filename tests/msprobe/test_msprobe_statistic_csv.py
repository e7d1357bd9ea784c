"""MindSpore statistic.csv (saved_data statistic/full, GPU and Ascend only): written here in the real layout
from the committed MindSpore 2.10 dump, since CPU refuses to write it."""
from __future__ import annotations

import os

import pytest
from clirun import run_cli

from statistic_csv_kit import HEADERS, SIGMOID, SINGLE, _cell, make_statistic_dump
from debugger.model import open_dump
from debugger.stats.core import tensor_stats


@pytest.mark.parametrize("header", sorted(HEADERS))
def test_statistics_only_dumps_of_each_header(tmp_path, header: str) -> None:
    root = make_statistic_dump(str(tmp_path / "d"), header, keep_npy=False)
    d = open_dump(root)
    r = d.rank(0)
    assert r.info.saved == "statistics" and r.iterations(0) == [0, 1, 2]
    ref = open_dump(SINGLE).rank(0)
    refs, want = r.tensors(0, 1), ref.tensors(0, 1)
    assert len(refs) == len(want) and all(t.matched and not t.has_values for t in refs)
    t = r.tensor(0, 1, SIGMOID, "output", 0)
    s = tensor_stats(ref.tensor(0, 1, SIGMOID, "output", 0).value())
    got = t.source.stored_stats()
    assert got["max"] == pytest.approx(s.max) and got["min"] == pytest.approx(s.min) and got["count"] == s.count
    if header != "2.3-default":
        assert got["positives"] == s.positives and got["zeros"] == s.zeros and got["nan"] == 0
    assert t.header.shape == ref.tensor(0, 1, SIGMOID, "output", 0).shape
    assert not [w for w in d.all_warnings() if "statistic.csv" in w]


def test_statistics_answer_a_threshold_watch_as_the_values_would(tmp_path) -> None:
    root = make_statistic_dump(str(tmp_path / "d"), "2.2", keep_npy=False, iterations=(0, 1))
    args = ("--watch", "tensor_too_large:max_gt=5", "--json", "--no-cache", "--iterations", "0-1")
    got, want = run_cli("scan", root, *args), run_cli("scan", SINGLE, *args)
    key = lambda r: sorted((h["iteration"], h["node"], h["io"], h["slot"]) for h in r.json["hits"])  # noqa: E731
    assert key(got) and key(got) == key(want) and not got.json["errors"]
    # 2.3's default columns (max, min, l2norm) hold no NaN/Inf counts: a max over finite values is unknown
    bare = make_statistic_dump(str(tmp_path / "bare"), "2.3-default", keep_npy=False, iterations=(0,))
    res = run_cli("scan", bare, *args)
    assert not res.json["hits"] and not res.json["errors"] and {s["reason"] for s in res.json["skipped"]} == {
        "needs statistics nan, pos_inf, neg_inf; this dump holds statistics only: count, l2norm, max, min"}


def test_a_nan_count_in_a_row_is_found_at_its_origin(tmp_path) -> None:
    root = make_statistic_dump(str(tmp_path / "d"), "2.2", keep_npy=False,
                               nan_at=(2, SIGMOID.replace("/", "_")))
    res = run_cli("scan", root, "--watch", "overflow", "--json", "--no-cache")
    hits = res.json["hits"]
    assert [(h["iteration"], h["node"]) for h in hits] == [(2, SIGMOID)]
    assert hits[0]["actual"]["nan"] == 3


def test_full_reads_the_values_and_a_row_stands_in_for_a_missing_npy(tmp_path) -> None:
    root = make_statistic_dump(str(tmp_path / "d"), "2.3-all", keep_npy=True, iterations=(0, 1))
    d1 = os.path.join(root, "rank_0", "Net", "0", "1")
    gone = next(n for n in os.listdir(d1) if n.startswith("Sigmoid.") and ".output.0." in n)
    os.unlink(os.path.join(d1, gone))
    r = open_dump(root).rank(0)
    assert r.info.saved == "values+statistics"
    t0, t1 = r.tensor(0, 0, SIGMOID, "output", 0), r.tensor(0, 1, SIGMOID, "output", 0)
    assert t0.has_values and t0.source.stored_stats() is None
    assert not t1.has_values and t1.location.endswith("statistic.csv:" + t1.location.rsplit(":", 1)[1])
    want = tensor_stats(open_dump(SINGLE).rank(0).tensor(0, 1, SIGMOID, "output", 0).value())
    assert t1.source.stored_stats()["max"] == pytest.approx(want.max) and t1.source.stored_stats()["zeros"] == want.zeros
    assert t1.source.digest().endswith(_cell("MD5", open_dump(SINGLE).rank(0).tensor(0, 1, SIGMOID, "output", 0).value()))
    res = run_cli("compare", root, SINGLE, "--json", "--no-cache", "--iterations", "0")
    assert res.code == 0


def test_a_broken_statistic_csv_is_named_and_skipped(tmp_path) -> None:
    root = make_statistic_dump(str(tmp_path / "d"), "2.2", keep_npy=False, iterations=(0, 1))
    p0 = os.path.join(root, "rank_0", "Net", "0", "0", "statistic.csv")
    with open(p0, "w") as fh:
        fh.write("Name,Value\nx,1\n")
    p1 = os.path.join(root, "rank_0", "Net", "0", "1", "statistic.csv")
    with open(p1, "a") as fh:
        fh.write("MatMul,oops,x,0,1,sideways,0,4,float32,(1)\n")
    d = open_dump(root)
    r = d.rank(0)
    assert r.tensors(0, 0) == []
    assert len(r.tensors(0, 1)) == len(open_dump(SINGLE).rank(0).tensors(0, 1))
    w = d.all_warnings()
    assert any(p0 in x and "not a MindSpore statistic.csv" in x for x in w), w
    assert any(p1 in x and "1 row(s) not understood" in x for x in w), w
