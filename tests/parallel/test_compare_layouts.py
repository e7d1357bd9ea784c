"""compare under parallel layouts, on tdbg-h5 dumps written with DumpWriter whose shards are cut with numpy:
ranks compared only with replicas of their shard and collectives within their group; runs of different
layouts compared as logical tensors; tolerances that follow the dtypes."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from clirun import run_cli
from debugger.compare import compare_ranks
from debugger.compare.logical_runs import compare_logical
from debugger.compare.precision import thresholds_for
from debugger.compare.grades import GradeThresholds
from debugger.compare.runs import compare_runs
from debugger.formats.parallel import FLAT, REPLICATE, RankLayout, ShardRecord
from layout_dumps import mesh, rows, shard_run, truth, write_rank

TP_SHAPES = {"up.weight": (12, 8), "up.bias": (12,)}
DPxTP = mesh(("dp", "tp"), (2, 2))


def _dp_tp(rank: int) -> RankLayout:
    """DDP over "dp" x tensor parallel over "tp": up.weight split by rows on tp, replicated on dp."""
    tp = rank % 2
    up = ShardRecord("m", (REPLICATE, "Shard(0)"), (12, 8), rows((12, 8), 6 * tp, 6 * tp + 6))
    bias = ShardRecord("m", (REPLICATE, REPLICATE), (12,))
    return RankLayout({"m": DPxTP}, {"up.weight": up, "up.bias": bias})


def _per_group(logical: list[dict[str, np.ndarray]], ranks: range, group_of: Any) -> dict:
    """Each group's own all-reduce result and loss (different data shards per data-parallel group), and
    each rank's own activation."""
    rng = np.random.default_rng(7)
    by_group: dict = {}
    out: dict = {}
    for r in ranks:
        out[r] = {}
        for i in range(len(logical)):
            g = by_group.setdefault((group_of(r), i), {"allreduce": rng.standard_normal((4, 4)).astype(np.float32),
                                                        "loss": np.float32(1 + rng.random())})
            out[r][i] = {**g, "mm": rng.standard_normal((4, 4)).astype(np.float32),
                         "reducescatter": rng.standard_normal((2, 4)).astype(np.float32)}
    return out


