"""The tensor file-name grammar of every MindSpore version, read right to left."""
from __future__ import annotations

import os

import pytest

from debugger.formats.mindspore.filenames import dtype_from_field, numpy_dtype, parse_tensor_file_name

FULL = "Default_network-WithLossCell__backbone-Net_conv-Conv2d_Conv2D-op0"
GRAD = "Gradients_Default_network-WithLossCell__backbone-Net_fc2-Dense_Grad_MatMul_MatMul-op1"

# (file name, op_type, op_name, timestamp, io, slot, format, dtype)
GOOD = [
    # 2.4+ (real 2.10 names): full scope with '/' as '_', dtype field
    (f"Conv2D.{FULL}.0.0.1796230236364755.output.0.DefaultFormat.Float32.npy",
     "Conv2D", FULL, 1796230236364755, "output", 0, "DefaultFormat", "float32"),
    (f"MatMul.{GRAD}.0.0.1796230236367387.input.2.DefaultFormat.Bool.npy",
     "MatMul", GRAD, 1796230236367387, "input", 2, "DefaultFormat", "bool"),
    ("Parameter.fc1_weight.0.0.1796230236370388.output.0.DefaultFormat.Float32.npy",
     "Parameter", "fc1_weight", 1796230236370388, "output", 0, "DefaultFormat", "float32"),
    ("BiasAdd.Default_fc1-Dense_BiasAdd-op0.0.0.1796237816088723.input.2.DefaultFormat.Int64.npy",
     "BiasAdd", "Default_fc1-Dense_BiasAdd-op0", 1796237816088723, "input", 2, "DefaultFormat", "int64"),
    ("AssignAdd.Default_optimizer-Momentum_AssignAdd-op0.0.0.17962378.input.0.DefaultFormat.Int32.npy",
     "AssignAdd", "Default_optimizer-Momentum_AssignAdd-op0", 17962378, "input", 0, "DefaultFormat", "int32"),
    # lower-case dtype style (the documentation's example) and other formats
    ("Conv2d.Conv2D-op12.0.0.1623124369613540.output.0.DefaultFormat.float16.npy",
     "Conv2d", "Conv2D-op12", 1623124369613540, "output", 0, "DefaultFormat", "float16"),
    ("Conv2D.Conv2D-op12.3.1.1623124369613540.output.1.NC1HWC0.BFloat16.npy",
     "Conv2D", "Conv2D-op12", 1623124369613540, "output", 1, "NC1HWC0", "bfloat16"),
    ("Cast.Default_Cast-op3.0.0.16.input.0.FRACTAL_Z.UInt8.npy",
     "Cast", "Default_Cast-op3", 16, "input", 0, "FRACTAL_Z", "uint8"),
    # 2.3: full scope, no dtype field
    (f"Conv2D.{FULL}.0.0.1796230236364755.output.0.DefaultFormat.npy",
     "Conv2D", FULL, 1796230236364755, "output", 0, "DefaultFormat", None),
    # <= 2.2 / 1.x: short op names, no dtype field
    ("Conv2D.Conv2D-op12.0.0.1623124369613540.output.0.DefaultFormat.npy",
     "Conv2D", "Conv2D-op12", 1623124369613540, "output", 0, "DefaultFormat", None),
    ("ReLU.ReLU-op15.0.0.1623124369613541.input.0.NCHW.npy",
     "ReLU", "ReLU-op15", 1623124369613541, "input", 0, "NCHW", None),
    # dots inside the op name (parameters of some versions), with and without dtype
    ("Parameter.fc1.weight.0.0.1623124369613540.output.0.DefaultFormat.npy",
     "Parameter", "fc1.weight", 1623124369613540, "output", 0, "DefaultFormat", None),
    ("Parameter.moments.fc1.weight.0.0.1623124369613540.output.0.DefaultFormat.Float32.npy",
     "Parameter", "moments.fc1.weight", 1623124369613540, "output", 0, "DefaultFormat", "float32"),
    # an op name that looks like the tail of a name
    ("Parameter.output.0.0.12.output.0.DefaultFormat.npy",
     "Parameter", "output", 12, "output", 0, "DefaultFormat", None),
]

