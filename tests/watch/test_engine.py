"""The scan engine: ordering, filters, workers, the statistics cache, the CLI around it, broken files
and memory."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from clirun import run_cli
from watch_kit import Plant, full, hit_keys, hits, make, run, tensor_file, wp
from debugger.stats.cache import StatsCache
from debugger import open_dump
from debugger.stats.core import CHUNK
from debugger.watch.engine import parse_iterations, scan
from debugger.watch.registry import Watchpoint, preset

EVERY = "tensor_too_large:max_gt=-1e30"     # hits every floating output tensor with a finite value


def _user_line(root: str, code: str) -> int:
    with open(os.path.join(os.path.dirname(root), "train_user.py"), encoding="utf-8") as f:
        return next(i for i, line in enumerate(f, 1) if line.strip() == code)


# -- order -----------------------------------------------------------------------------------------
def test_hits_are_sorted_by_iteration_rank_and_execution_order(tmp_path, layout):
    lay = layout(ranks=2)
    root = make(tmp_path, ranks=2)
    dump = open_dump(root)
    res = run(dump, EVERY)
    keys = [(h.iteration, h.rank, h.position) for h in res.hits]
    assert keys == sorted(keys) and res.first is res.hits[0]
    # every floating output but those of in-place optimizer updates (aliases or placeholders)
    floats = [(r.rank, t.iteration, t.node) for r in dump.ranks for t in r.tensors()
              if t.io == "output" and t.dtype.kind == "f" and not r.graph(0).node(t.node).input_roles]
    assert sorted((h.rank, h.iteration, h.node) for h in res.hits) == sorted(floats)
    pos = {h.node: h.position for h in res.hits}
    for k in lay.order:
        if k in pos:
            assert pos[k] == lay.position(k), k
    for w in lay.weights:   # a Parameter holds the value after its update: it sorts with the optimizer
        assert pos[w] == lay.position(lay.optimizer(w)), w
        for s in lay.state(w):
            assert pos[s] == lay.position(lay.optimizer(w)), s
    assert pos[lay.data] == 0     # the data input sorts with its first reader
    assert (res.first.iteration, res.first.rank, res.first.node) == (0, 0, lay.order[0])


def test_first_is_where_the_trouble_starts(tmp_path, layout):
    lay = layout()
    g_late, g_early = lay.gradient("fc1.weight"), lay.gradient("fc2.bias")
    assert lay.position(g_early) < lay.position(g_late)
    z = full(0.0)
    plant = (Plant().set(g_late, z, it=1, rank=0).set(g_early, lambda d: np.zeros_like(d), it=1, rank=0)
             .set(g_late, z, it=1, rank=1).set(g_late, z, it=0, rank=1))
    root = make(tmp_path, plant=plant, ranks=2, data_parallel=False)
    res = run(root, "gradient_vanishing", "tensor_all_zero:scope=Gradients/")
    assert [(h.iteration, h.rank, h.node, h.watchpoint) for h in res.hits] == [
        (0, 1, g_late, "gradient_vanishing"), (0, 1, g_late, "tensor_all_zero"),
        (1, 0, g_early, "gradient_vanishing"), (1, 0, g_early, "tensor_all_zero"),
        (1, 0, g_late, "gradient_vanishing"), (1, 0, g_late, "tensor_all_zero"),
        (1, 1, g_late, "gradient_vanishing"), (1, 1, g_late, "tensor_all_zero")]
    assert (res.first.iteration, res.first.rank, res.first.node) == (0, 1, g_late)


def test_the_headline_ranks_by_cause_before_iteration(tmp_path, layout):
    """An all-zero gradient at iteration 0 and a NaN planted at iteration 2: the headline is the NaN's
    origin, in the JSON ``first``, the text report and the triage's findings alike; the hit list keeps
    the hit order."""
    from debugger.views.triage import triage

    lay = layout()
    grad, act = lay.gradient("fc1.weight"), lay.activation()

    def with_nan(d: np.ndarray) -> np.ndarray:
        d = d.copy()
        d.flat[0] = np.nan
        return d

    root = make(tmp_path, plant=Plant().set(grad, full(0.0), it=0).set(act, with_nan, it=2))
    res = run(root, *preset("recommended"))
    # (gradient_vanishing of the preset judges the whole layer: fc1.bias still learns)
    assert res.hits[0].iteration == 0 and res.hits[0].watchpoint == "tensor_all_zero"
    assert (res.first.watchpoint, res.first.iteration, res.first.node) == ("overflow", 2, act)
    text = run_cli("scan", root, "--no-cache", "--jobs", "1")
    assert text.code == 1 and f"First problem: overflow at iteration 2, rank 0: {act}" in text.out
    assert text.out.index("\noverflow:") < text.out.index("\ntensor_all_zero:")
    out = run_cli("scan", root, "--no-cache", "--jobs", "1", "--json").json
    assert out["first"]["watchpoint"] == "overflow" and out["hits"][0]["iteration"] == 0
    findings = triage(open_dump(root))["findings"]
    assert findings[0]["watchpoint"]["name"] == "overflow" and findings[0]["first"]["node"] == act


# -- filters ---------------------------------------------------------------------------------------
def test_rank_and_iteration_filters(tmp_path):
    root = make(tmp_path, ranks=2, iterations=7)
    assert parse_iterations("0-2,5") == {0, 1, 2, 5}
    res = run(root, EVERY, ranks=[1], iterations="0-2,5")
    assert res.ranks == [1] and res.iterations == [0, 1, 2, 5]
    assert {h.rank for h in res.hits} == {1} and {h.iteration for h in res.hits} == {0, 1, 2, 5}
    full_res = run(root, EVERY)
    assert [h.to_dict() for h in res.hits] == [h.to_dict() for h in full_res.hits
                                               if h.rank == 1 and h.iteration in {0, 1, 2, 5}]
    assert run(root, EVERY, iterations={9}).hits == []


def test_where_selects_a_lines_nodes_the_weights_they_read_and_their_gradients(tmp_path, layout):
    lay = layout()
    root = make(tmp_path, iterations=2)
    line = _user_line(root, "x = self.fc1(x)")
    res = run(root, EVERY, where=f"train_user.py:{line}")
    want = {lay.reader("fc1.weight")[0], lay.reader("fc1.bias")[0], "fc1.weight", "fc1.bias",
            lay.gradient("fc1.weight"), lay.gradient("fc1.bias")}
    assert {h.node for h in res.hits} == want
    assert sorted(hit_keys(res)) == sorted((i, n) for i in (0, 1) for n in want)
    assert all(h.source == f"{os.path.dirname(root)}/train_user.py:{line}" for h in res.hits)


def test_node_glob_matches_the_name_or_the_parameter(tmp_path, layout):
    lay = layout()
    root = make(tmp_path, iterations=1)
    res = run(root, wp("tensor_too_large", max_gt=-1e30, node="fc1.*"))
    assert {h.node for h in res.hits} == {"fc1.weight", "fc1.bias", lay.gradient("fc1.weight"),
                                          lay.gradient("fc1.bias"), *lay.state("fc1.weight"), *lay.state("fc1.bias")}
    act = lay.activation()
    res = run(root, wp("tensor_too_large", max_gt=-1e30, node="*fc1_act-*"))
    assert {h.node for h in res.hits} == {act, lay.one(lay.by_op("SigmoidGrad"))}
    res = run(root, wp("weight_too_large", max_gt=-1e30, node="fc1.*"))
    assert {h.node for h in res.hits} == {"fc1.weight", "fc1.bias"}


def test_scope_prefix(tmp_path, layout):
    lay = layout()
    root = make(tmp_path, iterations=1)
    mm, _ = lay.reader("fc1.weight")
    scope = lay.graph.node(mm).scope
    # kernels under the scope, and the Parameters their kernels read (the data input too)
    res = run(root, wp("tensor_too_large", max_gt=-1e30, scope=scope))
    assert {h.node for h in res.hits} == {mm, lay.reader("fc1.bias")[0], "fc1.weight", "fc1.bias", lay.data}
    # every backward kernel sits under the last layer's Gradients scope
    res = run(root, wp("gradient_too_large", max_gt=-1e30, scope="Gradients/"))
    assert {h.node for h in res.hits} == {lay.gradient(w) for w in lay.weights}


# -- workers and cache -----------------------------------------------------------------------------
def _mixed_watchpoints():
    return preset("recommended") + [Watchpoint.parse(w) for w in (
        EVERY, "gradient_vanishing:abs_mean_lt=1e-9", "tensor_range:range_start_inclusive=-0.5,range_end_inclusive=0.5,range_percentage_gt=30",
        "tensor_unchanged:num_steps=2", "weight_update_ratio:large_threshold=0.01", "loss_not_decreasing:num_steps=1")]


def test_one_or_two_workers_give_identical_results(tmp_path):
    root = make(tmp_path, ranks=2, iterations=4)
    a = run(root, *_mixed_watchpoints(), jobs=1)
    b = run(root, *_mixed_watchpoints(), jobs=2)
    assert len(a.hits) > 100 and a.errors
    assert [h.to_dict() for h in a.hits] == [h.to_dict() for h in b.hits]
    assert [e.to_dict() for e in a.errors] == [e.to_dict() for e in b.errors]
    assert a.files_checked == b.files_checked > 0


def test_statistics_cache_reuse_and_invalidation(tmp_path, layout):
    lay = layout()
    g = lay.gradient("fc1.weight")
    root = make(tmp_path, plant=Plant().set(g, full(2.0 ** -30), it=1), iterations=3)
    cache_dir = str(tmp_path / "cache")
    wps = _mixed_watchpoints()

    def cached_scan(ws):
        return scan(open_dump(root), ws, jobs=1, cache=StatsCache.for_dump(root, cache_dir))

    cold = cached_scan(wps)
    assert cold.files_checked > 0 and (1, g) in hit_keys(cold, "gradient_vanishing")
    again = cached_scan(wps)
    assert again.files_checked == 0
    assert [h.to_dict() for h in again.hits] == [h.to_dict() for h in cold.hits]
    assert [e.to_dict() for e in again.errors] == [e.to_dict() for e in cold.errors]
    # another threshold: a new evaluation, every statistic from the cache
    other = [wp("gradient_vanishing", abs_mean_lt=2.0 ** -29)] + wps[1:]
    warm = cached_scan(other)
    assert warm.files_checked == 0
    assert [h.to_dict() for h in warm.hits] == [h.to_dict() for h in run(root, *other).hits]
    # one tensor rewritten with other values (same size, new mtime): only it is read again, for its own
    # statistics and for tensor_unchanged's two comparisons that involve it (2 reads each)
    path = tensor_file(root, 1, g.replace("/", "_"))
    st = os.stat(path)
    np.save(path, np.ones((4, 4), np.float32))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert os.path.getsize(path) == st.st_size
    changed = cached_scan(other)
    assert changed.files_checked == 1 + 2 * 2
    assert (1, g) not in hit_keys(changed, "gradient_vanishing")
    assert [h.to_dict() for h in changed.hits] == [h.to_dict() for h in run(root, *other).hits]


def test_cache_keys_ending_in_a_nul_byte_are_found_again(tmp_path):
    from debugger.stats.cache import ExtraKey, _digest
    from debugger.stats.core import tensor_stats
    ident = next(f"f{i}" for i in range(100000) if _digest(f"f{i}").endswith(b"\0"))
    key = next(k for k in (ExtraKey(f"f{i}", "range", (0, 1)) for i in range(100000)) if _digest(k.text()).endswith(b"\0"))
    c = StatsCache(str(tmp_path))
    s = tensor_stats(np.arange(4, dtype=np.float32))
    c.put(ident, s)
    c.put_extra(key, 3.0)
    c.flush()
    again = StatsCache(str(tmp_path))
    assert again.get(ident) == s and again.get_extra(key) == 3.0


# -- the CLI -------------------------------------------------------------------------------------------
CONFIG = [{"name": "gradient_vanishing", "params": {"abs_mean_lt": 2.0 ** -29}},
          {"name": "tensor_all_zero"},
          {"name": "tensor_too_large", "params": {"max_gt": 1e30}, "node": "fc1.*"}]
YAML = """\
watchpoints:
  - name: gradient_vanishing
    params: {abs_mean_lt: 1.862645149230957e-09}
  - name: tensor_all_zero
  - name: tensor_too_large
    params:
      max_gt: 1.0e+30
    node: fc1.*
