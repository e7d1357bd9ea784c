"""One rank's full disk under data parallelism and FSDP2 (issue 38 item 4): that rank stops recording with one warning
and trains on, the other rank records on, no collective hangs, and every rank's losses are those of the
same run unrecorded (real DDP and FSDP2 over gloo, spawned ranks; a real write failure: RLIMIT_FSIZE)."""
from __future__ import annotations

import json
import os
from typing import Any

import pytest
from realruns import run_layouts

import debugger


@pytest.mark.parametrize("layout", ["ddp", "fsdp2"])
def test_a_full_disk_on_one_rank_stops_its_recording_only(tmp_path: Any, layout: str) -> None:
    """Under FSDP2 the ranks' all-gathers and reduce-scatters run every step: a rank that stopped recording
    must still take part in each, as it did unrecorded."""
    root, out = str(tmp_path / "dump"), str(tmp_path / "facts.json")
    done = run_layouts([layout, out, "--dump", root, "--steps", "4", "--level", "parameters", "--both",
                        "--full-disk", "1:6000"])
    for rank in (0, 1):
        with open(f"{out}.{rank}") as f:
            facts = json.load(f)
        assert facts["recorded"]["losses"] == facts["plain"]["losses"] and len(facts["plain"]["losses"]) == 4
    said = [ln for ln in done.stderr.splitlines() if "tdbg recorder: writing" in ln]
    assert len(said) == 1 and os.path.join(root, "rank_1") in said[0], done.stderr[-3000:]
    assert "training goes on unrecorded" in said[0]
    dump = debugger.open_dump(root)
    assert dump.rank(0).iterations() == [0, 1, 2, 3]       # the other rank recorded every step
    assert len(dump.rank(1).iterations()) < 4
