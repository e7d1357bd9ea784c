"""Logical tensors in the model: a sharded parameter, its gradient and its optimizer state read whole,
assembled from the shards on every rank, in real tdbg-h5 dumps with their layouts; truth from numpy."""
from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import pytest

from debugger.convert import convert
from debugger.formats.parallel import FLAT, REPLICATE, MeshRecord, ShardRecord
from debugger.model import open_dump, shard_pieces
from debugger.model.logical import replica_groups
from debugger.model.shards import ShardIndex

from clirun import run_cli
from shard_dumps import Job, local_part, one_dim, write_job

MESH2 = {"dp": MeshRecord(("dp",), (2,), (0, 1))}


def _all_nodes(dump: Any, it: int = 1) -> dict:
    return {(r.rank, t.node): t for r in dump.ranks for t in r.tensors(0, it)}


def _check_whole(dump: Any, job: Job, name: str, ranks: list[int], it: int = 1,
                 holders: list[int] | None = None) -> None:
    """Every kind of ``name`` reads as the full tensor on every rank holding a part, with its own part kept."""
    shards = job.params[name][1]
    for node in (name, f"{name}.grad", f"exp_avg.{name}"):
        full = job.truth[(it, node)]
        for r in ranks:
            t = dump.rank(r).tensor(0, it, node)
            assert t.is_logical and t.shape == full.shape
            np.testing.assert_array_equal(t.value(), full)
            assert t.shard is not None and t.shard.rank == r and t.shard.shard == shards[r]
            np.testing.assert_array_equal(np.asarray(t.shard.source.array()).reshape(-1),
                                          local_part(full, shards[r]).reshape(-1))
            assert sorted(p.rank for p in t.pieces) == sorted(holders or shards)
    step = dump.rank(ranks[0]).tensor(0, it, f"step.{name}")      # a scalar state is nobody's shard
    assert not step.is_logical and step.shard is None and step.shape == ()


def test_shard0_uneven_rows(tmp_path: Any) -> None:
    """3 rows on 2 ranks (torch's chunks: 2 and 1): the whole (3, 4) tensor on both ranks."""
    job = write_job(str(tmp_path / "d"), Job(MESH2, {"head.weight": ((3, 4), one_dim((3, 4), 0, 2))}, [0, 1]))
    dump = open_dump(str(tmp_path / "d"))
    _check_whole(dump, job, "head.weight", [0, 1])
    act0, act1 = dump.rank(0).tensor(0, 1, "act"), dump.rank(1).tensor(0, 1, "act")
    assert not act0.is_logical and act0.shard is None and float(act1.value()[0, 0]) == 2.0   # each rank's own
    local = {r: {t.node: t for t in dump.rank(r).local_index[(0, 1)]} for r in (0, 1)}
    assert (local[0]["head.weight"].shape, local[1]["head.weight"].shape) == ((2, 4), (1, 4))   # as stored
    assert not local[1]["head.weight"].is_logical


def test_shard1_columns(tmp_path: Any) -> None:
    job = write_job(str(tmp_path / "d"), Job(MESH2, {"up.weight": ((4, 6), one_dim((4, 6), 1, 2))}, [0, 1]))
    _check_whole(open_dump(str(tmp_path / "d")), job, "up.weight", [0, 1])


def test_strided_runs_two_per_dimension(tmp_path: Any) -> None:
    """DTensor's strided sharding (FSDP x TP): each rank holds two runs of rows, interleaved."""
    shards = one_dim((4, 3), 0, 2, runs=[[(0, 1), (2, 3)], [(1, 2), (3, 4)]], placement="_StridedShard(dim=0, sf=2)")
    job = write_job(str(tmp_path / "d"), Job(MESH2, {"w": ((4, 3), shards)}, [0, 1]))
    _check_whole(open_dump(str(tmp_path / "d")), job, "w", [0, 1])


