"""Bookkeeping (watch/bookkeeping.py) on a graph the PyTorch recorder did not write: a MindSpore
ResNet-18 trained by mindcv with Momentum and weight decay, whose optimizer reads each weight through a
``Load`` on the loss's way. The weight decay's ``Mul`` is made from a trained input: it stays checked."""
from __future__ import annotations

import os

from clirun import run_cli
from debugger.formats.records import Kind
from debugger.model import open_dump
from debugger.watch.bookkeeping import bookkeeping

DUMP = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "mindcv", "resnet_healthy")


def test_an_optimizer_reading_weights_through_loads_is_no_bookkeeping() -> None:
    rank = open_dump(DUMP).rank(0)
    for graph in rank.graphs.values():
        decay = [n for n in graph if graph.record_of(n).op_type == "Mul" and "optimizer" in n]
        assert decay, "the sample's optimizer has its weight-decay Mul operators"
        kept = bookkeeping(graph)
        assert not set(decay) & kept
        assert not any(graph.record_of(n).kind in (Kind.OPTIMIZER_STATE, Kind.CONSTANT, Kind.WEIGHT) for n in kept)


def test_the_healthy_mindspore_scan_leaves_nothing_out_as_bookkeeping() -> None:
    res = run_cli("scan", DUMP, "--no-cache", "--json")
    assert res.code == 0
    assert not [s for s in res.json["skipped"] if s["reason"].startswith("bookkeeping")]
