"""The .pt reader: real torch.save files read without torch; anything but a plain tensor refused, never run."""
from __future__ import annotations

import io
import os
import pickle
import zipfile

import numpy as np
import pytest

from debugger.errors import CorruptFileError
from debugger.formats.msprobe.ptfile import read_array, read_chunks, read_layout

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "dumps_sample", "msprobe", "tensor_mix", "step0", "proc0", "dump_tensor_data")


def _zip(path: str, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, data in members.items():
            z.writestr(name, data)


def test_a_committed_sample_reads_without_torch() -> None:
    p = os.path.join(SAMPLE, "Module.fc1.Linear.forward.0.parameters.weight.pt")
    lay = read_layout(p)
    a = read_array(p, lay)
    assert a.shape == (32, 16) and a.dtype == np.float32
    assert np.isfinite(a).all() and 0 < np.abs(a).max() < 1
    assert np.array_equal(np.concatenate(list(read_chunks(p, lay, 100))), a.reshape(-1))


def test_what_torch_saves_reads_back_exactly(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    cases = [torch.randn(3, 4), torch.randn(4, 5).t(), torch.arange(10)[2:7], torch.randn(3, 2).to(torch.bfloat16),
             torch.tensor(3.5), torch.zeros(0, 3), torch.tensor([True, False]),
             torch.randn(2, 3, dtype=torch.float16), torch.randn(5, 6)[:, 1:3], torch.randint(0, 9, (4,))]
    for i, t in enumerate(cases):
        p = str(tmp_path / f"t{i}.pt")
        torch.save(t, p)
        lay = read_layout(p)
        want = (t.float() if t.dtype == torch.bfloat16 else t).numpy()
        got = read_array(p, lay)
        assert got.shape == want.shape and np.array_equal(got, want), (i, t)
        if want.size:
            assert np.array_equal(np.concatenate(list(read_chunks(p, lay, 3))), want.reshape(-1))


class _Evil:
    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (os.system, ("touch PWNED_BY_PICKLE",))


def test_a_pickle_that_runs_code_is_refused_and_runs_nothing(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    p = str(tmp_path / "evil.pt")
    _zip(p, {"evil/data.pkl": pickle.dumps(_Evil(), protocol=2), "evil/byteorder": b"little"})
    with pytest.raises(CorruptFileError) as e:
        read_layout(p)
    assert "evil.pt" in str(e.value) and "system" in str(e.value) and "refused" in str(e.value)
    assert not os.path.exists(tmp_path / "PWNED_BY_PICKLE")


def test_a_pt_that_is_not_a_tensor_is_refused(tmp_path) -> None:
    p = str(tmp_path / "dict.pt")
    _zip(p, {"d/data.pkl": pickle.dumps({"a": [1, 2]}, protocol=2)})
    with pytest.raises(CorruptFileError, match="holds a dict, not a tensor"):
        read_layout(p)
    q = str(tmp_path / "notzip.pt")
    with open(q, "wb") as f:
        f.write(b"\x80\x02}q\x00.")
    with pytest.raises(CorruptFileError, match="not a torch .pt zip"):
        read_layout(q)


def test_a_truncated_pt_is_refused(tmp_path) -> None:
    src = os.path.join(SAMPLE, "Module.fc1.Linear.forward.0.parameters.weight.pt")
    with open(src, "rb") as f:
        data = f.read()
    p = str(tmp_path / "cut.pt")
    with open(p, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(CorruptFileError) as e:
        read_layout(p)
    assert "cut.pt" in str(e.value)


def test_a_storage_smaller_than_the_view_is_refused(tmp_path) -> None:
    src = os.path.join(SAMPLE, "Module.fc1.Linear.forward.0.parameters.weight.pt")
    with zipfile.ZipFile(src) as z:
        members = {n: z.read(n) for n in z.namelist()}
    key = next(n for n in members if n.endswith("/data/0"))
    members[key] = members[key][:64]
    p = str(tmp_path / "short.pt")
    _zip(p, members)
    with pytest.raises(CorruptFileError, match="storage holds 64 bytes"):
        read_layout(p)


def test_a_huge_pickle_is_not_read(tmp_path) -> None:
    p = str(tmp_path / "big.pt")
    buf = io.BytesIO()
    pickle.dump(list(range(200000)), buf, protocol=2)
    _zip(p, {"big/data.pkl": buf.getvalue()})
    with pytest.raises(CorruptFileError, match="a plain tensor's is a few hundred"):
        read_layout(p)
