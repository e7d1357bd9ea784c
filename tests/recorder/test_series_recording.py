"""Recorder(series=True): every step's statistics of weights, gradients, optimizer state and updates, and
the loss, lr, loss scale and gradient norm, checked against plain torch computed in the training loop."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import debugger
from debugger.torch.recorder import Recorder

STEPS = 12


def _truth_loop(model, opt, batches, rec=None, sched=None, scaler=None):
    """Train; return per step the plain-torch truth (computed in the loop, apart from tdbg)."""
    truth = []
    for x, y in batches:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
        else:
            loss.backward()
        named = dict(model.named_parameters())
        with torch.no_grad():
            before = {n: p.detach().clone() for n, p in named.items()}
            grads = {n: p.grad.detach().clone() for n, p in named.items()}
            lr = opt.param_groups[0]["lr"]
            scale = float(scaler.get_scale()) if scaler is not None else None
        if scaler is not None:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        if sched is not None:
            sched.step()
        with torch.no_grad():
            truth.append({"loss": float(loss.detach()), "lr": lr, "scale": scale,
                          "grad_norm": float(torch.sqrt(sum(g.pow(2).sum() for g in grads.values()))),
                          "w": {n: p.detach().clone() for n, p in named.items()},
                          "g": grads, "u": {n: p.detach() - before[n] for n, p in named.items()},
                          "st": {n: {k: v.clone() for k, v in opt.state[p].items()} for n, p in named.items()}})
        if rec is not None:
            rec.step()
    return truth


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))


def _batches(n=STEPS):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(16, 8, generator=g), torch.randn(16, 1, generator=g)) for _ in range(n)]


def _close(a, b):
    np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-7)


def test_series_equals_plain_torch_truth(tmp_path):
    model = _mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    with Recorder(tmp_path / "d", model, opt, series=True, level="parameters", iterations=[2]) as rec:
        truth = _truth_loop(model, opt, _batches(), rec, sched)
    rank = debugger.open_dump(str(tmp_path / "d")).rank(0)
    s = rank.series
    assert s is not None and list(s.steps()) == list(range(STEPS))
    assert rank.iterations() == [2]         # the deep level's steps only
    cat = {t.name: (t.role, t.param) for t in s.catalog()}
    assert cat["0.weight"] == ("weight", "0.weight") and cat["0.weight.grad"] == ("gradient", "0.weight")
    assert cat["0.weight.update"] == ("update", "0.weight")
    assert cat["exp_avg_sq.2.bias"] == ("optimizer_state", "2.bias")
    _close(s.scalar("loss")[1], [t["loss"] for t in truth])
    _close(s.scalar("lr")[1], [t["lr"] for t in truth])
    assert len(set(s.scalar("lr")[1])) == 4         # the scheduler's changes are there
    _close(s.scalar("grad_norm")[1], [t["grad_norm"] for t in truth])
    assert np.isnan(s.scalar("loss_scale")[1]).all()
    for name in ("0.weight", "2.bias"):
        _close(s.curve(name, "l2norm")[1], [float(t["w"][name].norm()) for t in truth])
        _close(s.curve(name, "max")[1], [float(t["w"][name].max()) for t in truth])
        _close(s.curve(name, "min")[1], [float(t["w"][name].min()) for t in truth])
        _close(s.curve(name, "mean")[1], [float(t["w"][name].mean()) for t in truth])
        _close(s.curve(name + ".grad", "l2norm")[1], [float(t["g"][name].norm()) for t in truth])
        _close(s.curve(name + ".grad", "abs_mean")[1], [float(t["g"][name].abs().mean()) for t in truth])
        _close(s.curve(name + ".update", "l2norm")[1], [float(t["u"][name].norm()) for t in truth])
        _close(s.curve("exp_avg_sq." + name, "max")[1], [float(t["st"][name]["exp_avg_sq"].max()) for t in truth])
        assert (s.curve(name, "nan")[1] == 0).all() and (s.curve(name, "count")[1] == truth[0]["w"][name].numel()).all()


def test_gpt2_series_every_step_with_deep_captures_every_n(tmp_path):
    """A tiny GPT-2 from a config: the series covers every step while level "ops" records every 4th."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=16,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = transformers.GPT2LMHeadModel(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(2))
    losses, wte = [], []
    with Recorder(tmp_path / "g", model, opt, series=True, save="statistics",
                  level={"parameters": None, "ops": range(0, 10**9, 4)}) as rec:
        for _ in range(9):
            opt.zero_grad()
            loss = model(ids, labels=ids).loss
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
            wte.append(float(model.transformer.wte.weight.detach().norm()))
            rec.step()
    rank = debugger.open_dump(str(tmp_path / "g")).rank(0)
    s = rank.series
    assert list(s.steps()) == list(range(9))
    _close(s.scalar("loss")[1], losses)
    _close(s.curve("transformer.wte.weight", "l2norm")[1], wte)
    assert rank.iterations() == list(range(9))      # "parameters" every step, "ops" every 4th
    ops = [i for g in rank.graph_ids if rank.graph_level(g) == "ops" for i in rank.iterations(g)]
    assert ops == [0, 4, 8]


