"""Iteration and rank selections: strict ASCII numbers, bounded, errors that say which selection."""
from __future__ import annotations

import pytest
from clirun import run_cli

from debugger.common.selection import MAX_SELECTED, parse_iterations, parse_ranks


def test_ranges_and_lists() -> None:
    assert parse_iterations("0-3,8, 10") == {0, 1, 2, 3, 8, 10}
    assert parse_iterations(None) is parse_iterations("all") is parse_iterations(" ") is None
    assert parse_ranks("3,0-1") == [0, 1, 3]


@pytest.mark.parametrize("text", ["5-2", "a", "1-", "-1", "²", "٣", "1.5", "0-1-2", f"0-{MAX_SELECTED}"])
def test_bad_selections_are_value_errors(text: str) -> None:
    with pytest.raises(ValueError, match="bad iteration range"):
        parse_iterations(text)


def test_a_bad_rank_list_says_rank(make_dump) -> None:
    root = make_dump(iterations=1)
    r = run_cli("scan", root, "--ranks", "x")
    assert r.code == 2 and "bad rank range 'x'" in r.err


def test_convert_refuses_a_bad_iteration_list_before_writing(make_dump, tmp_path) -> None:
    root = make_dump(iterations=1)
    out = tmp_path / "out"
    r = run_cli("convert", root, str(out), "--iterations", "2-x")
    assert r.code == 2 and "bad iteration range" in r.err and not out.exists()


def test_a_rank_and_a_count_read_as_words():
    """ "rank 3", never "ranks 3" or "ranks 0-0"; "1 weight", "2 weights" (issue 40's words)."""
    from debugger.common.selection import counted, ranks_phrase
    from debugger.views.ranks import rank_groups

    assert ranks_phrase([3]) == "rank 3" and ranks_phrase([0, 0]) == "rank 0"
    assert ranks_phrase([0, 1, 2, 5]) == "ranks 0-2,5" and ranks_phrase(range(4), ", ") == "ranks 0-3"
    assert (counted(1, "weight"), counted(2, "weight"), counted(0, "match", "matches")) == ("1 weight", "2 weights", "0 matches")
    assert [g["name"] for g in rank_groups(list(range(65)), {})] == ["ranks 0-63", "rank 64"]
