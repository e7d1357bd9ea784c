"""nn.Embedding(sparse=True) trained by SparseAdam beside Adam for the rest (two optimizers).

Truth from plain torch: the same run unrecorded gives the losses and weights bit for bit, and the
embedding's gradient is a sparse tensor (``grad.layout``). The recorder stores only dense tensors: the
sparse gradient's node has no value, which is said when recording (one warning) and by the scan (a check
that could not run), never passed over as checked; the healthy run has no hit.
"""
from __future__ import annotations

import warnings
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from debugger import open_dump  # noqa: E402
from debugger.torch import Recorder  # noqa: E402
from debugger.watch.engine import scan  # noqa: E402
from debugger.watch.registry import preset  # noqa: E402


class _Bag(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(50, 16, sparse=True)
        self.fc = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.emb(x).mean(1))


def _train(path: str | None, level: str) -> tuple[list[float], nn.Module, list[str], list[Any]]:
    torch.manual_seed(0)
    m = _Bag()
    opts = [torch.optim.SparseAdam(list(m.emb.parameters()), lr=1e-2), torch.optim.Adam(m.fc.parameters(), lr=1e-2)]
    losses, layouts = [], []
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        rec = Recorder(path, m, opts, level=level).start() if path else None
        for i in range(4):
            g = torch.Generator().manual_seed(i)
            loss = F.cross_entropy(m(torch.randint(0, 50, (8, 6), generator=g)), torch.randint(0, 5, (8,), generator=g))
            for o in opts:
                o.zero_grad()
            loss.backward()
            layouts.append(m.emb.weight.grad.layout)
            for o in opts:
                o.step()
            losses.append(loss.item())
            if rec is not None:
                rec.step()
        if rec is not None:
            rec.close()
    return losses, m, [str(w.message) for w in said if issubclass(w.category, RuntimeWarning)], layouts


@pytest.mark.parametrize("level", ["parameters", "ops"])
def test_a_sparse_gradient_is_said_not_recorded(tmp_path: Any, level: str) -> None:
    """Bit-identical, quiet, and the sparse gradient said once when recording (was: silent) and in the scan."""
    path = str(tmp_path / "d")
    plain, m0, _, layouts = _train(None, level)
    losses, m1, said, _ = _train(path, level)
    assert set(layouts) == {torch.sparse_coo}        # torch: the embedding's gradient is sparse
    assert losses == plain
    assert all(torch.equal(a, b) for a, b in zip(m0.state_dict().values(), m1.state_dict().values()))
    sparse = [s for s in said if "layout sparse_coo are not recorded" in s]
    assert len(sparse) == 1, said
    res = scan(open_dump(path), preset("parameters" if level == "parameters" else "recommended"), jobs=1)
    assert res.hits == []
    gaps = {r["reason"] for c in res.coverage_dict()["watchpoints"] for r in c["reasons"]}
    assert any("not in the dump" in g for g in gaps), gaps