def test_grad_scaler_loss_scale(tmp_path):
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=2)
    with Recorder(tmp_path / "a", model, opt, series=True, level="parameters", iterations=()) as rec:
        truth = _truth_loop(model, opt, _batches(), rec, scaler=scaler)
    s = debugger.open_dump(str(tmp_path / "a")).rank(0).series
    got = s.scalar("loss_scale")[1]
    _close(got, [t["scale"] for t in truth])
    assert got[-1] > got[0]         # it grew: the scale moves over the run
    _close(s.scalar("grad_norm")[1], [t["grad_norm"] for t in truth])     # unscaled gradients


def test_device_rows_multi_tensor_kernels_match_numpy():
    """The path for GPU tensors (multi-tensor kernels, one device row block), run on CPU tensors here."""
    from debugger.stats.core import STAT_NAMES
    from debugger.torch.seriesstats import device_rows

    g = torch.Generator().manual_seed(3)
    ts = [torch.randn(5, 7, generator=g), torch.randn(33, generator=g) * 4 + 1, torch.tensor([1.0, float("nan")])]
    rows = device_rows(ts).numpy()
    col = {n: i for i, n in enumerate(STAT_NAMES)}
    for t, row in zip(ts[:2], rows[:2]):
        a = t.numpy().astype(np.float64).ravel()
        for name, want in (("count", a.size), ("min", a.min()), ("max", a.max()), ("mean", a.mean()),
                           ("abs_mean", np.abs(a).mean()), ("std", a.std(ddof=1)), ("l2norm", np.linalg.norm(a)),
                           ("nan", 0), ("pos_inf", 0)):
            np.testing.assert_allclose(row[col[name]], want, rtol=1e-5, err_msg=name)
        assert np.isnan(row[col["zeros"]])          # not computed on a device: unknown
    assert np.isnan(rows[2][col["nan"]]) and np.isnan(rows[2][col["l2norm"]])     # non-finite: counts unknown
    empty = device_rows([torch.zeros(0), torch.ones(2, dtype=torch.float64)]).numpy()
    assert empty[0][col["count"]] == 0 and np.isnan(empty[0][col["max"]]) and empty[1][col["l2norm"]] == np.sqrt(2)


def test_a_failing_series_warns_once_and_never_touches_the_training(tmp_path):
    """The series folder cannot be made (a file has its name): one warning, the training runs on, unchanged."""
    plain = _mlp()
    opt_p = torch.optim.AdamW(plain.parameters(), lr=1e-2)
    _truth_loop(plain, opt_p, _batches())
    model = _mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    (tmp_path / "f" / "rank_0").mkdir(parents=True)
    (tmp_path / "f" / "rank_0" / "series").write_text("in the way")
    with pytest.warns(RuntimeWarning, match="per-step series stopped") as got:
        with Recorder(tmp_path / "f", model, opt, series=True, level="parameters", iterations=[1]) as rec:
            _truth_loop(model, opt, _batches(), rec)
    assert len([w for w in got if "per-step series" in str(w.message)]) == 1
    for a, b in zip(plain.parameters(), model.parameters()):
        assert torch.equal(a, b)
    assert debugger.open_dump(str(tmp_path / "f")).rank(0).iterations() == [1]    # the deep capture is intact


def test_micro_batches_loss_is_their_sum(tmp_path):
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    want = []
    with Recorder(tmp_path / "m", model, opt, series=True, iterations=()) as rec:
        for x, y in _batches(4):
            opt.zero_grad()
            total = 0.0
            for xs, ys in zip(x.chunk(2), y.chunk(2)):     # gradient accumulation: backward per micro-batch
                loss = torch.nn.functional.mse_loss(model(xs), ys) / 2
                loss.backward()
                total += float(loss.detach())
            opt.step()
            want.append(total)
            rec.step()
    _close(debugger.open_dump(str(tmp_path / "m")).rank(0).series.scalar("loss")[1], want)


def test_no_optimizer_keeps_the_loss(tmp_path):
    """Recorder(optimizer=None): no parameter is trained, the series still holds every step's loss."""
    model = _mlp()
    want = []
    with Recorder(tmp_path / "e", model, None, series=True, iterations=()) as rec:
        for x, y in _batches(3):
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            want.append(float(loss.detach()))
            rec.step()
    s = debugger.open_dump(str(tmp_path / "e")).rank(0).series
    assert s.tensors() == []
    _close(s.scalar("loss")[1], want)


def test_a_step_the_scaler_skips(tmp_path):
    """Scaled gradients overflow at first: GradScaler skips optimizer.step; the series still has the step
    (its gradients as rec.step() finds them, non-finite; no update; the scale after the scaler's update)."""
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 127, growth_interval=1000)
    scales = []
    # every step here is skipped, so no scaler.step reaches optimizer.step to be found: given
    with Recorder(tmp_path / "k", model, opt, series=True, iterations=(), scaler=scaler) as rec:
        for x, y in _batches(4):
            opt.zero_grad()
            scaler.scale(torch.nn.functional.mse_loss(model(x), y) * 1e6).backward()   # overflows at 2**127
            scaler.step(opt)
            scaler.update()
            scales.append(float(scaler.get_scale()))
            rec.step()
    s = debugger.open_dump(str(tmp_path / "k")).rank(0).series
    bad = sum(s.curve("2.weight.grad", c)[1] for c in ("pos_inf", "neg_inf", "nan"))
    assert bad[0] > 0 and not np.isfinite(s.scalar("grad_norm")[1][0])
    assert s.curve("2.weight.update", "l2norm")[1][0] == 0          # the skipped step changed nothing
    assert s.scalar("loss_scale")[1][0] == scales[0] < 2.0 ** 127      # after the scaler's update


