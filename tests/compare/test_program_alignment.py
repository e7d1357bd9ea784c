"""The alignment that pairs two programs' operators (debugger.compare.programs) is a longest common
subsequence: checked against the textbook dynamic program on random token lists."""
from __future__ import annotations

import random

from debugger.compare.programs import _aligned


def _lcs_length(a: list[int], b: list[int]) -> int:
    """The textbook O(n m) dynamic program, in plain Python."""
    rows = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            rows[i + 1][j + 1] = rows[i][j] + 1 if x == y else max(rows[i][j + 1], rows[i + 1][j])
    return rows[-1][-1]


def test_alignment_is_a_longest_common_subsequence() -> None:
    for seed in range(300):
        rnd = random.Random(seed)
        a = [rnd.randrange(4) for _ in range(rnd.randrange(0, 30))]
        b = [rnd.randrange(4) for _ in range(rnd.randrange(0, 30))]
        got = _aligned(a, b)
        assert len(got) == _lcs_length(a, b), seed
        assert all(a[i] == b[j] for i, j in got)
        assert all(p[0] < q[0] and p[1] < q[1] for p, q in zip(got, got[1:]))


def test_interleaved_operators_do_not_pull_a_call_onto_another() -> None:
    """Three calls of the same operators; one side has extra operators of its own inside each call and
    records one operator ("e") in the last call only: each call still pairs with its own."""
    call = ["emb", "mm", "sdpa", "mm", "mm"]
    eager = [t for k in range(3) for t in ["e", *call]]
    compiled = [t for k in range(3) for t in (["e"] if k == 2 else []) + call + ["gelu_part"]]
    pairs = _aligned(compiled, eager)
    e_pos = [j for i, j in pairs if compiled[i] == "e"]
    assert e_pos == [12]        # the last call's, not the first's


def test_programs_with_no_operator_in_common_are_said() -> None:
    """Two programs whose operators share no scope, type and shape: the comparison would read as clean on the
    weights alone, so it says that no operator was compared."""
    from debugger.compare.programs import ProgramPairing
    nothing = ProgramPairing(0, 0, True, False, paired=[], alone_a=["model/mm-0"], alone_b=["model/linear-0"])
    assert "no operator of the two programs could be paired" in (nothing.unread() or "")
    fine = ProgramPairing(0, 0, True, False, paired=[("model/mm-0", "model/mm-0")], outputs_compared=1)
    assert fine.unread() is None
