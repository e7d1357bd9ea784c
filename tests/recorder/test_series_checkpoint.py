"""SeriesWriter.checkpoint (the recorder's timed flush): the pending steps readable at once as small
segments, merged into one segment by the next flush, which removes them."""
from __future__ import annotations

import os

import numpy as np

from debugger.formats.tdbg_h5.series import SeriesReader, SeriesWriter


def _segments(rank_dir):
    return sorted(n for n in os.listdir(os.path.join(rank_dir, "series")) if n.startswith("steps_"))


def test_checkpoints_are_readable_then_merged(tmp_path):
    rank = str(tmp_path / "rank_0")
    w = SeriesWriter(rank, ["a", "b"], segment_steps=10)
    row = np.arange(26, dtype=np.float64).reshape(2, 13)
    for step in range(23):
        w.add(step, row + step, {"loss": float(step)})
        if step % 3 == 2:
            w.checkpoint()
            got = SeriesReader(rank)
            assert list(got.steps()) == list(range(step + 1))       # every step so far, each once
            assert got.warnings == []
    # steps 0-9 and 10-19 became one segment each when full (their checkpoints removed); step 20 was
    # checkpointed, 21-22 are pending
    assert _segments(rank) == ["steps_0000000000-0000000009.h5", "steps_0000000010-0000000019.h5",
                               "steps_0000000020-0000000020.h5"]
    w.close()
    assert _segments(rank)[-1] == "steps_0000000020-0000000022.h5" and len(_segments(rank)) == 3
    r = SeriesReader(rank)
    assert list(r.steps()) == list(range(23)) and r.warnings == []
    np.testing.assert_allclose(r.scalar("loss")[1], np.arange(23))
    np.testing.assert_allclose(r.curve("b", "max")[1], [row[1, 8] + s for s in range(23)], rtol=1e-6)