def _dp_tp_run(root: str, plant: float = 0.0, layouts: bool = True) -> str:
    logical = truth(1, TP_SHAPES)
    per_rank = _per_group(logical, range(4), lambda r: r // 2)
    if plant:                                        # rank 3's shard (rows 6-11) changed at iteration 1
        for r in (3,):
            local = logical[1]["up.weight"][6:12].copy()
            local[1, 0] += plant
            per_rank[r][1]["up.weight"] = local
    lays = {r: _dp_tp(r) for r in range(4)}
    groups = {r: DPxTP.group(r, "tp") for r in range(4)}
    return shard_run(root, logical, lays, per_rank=per_rank, groups=groups, recorded=layouts)


def test_2d_mesh_compares_each_shard_with_its_replicas_and_collectives_within_their_group(tmp_path):
    res = compare_ranks(_dp_tp_run(str(tmp_path / "d")))
    counted = [p for p in res.pairs if p.counted]
    assert res.exit_code == 0 and res.first_divergence is None, [p.reason for p in res.errors]
    sharded = {(p.a.rank, p.b.rank) for p in counted if p.param == "up.weight"}
    assert sharded == {(2, 0), (3, 1)}              # the dp replicas of each TP shard, never shard 0 vs shard 1
    assert {(p.a.rank, p.b.rank) for p in counted if p.param == "up.bias"} == {(1, 0), (2, 0), (3, 0)}
    # the all-reduce over "tp" and the loss computed from it: within the group only (0-1, 2-3)
    assert {(p.a.rank, p.b.rank) for p in counted if p.node in ("allreduce", "loss")} == {(1, 0), (3, 2)}
    assert not any(p.node in ("mm", "x") for p in counted)
    assert all(p.grade == "pass" for p in counted)


def test_2d_mesh_names_the_diverging_replica_by_parameter_rank_and_shard(tmp_path):
    root = _dp_tp_run(str(tmp_path / "d"), plant=1.0)
    res = compare_ranks(root)
    f = res.first_divergence
    assert {(p.iteration, p.a.rank, p.b.rank, p.node) for p in res.errors} == {(1, 3, 1, "up.weight")}
    assert (f.iteration, f.node, f.kind, f.a.rank, f.b.rank) == (1, "up.weight", "weight", 3, 1)
    assert f.shard == "shard [6:12, 0:8] of [12, 8], dp=Replicate(), tp=Shard(0)"
    assert f.metrics.max_abs_err == pytest.approx(1.0)
    cli = run_cli("compare", root, "--ranks", "--no-cache")
    assert cli.code == 1
    assert ("First divergence: iteration 1, rank 3 vs 1: up.weight (shard [6:12, 0:8] of [12, 8], dp=Replicate(), "
            "tp=Shard(0)) output 0") in cli.out
    js = run_cli("compare", root, "--ranks", "--no-cache", "--json").json
    assert js["first_divergence"]["shard"] == f.shard and js["first_divergence"]["a"]["rank"] == 3


def test_without_the_layout_the_same_files_look_divergent(tmp_path):
    """The control: the data-parallel rule compares rank 1's shard with rank 0's and the groups' all-reduces."""
    res = compare_ranks(_dp_tp_run(str(tmp_path / "d"), layouts=False))
    assert {p.node for p in res.errors} >= {"up.weight", "allreduce"}


HEAD = {"head.weight": (3, 8)}
FSDP = mesh(("dp",), (2,))


def _fsdp2(rank: int) -> RankLayout:
    """FSDP2 on 2 ranks: 3 rows cut unevenly, 2 and 1."""
    lo, hi = ((0, 2), (2, 3))[rank]
    return RankLayout({"dp": FSDP}, {"head.weight": ShardRecord("dp", ("Shard(0)",), (3, 8), rows((3, 8), lo, hi))})


def _fsdp2_run(root: str, logical: list[dict[str, np.ndarray]], plant: float = 0.0, saved: str = "values") -> str:
    per_rank = _per_group(logical, range(2), lambda r: 0)
    for r in per_rank.values():
        for it in r.values():
            del it["loss"]                           # each rank's loss is the whole batch's (their mean: the same)
    if plant:
        local = logical[1]["head.weight"][2:3].copy()
        local[0, 5] += plant
        per_rank[1][1]["head.weight"] = local
    return shard_run(root, logical, {0: _fsdp2(0), 1: _fsdp2(1)}, per_rank=per_rank,
                     groups={0: (0, 1), 1: (0, 1)}, saved=saved)


def _single(root: str, logical: list[dict[str, np.ndarray]], saved: str = "values") -> str:
    return shard_run(root, logical, {0: None}, saved=saved)


def test_fsdp_shards_are_never_compared_with_each_other(tmp_path):
    logical = truth(2, HEAD)
    res = compare_ranks(_fsdp2_run(str(tmp_path / "d"), logical))
    assert res.exit_code == 0
    assert not [p for p in res.pairs if p.param == "head.weight"]
    assert {p.node for p in res.pairs if p.counted} == {"allreduce", "loss"}


def test_runs_of_other_layouts_compare_logical_tensors(tmp_path):
    """FSDP2 (uneven Shard(0)) against one process holding the whole tensors: equal, tensor by tensor."""
    logical = truth(2, HEAD)
    a = _fsdp2_run(str(tmp_path / "a"), logical)
    b = _single(str(tmp_path / "b"), logical)
    res = compare_logical(a, b)
    assert res.exit_code == 0 and res.first_divergence is None
    got = {(p.iteration, p.kind, p.node) for p in res.pairs}
    assert got == {(i, k, n) for i in range(2) for k, n in (("weight", "head.weight"), ("gradient", "head.weight.grad"),
                                                            ("optimizer_state", "exp_avg.head.weight"), ("loss", "loss"))}
    assert all(p.outcome.identical for p in res.pairs)
    cli = run_cli("compare", a, b, "--no-cache", "--json")       # other rank counts: logical by default
    assert cli.code == 0 and cli.json["mode"] == "logical"
    assert run_cli("compare", a, b, "--no-cache", "--no-logical", "--json").json["mode"] == "runs"


def test_a_planted_fsdp_shard_is_named_by_parameter_iteration_and_rank(tmp_path):
    logical = truth(2, HEAD)
    a = _fsdp2_run(str(tmp_path / "a"), logical, plant=1.0)
    b = _single(str(tmp_path / "b"), logical)
    res = compare_logical(a, b)
    f = res.first_divergence
    assert {(p.iteration, p.node) for p in res.errors} == {(1, "head.weight")}
    assert (f.iteration, f.node, f.kind, f.a.rank) == (1, "head.weight", "weight", 1)
    assert f.shard == "shard [2:3, 0:8] of [3, 8], dp=Shard(0) on rank 1"
    cli = run_cli("compare", a, b, "--no-cache")
    assert cli.code == 1
    assert "First divergence: iteration 1: head.weight (weight, logical)\n  shard: shard [2:3, 0:8] of [3, 8]" in cli.out


FC = {"fc.weight": (8, 6)}


def _fsdp1(rank: int) -> RankLayout:
    """FSDP1's flat parameter: elements 0-29 on rank 0, 30-47 on rank 1."""
    flat = ((0, 30), (30, 48))[rank]
    return RankLayout({"dp": FSDP}, {"fc.weight": ShardRecord("dp", (FLAT,), (8, 6), flat=flat)})


@pytest.mark.parametrize("saved", ["values", "statistics"])
def test_fsdp1_flat_shards_against_one_process(tmp_path, saved):
    logical = truth(3, FC)
    planted = [dict(it) for it in logical]
    planted[1] = {**planted[1], "fc.weight": planted[1]["fc.weight"].copy()}
    planted[1]["fc.weight"][7, 5] += 2.0           # element 47: rank 1's part (msprobe: max_abs_err > 1)
    b = _single(str(tmp_path / "b"), logical, saved)
    for name, run, want in (("same", logical, 0), ("planted", planted, 1)):
        a = shard_run(str(tmp_path / name), run, {0: _fsdp1(0), 1: _fsdp1(1)}, saved=saved)
        res = compare_logical(a, b)
        assert res.exit_code == want, [(p.node, p.reason) for p in res.errors]
        if want:
            f = res.first_divergence
            assert (f.iteration, f.node) == (1, "fc.weight")
            if saved == "values":
                assert f.shard == "elements [30:48] of [8, 6] flattened, dp=Flat on rank 1" and f.a.rank == 1
            else:   # statistics of the whole tensor on side b: the shard cannot be told
                assert "needs values on both sides" in f.shard


def _bf16(a: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (nearest, ties to even), kept as float32 as the recorder stores them."""
    bits = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


def test_bfloat16_against_float32_is_graded_at_bfloat16_precision(tmp_path):
    logical = truth(4, FC)
    rounded = [{k: _bf16(v) for k, v in it.items()} for it in logical]
    b = _single(str(tmp_path / "b"), logical, "statistics")
    a16 = shard_run(str(tmp_path / "a16"), rounded, {0: None}, saved="statistics", dtype="bfloat16")
    a32 = shard_run(str(tmp_path / "a32"), rounded, {0: None}, saved="statistics")
    worst = max(abs(float(np.max(r[k])) - float(np.max(t[k]))) / float(np.sqrt(np.mean(t[k] ** 2)))
                for r, t in zip(rounded, logical) for k in ("fc.weight",))
    assert 1e-3 < worst < 16 * 2 ** -8        # above float32's stat_error, within bfloat16's
    res16 = compare_runs(a16, b)
    assert res16.exit_code == 0
    assert all(p.precision == "bfloat16" for p in res16.pairs if p.param == "fc.weight")
    assert any("graded at bfloat16 precision" in p.reason for p in res16.pairs)
    assert compare_runs(a32, b).exit_code == 1     # the same values said to be float32: rounding is a divergence
    planted = [dict(it) for it in rounded]
    planted[1] = {**planted[1], "fc.weight": planted[1]["fc.weight"] + 1.0}
    a16p = shard_run(str(tmp_path / "a16p"), planted, {0: None}, saved="statistics", dtype="bfloat16")
    res = compare_runs(a16p, b)
    assert (res.first_divergence.iteration, res.first_divergence.node) == (1, "fc.weight")


def test_precision_thresholds():
    th = GradeThresholds()
    assert thresholds_for(th, None) is th and thresholds_for(th, "float32") is th
    bf = thresholds_for(th, "bfloat16")
    assert (bf.stat_warn, bf.stat_error, bf.abs_warn, bf.ratio_warn) == (2 ** -8, 16 * 2 ** -8, 2 ** -8, 0.0)
    fp = thresholds_for(th, "float16")
    assert fp.stat_error == 16 * 2 ** -11 and fp.ratio_warn == th.ratio_warn


def test_logical_flags_are_for_two_dumps(tmp_path):
    root = _single(str(tmp_path / "b"), truth(5, FC))
    cli = run_cli("compare", root, "--ranks", "--logical")
    assert cli.code == 2 and "--logical" in cli.err


def test_a_tensor_a_replica_did_not_dump_is_missing(tmp_path):
    """Rank 2 (the dp replica of rank 0's TP shard) without its exp_avg.up.weight: missing on a, against rank 0."""
    logical = truth(1, TP_SHAPES)
    per_rank = _per_group(logical, range(4), lambda r: r // 2)
    lays = {r: _dp_tp(r) for r in range(4)}
    root = shard_run(str(tmp_path / "d"), logical, {r: lays[r] for r in (0, 1, 3)}, per_rank=per_rank,
                     groups={r: DPxTP.group(r, "tp") for r in range(4)})
    its = []
    for i, full in enumerate(logical):
        local = {n: (v[0:6] if n.endswith("up.weight") or n == "up.weight.grad" else v) for n, v in full.items()}
        local.update(per_rank[2][i])
        del local["exp_avg.up.weight"]
        its.append(local)
    write_rank(root, 2, its, layout=lays[2], group=DPxTP.group(2, "tp"))
    res = compare_ranks(root)
    missing = {(p.iteration, p.a.rank, p.b.rank, p.node, p.reason) for p in res.pairs if p.missing}
    assert missing == {(i, 2, 0, "exp_avg.up.weight", "missing on a") for i in range(2)}
    assert res.exit_code == 1


def test_per_rank_collectives_are_stored_and_never_compared(tmp_path):
    """A reduce-scatter's per_rank flag survives tdbg-h5 (its outputs differ by design); a graph file written
    before the column existed reads it as False."""
    import h5py
    from debugger import open_dump
    logical = truth(2, HEAD)
    root = _fsdp2_run(str(tmp_path / "d"), logical)
    assert open_dump(root).rank(0).graphs[0].record_of("reducescatter").per_rank
    assert not [p for p in compare_ranks(root).pairs if p.node == "reducescatter"]
    for r in (0, 1):
        with h5py.File(str(tmp_path / "d" / f"rank_{r}" / "graph_0.h5"), "r+") as f:
            del f["nodes/per_rank"]
    assert not open_dump(root).rank(0).graphs[0].record_of("reducescatter").per_rank


def test_the_first_logical_divergence_follows_the_iteration_not_the_ranks(tmp_path):
    """Pipeline stages: rank 0 holds inp.weight, rank 1 head.weight and the loss. A loss that differs comes
    before every gradient, state and weight of its iteration, whichever rank holds them."""
    shapes = {"inp.weight": (4, 8), "head.weight": (3, 4)}
    logical = truth(6, shapes)
    stage = {r: RankLayout({}, {}, stage=r, stages=2) for r in (0, 1)}

    def run(name: str, loss_shift: float, grad_shift: float) -> str:
        root = str(tmp_path / name)
        for r, mine in ((0, "inp.weight"), (1, "head.weight")):
            its = []
            for it in logical:
                local = {n: v for n, v in it.items() if n.endswith(mine) or n.startswith(mine) or
                         n in ("x", "mm", "allreduce", "reducescatter")}
                local[f"{mine}.grad"] = it[f"{mine}.grad"] + (grad_shift if r == 0 else 0)
                if r == 1:
                    local["loss"] = it["loss"] + loss_shift
                its.append(local)
            write_rank(root, r, its, layout=stage[r])
        return root

    base = run("b", 0.0, 0.0)
    res = compare_logical(run("a", 5.0, 5.0), base)
    f = res.first_divergence
    assert (f.iteration, f.node, f.kind, f.a.rank) == (0, "loss", "loss", 1)
    assert {p.node for p in res.errors} == {"loss", "inp.weight.grad"}


def test_statistics_name_the_shard_against_the_same_sharding(tmp_path):
    """Statistics only on both sides, sharded alike (--logical on two FSDP2 runs): the shard whose statistics
    differ is named; against one process (whole-tensor statistics only) it cannot be, and says so."""
    logical = truth(2, HEAD)
    a = _fsdp2_run(str(tmp_path / "a"), logical, plant=1.0, saved="statistics")
    b = _fsdp2_run(str(tmp_path / "b"), logical, saved="statistics")
    f = compare_logical(a, b).first_divergence
    assert (f.iteration, f.node, f.a.rank, f.shard) == (1, "head.weight", 1, "shard [2:3, 0:8] of [3, 8], dp=Shard(0) on rank 1")
    f = compare_logical(a, _single(str(tmp_path / "c"), logical, "statistics")).first_divergence
    assert (f.iteration, f.node) == (1, "head.weight") and "needs values on both sides" in f.shard
