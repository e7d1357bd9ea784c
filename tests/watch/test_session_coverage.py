"""A scan session's coverage (issue 37: coverage is part of every verdict): what each watchpoint checked,
kept per (rank, iteration) as the web checks them one at a time, adds up to what one whole `tdbg scan`
states, and is kept in the session's store. The truth is a fresh ``scan()`` of the same committed dump."""
from __future__ import annotations

import json
import os
from typing import Any

import pytest

from debugger import open_dump
from debugger.stats.cache import StatsCache
from debugger.watch import scan
from debugger.watch.registry import preset
from debugger.watch.session import ScanSession

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "dumps_sample")
# torch_2d: FSDP2 x tensor parallelism on 4 ranks recorded at level "modules", statistics only: its activation
# watchpoints meet no activation tensor and weight_change_too_large no values (unanswered), the rest check
# what they watch (complete); single: a MindSpore run with every kind dumped, every watchpoint complete.
DUMPS = {"torch_2d": {"complete", "unanswered"}, "single": {"complete"}}


def check_one_at_a_time(session: ScanSession) -> None:
    """Every (rank, iteration) of the dump checked on its own, as the web's pages ask for them."""
    for rank in session.dump.rank_ids:
        for it in session.dump.rank(rank).iterations():
            assert session.check(rank, [it]) == [it]


def summed(session: ScanSession, rank: int | None = None, it: int | None = None) -> list[dict[str, Any]]:
    """The session's coverage of each watchpoint (in id order) over the keys checked, as `tdbg scan --json` says it."""
    cov = session.coverage(rank, it)
    return [cov.by_watchpoint[wid].to_dict() for wid in session.watchpoints()]


def of_scan(result: Any) -> list[dict[str, Any]]:
    """A scan's coverage of each watchpoint, in its list's order."""
    return [result.coverage_of(i).to_dict() for i in range(len(result.watchpoints))]


@pytest.mark.parametrize("name", sorted(DUMPS))
def test_the_sessions_coverage_over_every_iteration_is_the_whole_scans(name: str, tmp_path: Any) -> None:
    root = os.path.join(SAMPLE, name)
    if not os.path.isdir(root):
        pytest.skip("dumps_sample/ is not present")
    wps = preset("recommended")
    whole = scan(open_dump(root), wps, jobs=1)
    store = str(tmp_path / "watch.json")
    session = ScanSession(open_dump(root), store=store)
    session.add(wps)
    assert session.coverage().keys == 0 and session.coverage().by_watchpoint.keys() == session.watchpoints().keys()
    check_one_at_a_time(session)
    got = summed(session)
    assert got == of_scan(whole)
    assert {c["status"] for c in got} == DUMPS[name]
    assert session.coverage().status == whole.status()
    for rank in session.dump.rank_ids:      # one rank's part is that rank's own scan
        assert summed(session, rank) == of_scan(scan(open_dump(root), wps, ranks=[rank], jobs=1, scope=session.dump.rank_ids))
    # kept in the store: a new session (a restarted server) states the same without reading a tensor
    again = ScanSession(open_dump(root), store=store)
    assert all(again.check(r, again.dump.rank(r).iterations()) == [] for r in again.dump.rank_ids)
    assert again.files_checked == 0
    assert summed(again) == got and again.coverage().status == whole.status()
    # a removed watchpoint's coverage goes with it
    first = next(iter(again.watchpoints()))
    again.remove(first)
    assert first not in again.coverage().by_watchpoint


def test_a_store_without_coverage_is_checked_again(tmp_path: Any) -> None:
    """A store of the format before coverage keeps its watchpoints; its results are checked again, not
    read as iterations where nothing was checked."""
    root = os.path.join(SAMPLE, "torch_2d")
    if not os.path.isdir(root):
        pytest.skip("dumps_sample/ is not present")
    store = tmp_path / "watch.json"
    session = ScanSession(open_dump(root), store=str(store))
    session.add(preset("recommended"))
    session.check(0, [0])
    data = json.loads(store.read_text())
    data["results_format"] = 3
    data["checked"] = [row[:4] for row in data["checked"]]
    store.write_text(json.dumps(data))
    older = ScanSession(open_dump(root), store=str(store))
    assert older.watchpoints().keys() == session.watchpoints().keys() and older.coverage().keys == 0
    assert older.check(0, [0]) == [0]
    assert summed(older) == summed(session)


@pytest.mark.parametrize("name", sorted(DUMPS))
def test_a_whole_scan_through_a_session_keeps_the_coverage_of_each_key_stored_result_or_not(name: str, tmp_path: Any) -> None:
    """`tdbg scan` scans through a session: a fresh scan and one answered by the stored result leave each
    key's coverage as checking the keys one at a time does."""
    root = os.path.join(SAMPLE, name)
    if not os.path.isdir(root):
        pytest.skip("dumps_sample/ is not present")
    wps = preset("recommended")
    one_by_one = ScanSession(open_dump(root), watchpoints=wps)
    check_one_at_a_time(one_by_one)
    want = {(r, it): summed(one_by_one, r, it) for r in one_by_one.dump.rank_ids
            for it in one_by_one.dump.rank(r).iterations()}
    read = []
    for _ in ("fresh", "stored"):
        cache = StatsCache(str(tmp_path / "cache"))
        session = ScanSession(open_dump(root), cache, watchpoints=wps)
        session.scan(jobs=1)
        read.append(session.files_checked)
        assert {key: summed(session, *key) for key in want} == want
        assert summed(session) == summed(one_by_one)
    assert read[1] == 0 and (read[0] > 0 or name == "torch_2d")   # torch_2d holds statistics, no tensor file
