"""Values computed from constants alone (kind constant) in a real model. A non-finite one is an overflow origin
only when it reaches the training: T5's relative position buckets take the log of a zero position (-inf), cast it to an index and
discard it with torch.where, a healthy run; a positional table whose log(0) is added to the embeddings makes
the loss non-finite, and that log is the headline. At level "modules", a call's float output that needs no
grad beside one that does is such a constant. Truth from plain torch."""
from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from clirun import run_cli, scan_quiet  # noqa: E402
from models.corpus import quiet_threads  # noqa: E402

from debugger.torch import Recorder  # noqa: E402

STEPS = 3


@pytest.mark.slow
@pytest.mark.parametrize("level", ["ops", "modules"])
def test_t5_relative_position_log_is_no_overflow_origin(tmp_path: Any, level: str) -> None:
    """T5 under its own loss: its log(0) = -inf is plain torch's (asserted), and the scan is quiet. At "ops" it
    was 16 overflow hits at the bucket's log-0 in a healthy run; at "modules" tensor_all_zero hit the
    cross-attention's output 1, the position bias it passes along (zeros plus the all-zero mask, no grad:
    asserted), now an output of kind constant."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.t5.modeling_t5 import T5Attention

    buckets = T5Attention._relative_position_bucket(torch.arange(4)[None, :] - torch.arange(4)[:, None])
    assert bool((buckets >= 0).all())                      # the -inf never reaches the index it computes
    assert torch.isinf(torch.log(torch.zeros(1) / 8)).all()  # the log it takes of a zero position is -inf
    torch.manual_seed(0)
    model = transformers.T5ForConditionalGeneration(transformers.T5Config(
        vocab_size=32, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_decoder_layers=1, num_heads=2,
        decoder_start_token_id=0, pad_token_id=0))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    cross = model.decoder.block[0].layer[1].EncDecAttention
    bias = []
    cross.register_forward_hook(lambda m, a, out: bias.append(out[1]))
    with quiet_threads(), Recorder(tmp_path / "d", model, opt, level=level, save="statistics") as rec:
        for _ in range(STEPS):
            loss = model(input_ids=torch.randint(2, 32, (2, 8), generator=g),
                         labels=torch.randint(2, 32, (2, 6), generator=g)).loss
            assert torch.isfinite(loss)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step()
    assert all(not b.requires_grad and not b.any() for b in bias), "the position bias is a zero constant"
    scan_quiet(str(tmp_path / "d"))


class _LogPositions(torch.nn.Module):
    """Embeddings plus a positional table log(position) computed from constants: log(0) = -inf at position 0."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(16, 8)
        self.head = torch.nn.Linear(8, 16)

    def forward(self, ids: Any) -> Any:
        pos = torch.log(torch.arange(ids.shape[1], dtype=torch.float32))[None, :, None]
        return self.head(self.emb(ids) + pos)


def test_a_constant_that_reaches_the_loss_is_the_origin(tmp_path: Any) -> None:
    """The same kind of constant, not discarded: the loss is non-finite (plain torch) and the headline is the
    log that made the -inf, at iteration 0."""
    torch.manual_seed(0)
    model = _LogPositions()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ids = torch.randint(0, 16, (2, 4), generator=torch.Generator().manual_seed(1))
    with Recorder(tmp_path / "d", model, opt, level="ops", save="statistics") as rec:
        loss = torch.nn.functional.cross_entropy(model(ids).flatten(0, 1), ids.flatten())
        assert not torch.isfinite(loss)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.step()
    r = run_cli("scan", str(tmp_path / "d"), "--json")
    assert r.code == 1, r.err
    first = r.json["first"]
    assert (first["watchpoint"], first["iteration"]) == ("overflow", 0), first
    assert first["node"].endswith("/log-0"), first