def test_fsdp1_flat_ranges_one_empty(tmp_path: Any) -> None:
    """FSDP1's flat parameter: rank 0 holds all 6 elements of a (2, 3) weight, rank 1 an empty range; and a
    (5,) bias split 3 + 2 over the flat parameter."""
    w = {0: ShardRecord("dp", (FLAT,), (2, 3), flat=(0, 6)), 1: ShardRecord("dp", (FLAT,), (2, 3), flat=(6, 6))}
    b = {0: ShardRecord("dp", (FLAT,), (5,), flat=(0, 3)), 1: ShardRecord("dp", (FLAT,), (5,), flat=(3, 5))}
    job = write_job(str(tmp_path / "d"), Job(MESH2, {"fc.weight": ((2, 3), w), "fc.bias": ((5,), b)}, [0, 1]))
    dump = open_dump(str(tmp_path / "d"))
    _check_whole(dump, job, "fc.weight", [0, 1])
    _check_whole(dump, job, "fc.bias", [0, 1])
    assert dump.rank(1).tensor(0, 1, "fc.weight").shard.source.header().shape == (0,)


def test_fsdp1_a_rank_with_an_empty_range_records_nothing(tmp_path: Any) -> None:
    """Rank 1's range of ``fc.weight`` is empty and it records no tensor of it: rank 0's flat (6,) part is
    the whole, read in the logical shape (2, 3)."""
    w = {0: ShardRecord("dp", (FLAT,), (2, 3), flat=(0, 6)), 1: ShardRecord("dp", (FLAT,), (2, 3), flat=(6, 6))}
    job = write_job(str(tmp_path / "d"), Job(MESH2, {"fc.weight": ((2, 3), w)}, [0, 1], absent={"fc.weight": {1}}))
    dump = open_dump(str(tmp_path / "d"))
    _check_whole(dump, job, "fc.weight", [0], holders=[0])
    assert [p.rank for p in dump.rank(0).tensor(0, 1, "fc.weight.grad").pieces] == [0]


def test_operator_tensors_are_matched_across_ranks_by_what_they_are(tmp_path: Any) -> None:
    """Operator names count per rank (rank 1 calls the gradient ``Adam/grad-7``): an operator's tensors are
    matched by parameter, kind, operator type, io, slot and place, and read whole under either name."""
    names = {"w.grad": "Adam/grad-7", "v.grad": "Adam/grad-3"}
    job = Job(MESH2, {"w": ((4, 3), one_dim((4, 3), 0, 2)), "v": ((2, 4), one_dim((2, 4), 1, 2))}, [0, 1],
              rename=lambda rank, node: names.get(node, node) if rank == 1 else node)
    write_job(str(tmp_path / "d"), job)
    dump = open_dump(str(tmp_path / "d"))
    for name in ("w", "v"):
        t0 = dump.rank(0).tensor(0, 1, f"{name}.grad")
        t1 = dump.rank(1).tensor(0, 1, names[f"{name}.grad"])
        assert t0.is_logical and t1.source is t0.source
        np.testing.assert_array_equal(t1.value(), job.truth[(1, f"{name}.grad")])
    pieces = shard_pieces(dump, 0, 1, ("Adam/grad-7", "output", 0), rank=1)
    assert [(p.rank, p.shard.local_shape) for p in pieces] == [(0, (2, 3)), (1, (2, 3))]


def _mesh_2d_job() -> Job:
    """dp x tp on 4 ranks: Shard(0) over tp, Replicate over dp (ranks 0, 2 hold rows 0-1; ranks 1, 3 rows 2-3)."""
    mesh = {"m": MeshRecord(("dp", "tp"), (2, 2), (0, 1, 2, 3))}
    rows = {0: (0, 2), 1: (2, 4), 2: (0, 2), 3: (2, 4)}
    shards = {r: ShardRecord("m", (REPLICATE, "Shard(0)"), (4, 3), ((rows[r],), ((0, 3),))) for r in rows}
    return Job(mesh, {"w": ((4, 3), shards)}, [0, 1, 2, 3])


