"""The folder-at-once name parser against the one-name parser: the same answer for every name."""
from __future__ import annotations

import os
from typing import Any

import pytest

from debugger.formats.mindspore.filenames import TensorFileName, parse_tensor_file_name, parse_tensor_file_names
from test_filenames import BAD, GOOD

HERE = os.path.dirname(os.path.abspath(__file__))
TAIL = "0.0.1796230236364755.output.0.DefaultFormat"

# Names at the edges of what the fast loop takes apart itself: each must come out as the one-name parser says.
TRICKY = [
    f"Conv2D.op.{TAIL}.npy", f"Conv2D.op.{TAIL}.Float32.npy", f"Conv2D.op.{TAIL}.float32.npy",
    f"Conv2D.op.{TAIL}.FLOAT32.npy",              # a spelling only the one-name parser lowers
    f"Conv2D.op.{TAIL}.fLoAt32.npy", f"Conv2D.op.{TAIL}.BFloat16.npy", f"Conv2D.op.{TAIL}.Bfloat16.npy",
    f"Conv2D.op.{TAIL}.UInt8.npy", f"Conv2D.op.{TAIL}.Uint8.npy", f"Conv2D.op.{TAIL}.Complex128.npy",
    f"Conv2D.op.{TAIL}.Tensor.npy", f"Conv2D.op.{TAIL}.Float99.npy", f"Conv2D.op.{TAIL}..npy",
    f"Conv2D.op.{TAIL}.Float32.NPY", f"Conv2D.op.{TAIL}.Float32.npy.npy",
    "Conv2D.op.0.0.12.input.0.NCHW.npy", "Conv2D.op.0.0.12.input.0.NCHW.Int8.npy",
    "Conv2D.op.0.0.12.input.0.NCHW_Z9.npy", "Conv2D.op.0.0.12.input.0._NCHW.npy", "Conv2D.op.0.0.12.input.0.N-CHW.npy",
    "Conv2D.op.0.0.12.input.0.9.npy", "Conv2D.op.0.0.12.input.0..npy",
    # numbers: ASCII digits, 1 to 18 of them
    "Conv2D.op.0.0.123456789012345678.output.0.ND.npy", "Conv2D.op.0.0.1234567890123456789.output.0.ND.npy",
    "Conv2D.op.0.0.123456789012345678.output.0.ND.Float32.npy",
    "Conv2D.op.0.0.1234567890123456789.output.0.ND.Float32.npy",
    "Conv2D.op.0.0.12.output.².ND.npy", "Conv2D.op.٣.0.12.output.0.ND.Float32.npy",
    "Conv2D.op.0.0.1٢.output.0.ND.npy",
    "Conv2D.op.0.0.12.output.-1.ND.npy", "Conv2D.op.0.0.12.output.+1.ND.npy", "Conv2D.op.0.0.1 2.output.0.ND.npy",
    "Conv2D.op..0.12.output.0.ND.npy", "Conv2D.op.0..12.output.0.ND.npy", "Conv2D.op.0.0..output.0.ND.npy",
    "Conv2D.op.0.0.12.output..ND.npy", "Conv2D.op.0.0.0012.output.007.ND.npy",
    # newlines: '$' in a pattern also matches before a final newline, which the one-name parser lets through
    "Conv2D.op.0.0.12.output.0\n.ND.npy", "Conv2D.op.0.0.12.output.0.ND\n.npy", "Conv2D.op\n.0.0.12.output.0.ND.npy",
    "Conv\n2D.op.0.0.12.output.0.ND.Float32.npy", "Conv2D.op.0.0.12\n.output.0.ND.Float32.npy",
    # io words and where they stand
    "Conv2D.op.0.0.12.Output.0.ND.npy", "Conv2D.op.0.0.12.inputs.0.ND.npy", "Conv2D.op.0.0.input.output.0.ND.npy",
    "Conv2D.op.0.0.12.output.0.ND.input.npy", "Conv2D.input.0.0.12.output.0.ND.npy",
    "Conv2D.op.0.0.12.output.output.0.ND.npy", "Conv2D.output.0.0.12.output.0.ND.Float32.npy",
    "Parameter.output.0.0.12.input.0.DefaultFormat.Float32.npy", "output.op.0.0.12.output.0.ND.npy",
    # op type and op name: the first field, the rest (dots and all), never empty
    "Conv2D..0.0.12.output.0.ND.npy", ".op.0.0.12.output.0.ND.npy", "..0.0.12.output.0.ND.npy",
    "Conv2D...0.0.12.output.0.ND.npy", "Conv2D.a..b.0.0.12.output.0.ND.Float32.npy",
    "Conv2D.a.b.c.d.e.f.g.h.0.0.1.output.0.ND.npy",
    "Conv2D..0.0.12.output.0.ND.Float32.npy", ".op.0.0.12.output.0.ND.Float32.npy",
    "Conv2D.0.0.12.output.0.ND.npy", "0.0.12.output.0.ND.npy", "Conv2D.op.0.12.output.0.ND.npy",
    "Conv2D.op.0.0.12.output.0.ND.Float32", "Conv2D.op.0.0.12.output.0.ND", ".npy", "npy", "", ".", "........npy",
    "Conv2D.op.0.0.12.output.0.ND.Float32.npy ", " Conv2D.op.0.0.12.output.0.ND.npy",
    "Ünï.cödé-op0.0.0.12.output.0.ND.npy",
    "Conv2D.\udcff.0.0.12.output.0.ND.npy", "Conv2D." + "x" * 300 + ".0.0.12.output.0.ND.Float32.npy",
]


