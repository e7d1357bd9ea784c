"""Tensor files: .npy headers, memory-mapped values, slices, and broken files."""
from __future__ import annotations

import os

import numpy as np
import pytest

from debugger.errors import CorruptFileError, QueryError
from debugger import open_dump
from debugger.formats.npy import load_npy, read_npy_header
from debugger.query.slices import parse_slice


def _save(path: str, arr: np.ndarray, version: tuple[int, int] | None = None) -> str:
    with open(path, "wb") as f:
        np.lib.format.write_array(f, arr, version=version, allow_pickle=False)
    return path


@pytest.mark.parametrize("version", [None, (1, 0), (2, 0), (3, 0)])
def test_tensors_header_read_for_every_npy_version(tmp_path, version) -> None:
    arr = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    path = _save(str(tmp_path / "a.npy"), arr, version)
    h = read_npy_header(path)
    assert (h.dtype, h.shape, h.fortran_order, h.nbytes) == (np.dtype("float32"), (2, 3, 4), False, 96)
    assert h.data_offset == os.path.getsize(path) - 96
    np.testing.assert_array_equal(load_npy(path, h), arr)


def test_tensors_header_of_a_long_header_needs_version_2(tmp_path) -> None:
    dt = np.dtype([(f"field_{i:05d}", "<f4") for i in range(3000)])   # header over 65535 bytes
    path = _save(str(tmp_path / "wide.npy"), np.zeros(2, dt), (2, 0))
    with open(path, "rb") as f:
        assert f.read(8)[6] == 2
    h = read_npy_header(path)
    assert h.shape == (2,) and h.dtype == dt


@pytest.mark.parametrize("arr", [np.array(0.5, np.float32), np.array(True), np.arange(5, dtype=np.int64),
                                 np.zeros((0, 3), np.float16), np.asfortranarray(np.arange(6.0).reshape(2, 3)),
                                 np.array([[1, 2], [3, 4]], ">i4")], ids=["scalar", "bool", "int64", "empty",
                                                                           "fortran", "big-endian"])
@pytest.mark.parametrize("mmap", [True, False])
def test_tensors_values_equal_np_load(tmp_path, arr: np.ndarray, mmap: bool) -> None:
    path = _save(str(tmp_path / "t.npy"), arr)
    got = load_npy(path, mmap=mmap)
    expected = np.load(path)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_tensors_values_are_memory_mapped(tmp_path) -> None:
    path = _save(str(tmp_path / "big.npy"), np.arange(1000, dtype=np.float64))
    assert isinstance(load_npy(path), np.memmap)
    assert not isinstance(load_npy(path, mmap=False), np.memmap)


def test_tensors_refs_of_a_made_dump_read_like_np_load(make_dump) -> None:
    rank = open_dump(make_dump(iterations=2)).rank(0)
    refs = rank.tensors(0)
    assert len(refs) == 180
    for ref in refs:
        expected = np.load(ref.location)
        assert ref.shape == expected.shape and ref.dtype == expected.dtype
        np.testing.assert_array_equal(ref.value(), expected)


@pytest.mark.parametrize("text, expected", [
    ("[0, :, 1:3]", (0, slice(None), slice(1, 3))),
    ("0,:,1:3", (0, slice(None), slice(1, 3))),
    ("[::2]", (slice(None, None, 2),)),
    ("[..., -1]", (Ellipsis, -1)),
    ("[1:-1:2, 0]", (slice(1, -1, 2), 0)),
    ("[]", ()),
    ("", ()),
])
def test_tensors_parse_slice(text: str, expected: tuple) -> None:
    assert parse_slice(text, 3) == expected


@pytest.mark.parametrize("text", ["[0, :, 1:3]", "[::2]", "[..., -1]", "[1:-1:2, 0]", "[]", "[-1, 2]"])
def test_tensors_slice_of_a_ref_equals_numpy(make_dump, text: str) -> None:
    arr = np.arange(60, dtype=np.float32).reshape(3, 4, 5)

    def values(rank: int, it: int, node: str, io: str, slot: int, default: np.ndarray) -> np.ndarray | None:
        return arr if node.endswith("fc1-Dense/MatMul-op0") and io == "output" else None

    rank = open_dump(make_dump(iterations=1, values=values)).rank(0)
    ref = rank.tensor(0, 0, "Default/network-WithLossCell/_backbone-Net/fc1-Dense/MatMul-op0")
    index = parse_slice(text, len(ref.shape))
    np.testing.assert_array_equal(ref[index], arr[index])


@pytest.mark.parametrize("text, problem", [("[a]", "expected integers"), ("[1:2:3:4]", "expected integers"),
                                           ("[0, 0, 0, 0]", "4 indices for 3 dimensions"), ("[1.5]", "integers")])