def test_replicas_on_a_2d_mesh_are_read_once(tmp_path: Any) -> None:
    """The dp replica of rank 0's rows (rank 2) is read once, by the rank that views it: a planted change on
    rank 2 does not reach the logical tensor as the other ranks hold it (assembled from ranks 0 and 1, each
    from its own replica where it holds one), and rank 2's view is its own data (issue 37: a rank's view is
    that rank's)."""
    def plant(rank: int, it: int, node: str, local: np.ndarray) -> np.ndarray:
        return local + 100.0 if (rank, node) == (2, "w") else local

    job = write_job(str(tmp_path / "d"), _mesh_2d_job(), alter=plant)
    dump = open_dump(str(tmp_path / "d"))
    for r in range(4):
        t = dump.rank(r).tensor(0, 1, "w")
        assert t.is_logical and t.source.owner_rank == 0
        want = job.truth[(1, "w")].copy()
        if r == 2:
            want[0:2] += 100.0
        np.testing.assert_array_equal(t.value(), want)
    own = dump.rank(2).tensor(0, 1, "w").shard.source.array()
    np.testing.assert_array_equal(own, job.truth[(1, "w")][0:2] + 100.0)
    _check_whole(dump, job, "w", [0, 1, 3])


def test_statistics_only_dump_combines_the_shards_statistics(tmp_path: Any) -> None:
    """A statistics-only dump: no values, the logical tensor's statistics combined exactly from the
    shards' equal numpy's on the full tensor (1e-6 relative); a NaN in one shard is counted once."""
    def plant(rank: int, it: int, node: str, local: np.ndarray) -> np.ndarray:
        if (rank, node) == (1, "up.weight.grad"):
            local = local.copy()
            local.reshape(-1)[0] = np.nan
        return local

    job = write_job(str(tmp_path / "d"), Job(MESH2, {"up.weight": ((5, 6), one_dim((5, 6), 0, 2))}, [0, 1]),
                    saved="statistics", alter=plant)
    dump = open_dump(str(tmp_path / "d"))
    for node in ("up.weight", "exp_avg.up.weight"):
        full = job.truth[(1, node)].astype(np.float64)
        t = dump.rank(1).tensor(0, 1, node)
        assert t.is_logical and not t.has_values and t.shape == (5, 6)
        st = t.source.stored_stats()
        want = {"count": full.size, "min": full.min(), "max": full.max(), "mean": full.mean(),
                "abs_mean": np.abs(full).mean(), "std": full.std(ddof=1), "l2norm": np.linalg.norm(full),
                "zeros": int((full == 0).sum()), "positives": int((full > 0).sum())}
        for k, v in want.items():
            # a mean near 0 is a difference of large sums: its error is relative to the values' scale
            assert st[k] == pytest.approx(v, rel=1e-6, abs=1e-6 * want["abs_mean"]), (node, k)
    grad = dump.rank(0).tensor(0, 1, "up.weight.grad").source.stored_stats()
    assert grad["nan"] == 1 and grad["count"] == 30


def test_a_damaged_layout_reads_the_rank_plain(tmp_path: Any) -> None:
    """rank_1's layout names a mesh it does not list: a warning names its rank.json, rank 1 is read as a
    plain rank, and rank 0's part, alone, does not make a whole: it stays rank 0's shard, said once."""
    root = str(tmp_path / "d")
    write_job(root, Job(MESH2, {"w": ((4, 3), one_dim((4, 3), 0, 2))}, [0, 1]))
    path = os.path.join(root, "rank_1", "rank.json")
    with open(path, encoding="utf-8") as f:
        meta = json.load(f)
    meta["layout"]["params"]["w"]["mesh"] = "nowhere"
    with open(path, "w", encoding="utf-8") as f:
        json.dump(meta, f)
    dump = open_dump(root)
    t1 = dump.rank(1).tensor(0, 1, "w")
    assert dump.rank(1).layout is None and t1.shard is None and t1.shape == (2, 3)
    t0 = dump.rank(0).tensor(0, 1, "w")
    assert not t0.is_logical and t0.shard is not None and t0.shape == (2, 3)
    warnings = dump.all_warnings()
    assert any(path in w and "layout unreadable" in w for w in warnings), warnings
    assert sum("do not make up its logical tensor" in w and w.startswith("w:") for w in warnings) == 1, warnings