BAD = [
    "statistic.csv",                                                        # not an .npy
    "mapping.csv",
    "foo.npy",                                                              # too few fields
    "12.npy",                                                               # a mapping.csv number
    "Conv2D.Conv2D-op12.0.0.1623124369613540",                              # Ascend async, no extension
    "Conv2D.Conv2D-op12.0.0.1623124369613540.output.0.DefaultFormat.bin",   # legacy .bin
    "Conv2D.Conv2D-op12.0.0.16231243x9613540.output.0.DefaultFormat.npy",  # timestamp not a number
    "Conv2D.Conv2D-op12.0.0.1623124369613540.middle.0.DefaultFormat.npy",   # io word
    "Conv2D.Conv2D-op12.0.0.1623124369613540.output.a.DefaultFormat.npy",   # slot not a number
    "Conv2D.Conv2D-op12.x.0.1623124369613540.output.0.DefaultFormat.npy",   # task id
    "Conv2D.Conv2D-op12.0.y.1623124369613540.output.0.DefaultFormat.npy",   # stream id
    "Conv2D.Conv2D-op12.0.0.1623124369613540.output.0.DefaultFormat.Float99.npy",  # unknown dtype
    "Conv2D.Conv2D-op12.0.0.1623124369613540.output.0.9Format.npy",         # format must start with a letter
    "Conv2D..0.0.1623124369613540.output.0.DefaultFormat.npy",             # empty op name
    ".Conv2D-op12.0.0.1623124369613540.output.0.DefaultFormat.npy",        # empty op type
    "Conv2D.Conv2D-op12.0.0.1623124369613540.output.0.DefaultFormat.Float32.npy.tmp",
]


@pytest.mark.parametrize("name, op_type, op_name, ts, io, slot, fmt, dtype", GOOD, ids=[g[0][:70] for g in GOOD])
def test_filenames_parse_every_grammar(name: str, op_type: str, op_name: str, ts: int, io: str, slot: int, fmt: str,
                                       dtype: str | None) -> None:
    p = parse_tensor_file_name(name)
    assert p is not None
    assert (p.op_type, p.op_name, p.timestamp, p.io, p.slot, p.format, p.dtype) == (op_type, op_name, ts, io, slot,
                                                                                     fmt, dtype)


def test_filenames_read_task_and_stream_ids() -> None:
    p = parse_tensor_file_name("Conv2D.Conv2D-op12.3.1.1623124369613540.output.1.NC1HWC0.BFloat16.npy")
    assert p is not None and (p.task_id, p.stream_id) == (3, 1)


@pytest.mark.parametrize("name", BAD)
def test_filenames_that_match_no_grammar_give_none(name: str) -> None:
    assert parse_tensor_file_name(name) is None


@pytest.mark.parametrize("field, numpy_name", [("Float32", "float32"), ("float16", "float16"), ("Int64", "int64"),
                                               ("Bool", "bool"), ("UInt8", "uint8"), ("BFloat16", "bfloat16"),
                                               ("Complex64", "complex64"), ("Tensor", None)])
def test_filenames_dtype_field_maps_to_numpy(field: str, numpy_name: str | None) -> None:
    assert dtype_from_field(field) == numpy_name


def test_filenames_numpy_dtype_is_none_for_bfloat16() -> None:
    assert numpy_dtype("float16").itemsize == 2  # type: ignore[union-attr]
    assert numpy_dtype("bfloat16") is None and numpy_dtype(None) is None


@pytest.mark.parametrize("version, dtype_field, short", [("2.10", True, False), ("2.4", True, False),
                                                         ("2.3", False, False), ("2.2", False, True),
                                                         ("1.x", False, True)])
def test_filenames_every_file_of_a_made_dump_parses(make_dump, version: str, dtype_field: bool, short: bool) -> None:
    root = make_dump(version=version, iterations=1, param_dots=short)
    d = os.path.join(root, "rank_0", "Net", "0", "0")
    names = os.listdir(d)
    assert len(names) == 90
    for name in names:
        p = parse_tensor_file_name(name)
        assert p is not None, name
        assert (p.dtype is not None) == dtype_field, name
        if p.op_type != "Parameter":
            assert ("/" not in p.op_name) and (p.op_name.count("_") == 0 if short else "_" in p.op_name), name
    parsed = [parse_tensor_file_name(n) for n in names if n.startswith("Parameter.")]
    params = {p.op_name for p in parsed if p is not None}
    assert ("fc1.weight" if short else "fc1_weight") in params


def test_filenames_of_the_real_sample_parse(sample_root: str) -> None:
    d = os.path.join(sample_root, "single", "rank_0", "Net", "0", "0")
    names = [n for n in os.listdir(d) if n.endswith(".npy")]
    assert names and all(parse_tensor_file_name(n) is not None for n in names)