"""
HIT_KEYS = {"watchpoint", "rank", "graph", "iteration", "node", "kind", "param", "io", "slot", "actual", "threshold",
            "source", "op_type", "position", "watchpoint_index", "collective", "shards", "note"}
ERR_KEYS = {"watchpoint", "rank", "graph", "iteration", "node", "error", "watchpoint_index"}


@pytest.fixture
def cli_dump(tmp_path, layout):
    lay = layout()
    g = lay.gradient("fc1.weight")
    root = make(tmp_path, plant=Plant().set(g, full(2.0 ** -30), it=1).set(lay.activation(), full(0.0), it=2))
    return root, lay


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_config_files_through_the_cli(tmp_path, cli_dump, fmt):
    if fmt == "yaml":
        pytest.importorskip("yaml")     # an extra (pip install -e '.[yaml]'); the CLI says so without it
    root, lay = cli_dump
    assert 2.0 ** -29 == 1.862645149230957e-09
    cfg = tmp_path / f"wps.{fmt}"
    cfg.write_text(json.dumps(CONFIG) if fmt == "json" else YAML)
    r = run_cli("scan", root, "--config", str(cfg), "--json", "--jobs", "1", "--no-cache")
    assert r.code == 1, r.err
    want = run(root, *[Watchpoint.from_dict(d) for d in CONFIG]).to_dict()
    assert r.json == json.loads(json.dumps({**want, "warnings": [], "verdict": "found"}))
    assert [(h["watchpoint"], h["iteration"], h["node"]) for h in r.json["hits"]] == [
        ("gradient_vanishing", 1, lay.gradient("fc1.weight")), ("tensor_all_zero", 2, lay.activation())]


def test_scan_json_shape(cli_dump):
    root, lay = cli_dump
    r = run_cli("scan", root, "--watch", "gradient_vanishing:abs_mean_lt=1.862645149230957e-09",
                "--watch", "weight_not_changed", "--json", "--jobs", "1")
    assert r.code == 1, r.err
    out = r.json
    assert set(out) == {"dump", "ranks", "iterations", "watchpoints", "hits", "errors", "skipped", "first",
                        "warnings", "skipped_steps", "levels", "level_notes", "coverage", "verdict"}
    assert out["verdict"] == "found"
    cov = out["coverage"]
    assert cov["status"] == "complete" and cov["unanswered"] == [] and cov["swept"] > 0
    assert [(c["watchpoint"], c["status"], c["checked"] > 0, c["iterations"]) for c in cov["watchpoints"]] == [
        ("gradient_vanishing", "complete", True, [0, 1, 2]), ("weight_not_changed", "complete", True, [0, 1, 2])]
    assert out["levels"] == {} and out["level_notes"] == []      # every operator was recorded
    assert out["dump"] == root and out["ranks"] == [0] and out["iterations"] == [0, 1, 2]
    assert out["watchpoints"] == [{"name": "gradient_vanishing", "params": {"abs_mean_lt": 2.0 ** -29}},
                                  {"name": "weight_not_changed", "params": {"rtol": 1e-5, "atol": 1e-8}}]
    assert out["hits"] and out["first"] == out["hits"][0]
    h = out["first"]
    assert set(h) == HIT_KEYS
    assert h == {"watchpoint": "gradient_vanishing", "rank": 0, "graph": 0, "iteration": 1,
                 "node": lay.gradient("fc1.weight"), "kind": "gradient", "param": "fc1.weight", "io": "output",
                 "slot": 0, "actual": {"abs_mean_lt": 2.0 ** -30}, "threshold": {"abs_mean_lt": 2.0 ** -29},
                 "source": h["source"], "op_type": "MatMul", "position": lay.position(lay.gradient("fc1.weight")),
                 "watchpoint_index": 0, "collective": False, "shards": [], "note": ""}
    assert h["source"].endswith("/train_user.py:14")
    for e in out["errors"]:
        assert set(e) == ERR_KEYS
    # the weights' first iteration compares with what the forward kernels read: no error records
    assert out["errors"] == []


def test_exit_codes(tmp_path, cli_dump):
    root, _ = cli_dump
    r = run_cli("scan", root, "--watch", "tensor_too_large:max_gt=1e30", "--jobs", "1")
    assert r.code == 0 and "No watchpoint hit." in r.out
    r = run_cli("scan", root, "--watch", "tensor_all_zero", "--jobs", "1")
    assert r.code == 1 and "First problem: tensor_all_zero at iteration 2" in r.out
    bad_cfg = tmp_path / "bad.yaml"
    bad_cfg.write_text("watchpoints: [unclosed\n")
    not_list = tmp_path / "obj.json"
    not_list.write_text('{"name": "tensor_all_zero"}')
    missing = str(tmp_path / "nope")
    for args, msg in [
        (("--watch", "no_such_condition"), "unknown condition"),
        (("--watch", "gradient_vanishing:abs_mean_lt=abc"), "must be a float"),
        (("--iterations", "5-2"), "bad iteration range"),
        (("--config", str(bad_cfg)), str(bad_cfg)),
        (("--config", str(not_list)), "expected a list of watchpoints"),
        (("--config", str(tmp_path / "absent.json")), "cannot read watchpoint config"),
        (("--where", "train_user.py:1"), "no node was created by train_user.py:1"),
    ]:
        r = run_cli("scan", root, *args, "--jobs", "1")
        assert r.code == 2 and msg in r.err and r.err.startswith("tdbg: error: "), (args, r.err)
    r = run_cli("scan", missing)
    assert r.code == 2 and missing in r.err


# -- broken input --------------------------------------------------------------------------------------
@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_a_corrupt_tensor_file_is_an_error_record_and_the_scan_goes_on(tmp_path, layout, damage):
    lay = layout()
    g1, g2 = lay.gradient("fc1.weight"), lay.gradient("fc2.weight")
    root = make(tmp_path, plant=Plant().set(g2, lambda d: np.zeros_like(d)))
    path = tensor_file(root, 1, g1.replace("/", "_"))
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2] if damage == "truncate" else b"\x00garbage" * (len(data) // 8))
    res = run(root, "gradient_vanishing", "tensor_all_zero", "overflow")
    # a zero gradient from the start (its momentum buffer stays zero too, but optimizer state is not
    # checked by tensor_all_zero: it is legitimately zero in healthy runs)
    assert sorted(set(hit_keys(res))) == sorted((i, g2) for i in range(3))
    bad = [(e.watchpoint, e.iteration, e.node) for e in res.errors]
    assert sorted(bad) == sorted([("gradient_vanishing", 1, g1), ("tensor_all_zero", 1, g1), ("overflow", 1, g1)])
    assert all(e.error.startswith(path + ": ") for e in res.errors)
    assert "truncated" in res.errors[0].error if damage == "truncate" else "not an .npy file" in res.errors[0].error


# -- memory ----------------------------------------------------------------------------------------------
_MEASURE = textwrap.dedent("""
    import json, sys
    from debugger import open_dump
    from debugger.watch.engine import scan
    from debugger.watch.registry import Watchpoint, preset

    def status(key):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))

    wps = preset("recommended") + [Watchpoint.parse(w) for w in (
        "weight_too_large:max_gt=1e30", "tensor_range:range_start_inclusive=0,range_percentage_gt=99",
        "weight_update_ratio", "tensor_overflow", "activation_saturation", "activation_dead_relu")]
    scan(open_dump(sys.argv[1]), wps, jobs=1)          # warm up every code path on a small dump
    big = open_dump(sys.argv[2])
    big.rank(0).index
    with open("/proc/self/clear_refs", "w") as f:      # reset the peak (VmHWM) to the current RSS
        f.write("5")
    before = status("VmRSS")
    res = scan(big, wps, jobs=1)
    print(json.dumps({"growth": status("VmHWM") - before, "files": res.files_checked,
                      "hits": [[h.watchpoint, h.iteration, h.node, h.io, h.actual] for h in res.hits],
                      "errors": [[e.watchpoint, e.iteration, e.node, e.error] for e in res.errors]}))
