"""`tdbg info` of many ranks describes them a chunk at a time on a fork pool: the same object, warnings in the
same order, as one process going through the ranks in order."""
from __future__ import annotations

import json
import os
import sys
from typing import Any

from debugger.model import open_dump
from debugger.model.serialize import RANKS_AT_ONCE, dump_info

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import dumpmaker  # noqa: E402
from clirun import run_cli  # noqa: E402


def test_ranks_described_on_a_pool_equal_one_process(tmp_path: Any) -> None:
    root = dumpmaker.make_dump(str(tmp_path / "d"), ranks=2 * RANKS_AT_ONCE + 6, iterations=2)
    for rank in (3, 100):      # a stray file in the first and the last chunk: a warning each
        with open(os.path.join(root, f"rank_{rank}", "Net", "0", "1", "stray.npy"), "wb") as f:
            f.write(b"not a tensor file name")
    os.remove(os.path.join(root, "rank_70", "graphs", "ms_output_trace_code_graph_0.pb"))   # read from its .ir
    serial = dump_info(open_dump(root), jobs=1)
    pooled = dump_info(open_dump(root), jobs=2)
    assert _differences(pooled, serial) == []
    said = "\n".join(serial["warnings"])
    assert "rank_3" in said and "rank_100" in said and "rank_70" in said
    assert _differences(run_cli("info", root, "--json").json, json.loads(json.dumps(serial))) == []


def _differences(got: dict, want: dict) -> list[str]:
    """The keys, and the ranks, whose objects differ (short: pytest's diff of two big objects takes minutes)."""
    out = [k for k in sorted(set(got) | set(want)) if k != "ranks" and got.get(k) != want.get(k)]
    if len(got["ranks"]) != len(want["ranks"]):
        return out + ["ranks: their number"]
    return out + [f"rank {w['rank']}" for g, w in zip(got["ranks"], want["ranks"]) if g != w]