def _agree(names: list[str]) -> list[TensorFileName | None]:
    many = parse_tensor_file_names(names)
    one = [parse_tensor_file_name(n) for n in names]
    assert len(many) == len(names)
    for name, a, b in zip(names, many, one):
        assert a == b, name
        assert type(a) is type(b), name    # a TensorFileName, not a bare tuple that happens to be equal
    return many


def test_many_names_parse_as_one_name_does_on_the_grammar_table() -> None:
    names = [g[0] for g in GOOD] + BAD
    got = _agree(names)
    assert all(p is not None for p in got[:len(GOOD)]) and all(p is None for p in got[len(GOOD):])


@pytest.mark.parametrize("name", TRICKY, ids=range(len(TRICKY)))
def test_many_names_parse_as_one_name_does_on_tricky_names(name: str) -> None:
    _agree([name])


def test_many_names_in_one_call_keep_their_order() -> None:
    got = _agree(TRICKY + [g[0] for g in GOOD] + TRICKY[::-1])
    assert got[:len(TRICKY)] == got[::-1][:len(TRICKY)]
    assert parse_tensor_file_names([]) == []


def test_the_edges_are_decided_as_documented() -> None:
    # a check that the table above reaches both sides of each rule, not only that both parsers agree
    p = {n: parse_tensor_file_name(n) for n in TRICKY}
    assert p[f"Conv2D.op.{TAIL}.FLOAT32.npy"].dtype == "float32"          # type: ignore[union-attr]
    assert p["Conv2D.op.0.0.123456789012345678.output.0.ND.npy"] is not None
    assert p["Conv2D.op.0.0.1234567890123456789.output.0.ND.npy"] is None
    assert p["Conv2D.op.0.0.12.output.².ND.npy"] is None and p["Conv2D.op.٣.0.12.output.0.ND.Float32.npy"] is None
    assert p["Conv2D.a..b.0.0.12.output.0.ND.Float32.npy"].op_name == "a..b"   # type: ignore[union-attr]
    assert p["Conv2D...0.0.12.output.0.ND.npy"].op_name == "."               # type: ignore[union-attr]
    assert p["Conv2D..0.0.12.output.0.ND.npy"] is None and p[f"Conv2D.op.{TAIL}.Tensor.npy"] is None
    assert p["Conv2D.op.0.0.12.output.0\n.ND.npy"] is None      # a number is digits only, no final newline


def _npy_names(top: str) -> list[str]:
    return sorted(f for _, _, fs in os.walk(top) for f in fs if f.endswith(".npy"))


def test_many_names_parse_as_one_name_does_on_every_committed_sample(sample_root: str) -> None:
    names = _npy_names(sample_root) + _npy_names(os.path.join(HERE, "data"))
    got = _agree(names)
    assert len(names) > 1000 and sum(p is not None for p in got) > 1000


@pytest.mark.parametrize("version, short", [("2.10", False), ("2.3", False), ("2.2", True), ("1.x", True)])
def test_many_names_parse_as_one_name_does_on_made_dumps(make_dump: Any, version: str, short: bool) -> None:
    root = make_dump(version=version, iterations=2, param_dots=short, duplicate_timestamps=True, renumber_files=True)
    names = _npy_names(root)
    got = _agree(names)
    assert names and all(p is not None for p in got)