def test_a_dump_without_layout_builds_no_shard_index(tmp_path: Any, make_dump: Any) -> None:
    """Plain ranks (a MindSpore dump) read exactly as before: no shards, no logical tensors, no index."""
    dump = open_dump(make_dump())
    refs = [t for r in dump.ranks for t in r.tensors()]
    assert refs and not any(t.is_logical or t.shard is not None for t in refs)
    assert dump._shards is None


def test_replicated_parameters_stay_each_ranks_own(tmp_path: Any) -> None:
    """Replicate() on every mesh dimension (DDP): each rank's tensor is whole already; not made logical."""
    shards = {r: ShardRecord("dp", (REPLICATE,), (3, 2)) for r in (0, 1)}
    write_job(str(tmp_path / "d"), Job(MESH2, {"w": ((3, 2), shards)}, [0, 1]))
    dump = open_dump(str(tmp_path / "d"))
    t = dump.rank(1).tensor(0, 1, "w")
    assert not t.is_logical and t.shard is not None and t.source is t.shard.source and t.shape == (3, 2)


def test_the_shard_index_lists_pieces_per_key(tmp_path: Any) -> None:
    write_job(str(tmp_path / "d"), Job(MESH2, {"w": ((3, 4), one_dim((3, 4), 0, 2))}, [0, 1]))
    dump = open_dump(str(tmp_path / "d"))
    index = dump.shard_index()
    assert isinstance(index, ShardIndex)
    for key in [("exp_avg.w", "output", 0), ("w", "output", 0), ("w.grad", "output", 0)]:
        assert [p.rank for p in index.source(0, 0, 1, key).pieces] == [0, 1]
    assert index.source(0, 0, 1, ("step.w", "output", 0)) is None is index.source(0, 0, 1, ("act", "output", 0))
    pieces = shard_pieces(dump, 0, 0, ("w.grad", "output", 0))
    assert [(p.rank, p.shard.local_shape, p.source.header().shape) for p in pieces] == [(0, (2, 4), (2, 4)),
                                                                                      (1, (1, 4), (1, 4))]
    assert shard_pieces(dump, 0, 0, ("act", "output", 0)) == [] == shard_pieces(dump, 0, 0, ("step.w", "output", 0))


def test_shard_pieces_of_replicas_and_of_a_2d_mesh(tmp_path: Any) -> None:
    """Replicated (DDP) parameters: both ranks' whole copies; dp x tp: four parts, two replica groups."""
    shards = {r: ShardRecord("dp", (REPLICATE,), (3, 2)) for r in (0, 1)}
    write_job(str(tmp_path / "r"), Job(MESH2, {"w": ((3, 2), shards)}, [0, 1]))
    assert [p.rank for p in shard_pieces(open_dump(str(tmp_path / "r")), 0, 1, ("w", "output", 0))] == [0, 1]
    write_job(str(tmp_path / "m"), _mesh_2d_job())
    pieces = shard_pieces(open_dump(str(tmp_path / "m")), 0, 1, ("exp_avg.w", "output", 0))
    assert [[p.rank for p in g] for g in replica_groups(pieces)] == [[0, 2], [1, 3]]


