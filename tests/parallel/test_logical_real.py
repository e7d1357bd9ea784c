"""Logical tensors of a real FSDP2 run (2 spawned gloo ranks, recorded by debugger.torch.Recorder, statistics):
every parameter read whole equals what torch gathers itself; info, node and scan speak of logical tensors."""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from clirun import run_cli
from realruns import run_layouts
from debugger.model import open_dump
from debugger.watch import Watchpoint, scan



def _record(tmp: Any, layout: str) -> tuple[str, dict]:
    """One recorded run of 3 steps: the dump, and torch's own full parameters after the last step."""
    dump, facts = str(tmp / "dump"), str(tmp / "facts.json")
    run_layouts([layout, facts, "--dump", dump, "--save", "statistics", "--level", "ops", "--steps", "3"])
    with open(facts + ".0", encoding="utf-8") as f:
        return dump, json.load(f)["params"]


@pytest.fixture(scope="module")
def fsdp2(tmp_path_factory: Any) -> tuple[str, dict]:
    """FSDP2 on 2 ranks."""
    return _record(tmp_path_factory.mktemp("fsdp2"), "fsdp2")


def test_every_parameter_reads_whole_as_torch_gathers_it(fsdp2: tuple[str, dict]) -> None:
    """The last iteration's weights, assembled from both ranks' shards (statistics combined from theirs),
    equal torch's full_tensor() after the last step: count, min, max, mean, l2norm."""
    _check_params(*fsdp2, [0, 1])


def test_a_2d_mesh_reads_whole_from_four_ranks(tmp_path: Any) -> None:
    """FSDP2 over "dp" x tensor parallel over "tp" on 4 ranks: every parameter is assembled from the four
    ranks' parts (dp shards of tp shards) and equals torch's; scan reports each once, on rank 0."""
    root, params = _record(tmp_path, "2d")
    _check_params(root, params, [0, 1, 2, 3])
    res = scan(open_dump(root), [Watchpoint.parse("weight_too_large:max_gt=-1e9")], jobs=1)
    assert {h.rank for h in res.hits} == {0} and {h.shards for h in res.hits} == {(0, 1, 2, 3)}
    assert len(res.hits) == 12 * len(res.iterations)


def _check_params(root: str, params: dict, holders: list[int]) -> None:
    dump = open_dump(root)
    assert len(params) == 12
    for rank in dump.ranks:
        gid = max(rank.graph_ids, key=lambda g: max(rank.iterations(g), default=-1))
        last = max(rank.iterations(gid))
        for name, values in params.items():
            full = np.asarray(values)
            t = rank.tensor(gid, last, name)
            assert t.is_logical and t.shape == full.shape and [p.rank for p in t.pieces] == holders, name
            assert t.shard.shard.local_shape != full.shape      # a real part, read whole
            st = t.source.stored_stats()
            assert st["count"] == full.size
            for k, want in (("min", full.min()), ("max", full.max()), ("mean", full.mean()),
                            ("l2norm", np.linalg.norm(full))):
                assert st[k] == pytest.approx(want, rel=1e-6, abs=1e-7), (name, k)


def test_info_shows_the_layout_and_the_logical_parameters(fsdp2: tuple[str, dict]) -> None:
    root, _ = fsdp2
    r = run_cli("info", root, "--json")
    assert r.code == 0, r.err
    lay = r.json["layout"]
    assert lay["ranks"] == [0, 1] and [m["shape"] for m in lay["meshes"].values()] == [[2]]
    assert [m["groups"] for m in lay["meshes"].values()] == [{"dim0": [[0, 1]]}]
    by_name = {p["name"]: p for p in lay["parameters"]}
    assert len(by_name) == 12 and all(p["sharded"] and p["ranks"] == [0, 1] for p in by_name.values())
    assert by_name["head.weight"]["shape"] == [3, 8] and by_name["head.weight"]["placements"] == ["Shard(0)"]
    assert len(r.json["trainable_weights"]) == 12
    text = run_cli("info", root).out
    assert "trainable weights (12)" in text and "parameters: 12, 12 sharded" in text and "3x8" in text, text


def test_node_shows_the_logical_tensor(fsdp2: tuple[str, dict]) -> None:
    root, params = fsdp2
    r = run_cli("node", root, "head.weight", "--rank", "1")
    assert r.code == 0, r.err
    assert "shape 3x8 float32, assembled from 2 shards on ranks 0-1 (dim0: Shard(0)); rank 1 holds 1x8" in r.out, r.out
    j = run_cli("node", root, "layers.0.up.weight.grad", "--json").json
    logical = [t for n in j["nodes"] for t in n["logical"]]
    assert logical and all(t["shape"] == [12, 8] and len(t["pieces"]) == 2 for t in logical)


def test_scan_judges_logical_tensors_once(fsdp2: tuple[str, dict]) -> None:
    """A healthy run: no non-finite value anywhere; a threshold every weight exceeds fires once per logical
    weight and iteration, on rank 0, naming both ranks' shards."""
    root, params = fsdp2
    dump = open_dump(root)
    res = scan(dump, [Watchpoint.parse("weight_overflow"), Watchpoint.parse("weight_too_large:max_gt=-1e9")], jobs=1)
    weights = [h for h in res.hits if h.watchpoint == "weight_too_large"]
    assert {h.rank for h in weights} == {0} and all(h.shards == (0, 1) for h in weights)
    assert len(weights) == len({(h.iteration, h.param) for h in weights}) == 12 * len(res.iterations)
    assert not [h for h in res.hits if h.watchpoint == "weight_overflow"]