""")


def test_peak_memory_of_a_scan_over_a_large_tensor_is_a_few_chunks(tmp_path, layout):
    """A 64 MiB weight (twice, so it is also compared with its previous value) must not be held in
    memory: the peak resident set grows by less than 3 chunks of float64 (6 MiB here).

    Measured in a fresh process through /proc (VmHWM after resetting it with clear_refs):
    getrusage's ru_maxrss would report the peak of the process that started it, which is larger."""
    if not os.access("/proc/self/clear_refs", os.W_OK):
        pytest.skip("needs Linux /proc/self/clear_refs to reset the peak RSS")
    lay = layout()
    small = make(tmp_path, "small", iterations=2)
    big = make(tmp_path, "big", iterations=3)
    side = 4096                      # 4096 x 4096 float32 = 64 MiB
    for it in (1, 2):
        a = np.full((side, side), 0.25 * it, np.float32)
        np.save(tensor_file(big, it, "fc1_weight"), a)
    # and a 64 MiB activation input: 4096 samples of 4096 units, for the per-unit rules (all saturated)
    act = lay.activation()
    np.save(tensor_file(big, 1, act.replace("/", "_"), "input", 0), np.full((side, side), 32.0, np.float32))
    del a
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))] + sys.path))
    p = subprocess.run([sys.executable, "-c", _MEASURE, small, big], capture_output=True, text=True, env=env,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    bound = 3 * CHUNK * 8
    # the big tensors were read: the weight's statistics at 1 and 2, its comparison of 2 with 1 (1 with 0
    # differs in shape: an error record), the activation's units
    assert ["tensor_range", 1, "fc1.weight", "output", {"range_percentage_gt": 100.0}] in got["hits"]
    assert ["tensor_range", 2, "fc1.weight", "output", {"range_percentage_gt": 100.0}] in got["hits"]
    assert ["weight_update_ratio", 2, "fc1.weight", "output", {"small_threshold": 0.0}] not in got["hits"]
    assert not [e for e in got["errors"] if e[1] == 2 and e[2] == "fc1.weight"]
    assert {(e[0], e[1]) for e in got["errors"] if e[2] == "fc1.weight"} == {
        ("weight_not_changed", 1), ("weight_change_too_large", 1), ("weight_update_ratio", 1)}
    assert all("differs from the previous" in e[3] for e in got["errors"] if e[2] == "fc1.weight")
    assert ["activation_saturation", 1, act, "input", {"threshold_layer": 100.0}] in got["hits"]
    assert got["growth"] < bound, f"peak RSS grew by {got['growth'] / 2**20:.1f} MiB (bound {bound / 2**20:.0f} MiB)"


def test_many_ranks_are_scanned_a_chunk_at_a_time_and_forgotten(tmp_path, monkeypatch):
    """A scan of more ranks than RANKS_AT_ONCE lists, scans and forgets them a chunk at a time: its hits are
    those of the scan holding every rank, no rank holds its listing afterwards, and no step is left in a
    reference cycle for the paused collector to miss (a scan's memory is then bounded whatever the rank count)."""
    import gc

    from debugger.watch.rules import Step

    monkeypatch.setenv("TDBG_RANKS_AT_ONCE", "4")      # ten ranks take the path a thousand take
    root = make(tmp_path, ranks=10, iterations=2)
    dump = open_dump(root)
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        chunked = run(dump, EVERY, "weight_change_too_small")
        gc.collect()
        cycles = [o for o in gc.garbage if isinstance(o, Step)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert cycles == []
    assert [r.rank for r in dump.ranks if r._local is not None or "listing" in r.reader.__dict__] == []
    monkeypatch.setenv("TDBG_RANKS_AT_ONCE", str(1 << 20))
    whole = run(root, EVERY, "weight_change_too_small")
    assert len(chunked.hits) > 50 and [h.to_dict() for h in chunked.hits] == [h.to_dict() for h in whole.hits]
    assert chunked.errors == whole.errors   # (files_checked counts reads: batched otherwise, a file may be read twice)


def test_ranks_scanned_on_forked_workers_equal_one_process(tmp_path, layout, monkeypatch):
    """With more ranks than RANKS_AT_ONCE and a local pool, each chunk of ranks is scanned whole by a forked
    worker: hits (a NaN planted on a rank of the last chunk), error records (a corrupt file), checks skipped,
    the ranks' warnings (a stray file) and the statistics handed back to the parent's cache are those of the
    scan in one process."""
    from debugger.watch.engine import scan_warnings

    monkeypatch.setenv("TDBG_RANKS_AT_ONCE", "4")      # ten ranks take the path a thousand take
    lay = layout()
    g1 = lay.gradient("fc1.weight")
    ranks = 10
    root = make(tmp_path, ranks=ranks, iterations=2, plant=Plant().set(g1, full(np.nan), it=1, rank=ranks - 2))
    with open(tensor_file(root, 1, lay.gradient("fc2.weight").replace("/", "_"), rank=7), "wb") as f:
        f.write(b"\x00garbage" * 8)
    with open(os.path.join(root, "rank_3", "Net", "0", "1", "stray.npy"), "wb") as f:
        f.write(b"not a tensor file name")
    watch = (EVERY, "weight_change_too_small", "overflow", "activation_saturation")
    one_dump = open_dump(root)
    one = run(one_dump, *watch)
    cache = StatsCache(str(tmp_path / "cache"))
    forked_dump = open_dump(root)
    two = run(forked_dump, *watch, jobs=2, cache=cache)
    assert [h.to_dict() for h in two.hits] == [h.to_dict() for h in one.hits]
    assert ("overflow", ranks - 2, 1, g1) in {(h.watchpoint, h.rank, h.iteration, h.node) for h in two.hits}
    assert two.errors == one.errors and any(e.rank == 7 for e in two.errors)
    assert [s.to_dict() for s in two.skipped] == [s.to_dict() for s in one.skipped]
    assert scan_warnings(forked_dump, two) == scan_warnings(one_dump, one)
    assert any("stray.npy" in w for w in scan_warnings(forked_dump, two))
    # the workers listed the ranks and told their warnings: this process never listed one
    assert [r.rank for r in forked_dump.ranks if r._local is not None or "listing" in r.reader.__dict__] == []
    again = StatsCache(str(tmp_path / "cache"))
    third = run(root, "tensor_too_large:max_gt=-1e29", jobs=1, cache=again)   # another request, the same statistics
    assert len(hits(third, "tensor_too_large")) == len(hits(one, "tensor_too_large"))
    assert again.misses == 1 and again.hits > 100     # missed: the corrupt file, which has no statistics to keep


def test_one_rank_split_by_iteration_on_forked_workers_equals_one_process(tmp_path, layout, monkeypatch):
    """A rank with many files is listed here, then its iterations are scanned in runs by forked workers: the
    checks against the previous value at the runs' edges (a weight that stops changing at iteration 4, of 8),
    a NaN and a zero gradient give the hits and errors of one process."""
    from debugger.watch import run as run_mod

    lay = layout()
    b = full(0.5)
    seq = [b * (i + 2) for i in range(4)] + [b * 5] * 4
    plant = (Plant().weight(lay, "fc1.weight", before=b, seq=seq)
             .set(lay.gradient("fc2.weight"), lambda d: np.full_like(d, np.nan), it=6)
             .set(lay.gradient("fc1.weight"), lambda d: np.zeros_like(d), it=3))
    root = make(tmp_path, plant=plant, iterations=8)
    watch = (EVERY, "weight_not_changed", "weight_update_ratio", "overflow", "tensor_all_zero", "gradient_vanishing")
    one = run(root, *watch)
    monkeypatch.setattr(run_mod, "SPLIT_FILES", 0)
    split_dump = open_dump(root)
    split = run(split_dump, *watch, jobs=2)
    assert [h.to_dict() for h in split.hits] == [h.to_dict() for h in one.hits]
    assert (4, "fc1.weight") in hit_keys(split, "weight_not_changed")
    assert {"overflow", "tensor_all_zero"} <= {h.watchpoint for h in split.hits}
    assert split.errors == one.errors and [s.to_dict() for s in split.skipped] == [s.to_dict() for s in one.skipped]
    assert split_dump.rank(0).indexed