def test_flush_makes_every_ended_step_readable(tmp_path):
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    with Recorder(tmp_path / "l", model, opt, series=True, iterations=(), series_flush_seconds=3600) as rec:
        for i, (x, y) in enumerate(_batches(5)):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            rec.step()
            if i in (1, 3):
                rec.flush()
                got = debugger.open_dump(str(tmp_path / "l")).rank(0).series
                assert list(got.steps()) == list(range(i + 1))
    assert list(debugger.open_dump(str(tmp_path / "l")).rank(0).series.steps()) == list(range(5))


def test_the_series_reads_are_not_recorded_as_operators(tmp_path):
    """At level "ops" the series' own reads of gradients (``Tensor.numpy()`` dispatches a ``detach``) were
    recorded as the optimizer's operators: the graph of an "ops" iteration is the same with and without
    the series."""
    import nanogpt_kit as K

    def names(series: bool) -> set:
        path = tmp_path / ("with" if series else "without")
        K.train("eager", 2, record={"level": "ops", "series": series, "save": "statistics", "iterations": [1]},
                path=path)
        g = debugger.open_dump(str(path)).rank(0).graph(0)
        return set(g.names())

    assert names(True) == names(False)


class _Growing(torch.nn.Module):
    """An MLP that gains a layer mid-run (given to the optimizer as a new group)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.extra = torch.nn.Linear(4, 8), torch.nn.Linear(8, 1), None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.a(x))
        return self.b(h + self.extra(h) if self.extra is not None else h)


def _grow(path: str, steps: int, **options) -> list:
    """Train a _Growing MLP (its layer added at step 3, as a new Adam group) recorded at ``path``: the new
    layer's weight l2 norm after each step (None before it exists)."""
    torch.manual_seed(0)
    model = _Growing()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    norms = []
    with Recorder(path, model, opt, save="statistics", **options) as rec:
        for step in range(steps):
            if step == 3:
                model.extra = torch.nn.Linear(8, 8)
                opt.add_param_group({"params": model.extra.parameters()})
            loss = model(torch.randn(16, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step()
            norms.append(float(model.extra.weight.detach().norm()) if model.extra is not None else None)
    return norms


def test_a_layer_added_mid_run_is_in_the_series_from_its_first_step(tmp_path):
    """Issue 37: the series left a layer added mid-run out with no word; it is in it from the step it joins,
    its weight's l2 norm that of plain torch, and the scan of the run stays quiet."""
    from clirun import scan_quiet

    norms = _grow(str(tmp_path / "d"), 6, level="parameters", series=True)
    series = debugger.open_dump(str(tmp_path / "d")).rank(0).series
    steps, l2 = series.matrix("l2norm")
    row = l2[series.tensors().index("extra.weight")]
    assert np.isnan(row[:3]).all() and row[3:] == pytest.approx(norms[3:], rel=1e-5)
    scan_quiet(str(tmp_path / "d"), "--preset", "parameters", "--no-cache")


@pytest.mark.parametrize("level", ["ops", "modules"])
def test_a_layer_added_mid_run_is_named_and_quiet_at_every_level(tmp_path, level):
    """Issue 37: at "ops" the new layer's Adam state (its step counters, made inside the step) was left
    unnamed, kind other, and called all zero (2 false hits); its weights' first step read as a gap ("no
    previous iteration") although they did not exist before. Now the state is its layer's and the scan is
    clean and complete."""
    from clirun import scan_quiet

    _grow(str(tmp_path / "d"), 5, level=level)
    rank = debugger.open_dump(str(tmp_path / "d")).rank(0)
    at3 = [r for g in rank.graph_ids if 3 in rank.iterations(g) for r in rank.tensors(g, 3)]
    state = {r.param for r in at3 if r.kind == "optimizer_state"}
    assert {"extra.weight", "extra.bias"} <= state
    # at "ops" no unnamed input at all (the batch is randn's): the new layer's memory, filled by nn.init, is its
    # allocation's (test_levels.py); at "modules" input-0 is the model's input
    unnamed = [r.node for r in at3 if r.node.startswith("input-") and r.kind != "optimizer_state"
               and (level == "ops" or r.kind == "other")]
    assert not unnamed, unnamed
    preset = () if level == "ops" else ("--preset", "parameters")   # the tanh is functional: no module output
    doc = scan_quiet(str(tmp_path / "d"), "--no-cache", *preset, unanswered=frozenset()).json
    assert doc["coverage"]["status"] == "complete", doc["coverage"]