def test_tensors_bad_slices_raise_query_error(text: str, problem: str) -> None:
    with pytest.raises(QueryError, match=problem):
        parse_slice(text, 3)


def _truncated(tmp_path, keep: int) -> str:
    path = _save(str(tmp_path / "t.npy"), np.arange(100, dtype=np.float32))
    with open(path, "r+b") as f:
        f.truncate(keep)
    return path


@pytest.mark.parametrize("mmap", [True, False])
def test_tensors_truncated_data_raises_naming_the_path(tmp_path, mmap: bool) -> None:
    path = _truncated(tmp_path, 300)
    assert read_npy_header(path).shape == (100,)   # the header is intact
    with pytest.raises(CorruptFileError) as e:
        load_npy(path, mmap=mmap)
    assert e.value.path == path and str(e.value).startswith(path)
    assert "truncated .npy data (172 of 400 bytes" in str(e.value)


@pytest.mark.parametrize("keep, problem", [(0, "bad magic or truncated header"), (8, "bad magic or truncated header"),
                                           (40, "truncated .npy header")])
def test_tensors_truncated_header_raises_naming_the_path(tmp_path, keep: int, problem: str) -> None:
    path = _truncated(tmp_path, keep)
    with pytest.raises(CorruptFileError, match=problem) as e:
        read_npy_header(path)
    assert str(e.value).startswith(path + ": ")


@pytest.mark.parametrize("offset, data, problem", [
    (0, b"NOTNPY", "not an .npy file"),
    (6, b"\x09", "unsupported .npy version 9"),
    (10, b"{'descr': '<f4', 'fortran_order': False, 'shoop'", "corrupt .npy header (KeyError)"),
    (10, b"{'descr';", "corrupt .npy header (SyntaxError)"),
    (11, b"'descr': 'zz9'", "corrupt .npy header"),
])
def test_tensors_corrupt_header_raises_naming_the_path(tmp_path, offset: int, data: bytes, problem: str) -> None:
    path = _save(str(tmp_path / "c.npy"), np.arange(4, dtype=np.float32))
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)
    with pytest.raises(CorruptFileError, match=problem.replace("(", r"\(").replace(")", r"\)")) as e:
        read_npy_header(path)
    assert e.value.path == path


def test_tensors_object_arrays_are_refused(tmp_path) -> None:
    path = str(tmp_path / "o.npy")
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(CorruptFileError, match="object arrays are not tensors"):
        read_npy_header(path)


def test_tensors_missing_file_raises_corrupt_file_error(tmp_path) -> None:
    path = str(tmp_path / "gone.npy")
    with pytest.raises(CorruptFileError, match="cannot read") as e:
        read_npy_header(path)
    assert e.value.path == path


def _chunks_of(path: str) -> np.ndarray:
    from debugger.formats.npy import NpyTensor
    parts = list(NpyTensor(path, os.path.getsize(path)).chunks(1 << 20))
    return np.concatenate(parts) if parts else np.zeros(0)


def test_tensors_small_files_sharing_a_header_read_like_np_load(tmp_path) -> None:
    # headers are parsed once per distinct text: files of one header (as a dump's iterations) and of
    # headers that differ only in shape or dtype must each still read as numpy reads them
    rng = np.random.default_rng(3)
    arrays = [rng.normal(size=(3, 4)).astype(np.float32) for _ in range(3)] + [
        rng.normal(size=(4, 3)).astype(np.float32), rng.normal(size=(3, 4)), np.arange(12, dtype=np.int64),
        np.asfortranarray(rng.normal(size=(3, 4)).astype(np.float32))]
    for i, arr in enumerate(arrays):
        path = _save(str(tmp_path / f"a{i}.npy"), arr)
        np.testing.assert_array_equal(_chunks_of(path), np.load(path).reshape(-1))


def test_tensors_a_known_header_over_short_data_is_still_truncated(tmp_path) -> None:
    good = _save(str(tmp_path / "g.npy"), np.arange(100, dtype=np.float32))
    _chunks_of(good)                    # its header is now known
    bad = _save(str(tmp_path / "b.npy"), np.arange(100, dtype=np.float32))
    with open(bad, "r+b") as f:
        f.truncate(300)
    with pytest.raises(CorruptFileError, match="truncated") as e:
        _chunks_of(bad)
    assert e.value.path == bad
    with open(bad, "r+b") as f:          # a header cut short, its first bytes those of the known one
        f.truncate(40)
    with pytest.raises(CorruptFileError, match="truncated .npy header") as e:
        _chunks_of(bad)
    assert e.value.path == bad