@pytest.mark.parametrize("statistics", [False, True])
def test_convert_keeps_each_ranks_shards_and_the_layout(tmp_path: Any, statistics: bool) -> None:
    """`tdbg convert` writes what each rank stored (its shard, not the logical tensor) and the layout, so
    the converted dump reads the same logical tensors (statistics-only: the same combined statistics)."""
    job = write_job(str(tmp_path / "d"), Job(MESH2, {"w": ((5, 3), one_dim((5, 3), 0, 2))}, [0, 1]))
    res = convert(open_dump(str(tmp_path / "d")), str(tmp_path / "c"), statistics=statistics)
    assert not res.warnings, res.warnings
    out = open_dump(str(tmp_path / "c"))
    assert out.rank(1).layout == open_dump(str(tmp_path / "d")).rank(1).layout
    assert [t.shape for t in out.rank(1).local_index[(0, 1)] if t.node == "w"] == [(2, 3)]
    t = out.rank(1).tensor(0, 1, "w.grad")
    full = job.truth[(1, "w.grad")].astype(np.float64)
    assert t.is_logical and t.shape == (5, 3)
    if statistics:
        assert t.source.stored_stats()["l2norm"] == pytest.approx(np.linalg.norm(full), rel=1e-6)
    else:
        np.testing.assert_array_equal(t.value(), job.truth[(1, "w.grad")])


def test_info_lists_meshes_groups_stages_and_logical_parameters(tmp_path: Any) -> None:
    """A 2-D job whose ranks each record their own slice of the "dp" mesh: one mesh with both groups; and
    a pipeline of two stages, each rank holding its stage's weights whole."""
    job = _mesh_2d_job()
    job.meshes["dp"] = MeshRecord(("dp",), (2,), (0, 2))
    job.rank_meshes = {r: {**job.meshes, "dp": MeshRecord(("dp",), (2,), (r % 2, r % 2 + 2))} for r in range(4)}
    write_job(str(tmp_path / "m"), job)
    r = run_cli("info", str(tmp_path / "m"), "--json")
    assert r.code == 0, r.err
    lay = r.json["layout"]
    assert lay["meshes"]["dp"] == {"dims": ["dp"], "shape": [2], "ranks": [0, 1, 2, 3], "groups": {"dp": [[0, 2], [1, 3]]}}
    assert lay["meshes"]["m"]["groups"] == {"dp": [[0, 2], [1, 3]], "tp": [[0, 1], [2, 3]]}
    assert lay["parameters"] == [{"name": "w", "shape": [4, 3], "mesh": "m", "placements": ["Replicate()", "Shard(0)"],
                                  "ranks": [0, 1, 2, 3], "sharded": True}]
    assert r.json["trainable_weights"] == ["w"] and lay["pipeline"] is None
    text = run_cli("info", str(tmp_path / "m")).out
    assert "mesh m: dp 2 x tp 2 (ranks 0-3); groups dp: [0,2] [1,3]; tp: [0,1] [2,3]" in text, text
    assert "parameters: 1, 1 sharded" in text and "m: Replicate(), Shard(0)" in text, text

    one = {0: MeshRecord(("pp",), (2,), (0, 1))}
    pp = Job({"pp": one[0]}, {"a": ((2, 2), {0: ShardRecord("pp", (REPLICATE,), (2, 2))}),
                              "b": ((3,), {1: ShardRecord("pp", (REPLICATE,), (3,))})}, [0, 1],
             stage={0: 0, 1: 1}, stages=2, micro_batches=4)
    write_job(str(tmp_path / "p"), pp)
    r = run_cli("info", str(tmp_path / "p"), "--json")
    assert r.json["layout"]["pipeline"] == {"stages": 2, "micro_batches": 4, "by_stage": {
        "0": {"ranks": [0], "weights": ["a"]}, "1": {"ranks": [1], "weights": ["b"]}}}
    assert r.json["trainable_weights"] == ["a", "b"]          # every stage's, not the first rank's only
    text = run_cli("info", str(tmp_path / "p")).out
    assert "pipeline: 2 stage(s), 4 micro-batch(es); stage 0: rank 0 (1 weight); stage 1: rank 1 (1 weight)" in text
    assert "trainable weights (2): a, b" in text, text
