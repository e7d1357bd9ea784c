"""A dump's watchpoints as the web UI uses them (debugger.watch.defaults): the triage's, with what its
scan found reused as it is (no file read again), until the user edits the list; the user's list then,
kept across restarts; back to the triage's on request; a store written before the defaults existed keeps
a list the user set. The truth is a fresh ``scan()`` of dumps_sample/single."""
from __future__ import annotations

import json
import os
from typing import Any

import pytest

from debugger import open_dump
from debugger.views import triage as _triage
from debugger.watch import scan
from debugger.watch import store as watchstore
from debugger.watch.defaults import DumpWatchpoints

SINGLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "dumps_sample", "single")


def hits_of(session: Any) -> list[tuple[int, int, str, str]]:
    return sorted((h.hit.rank, h.hit.iteration, h.hit.node, h.hit.watchpoint) for h in session.hits())


@pytest.fixture
def dump() -> Any:
    if not os.path.isdir(SINGLE):
        pytest.skip("dumps_sample/ is not present")
    return open_dump(SINGLE)


def test_the_triage_scan_is_the_default_list_and_its_hits_are_reused(dump: Any, tmp_path: Any) -> None:
    w = DumpWatchpoints(dump, None, str(tmp_path))
    assert not w.edited and not len(w.current())
    _triage.triage(dump, on_scan=w.take_triage)
    truth = scan(dump, _triage.watchpoints(), jobs=1, series_sweep=False)
    cur = w.current()
    assert cur is w.triage and len(cur) == len(_triage.watchpoints())
    assert hits_of(cur) == sorted((h.rank, h.iteration, h.node, h.watchpoint) for h in truth.hits)
    assert cur.checked(0) == truth.iterations
    cur.check(0, truth.iterations)          # every iteration already checked by the triage: nothing read again
    assert cur.files_checked == 0
    # kept in the cache folder: a restart has them, still without reading a file
    again = DumpWatchpoints(open_dump(SINGLE), None, str(tmp_path))
    assert hits_of(again.current()) == hits_of(cur) and again.current().files_checked == 0


def test_an_edit_starts_from_the_triage_list_and_survives_a_restart_until_back_to_defaults(dump: Any, tmp_path: Any) -> None:
    w = DumpWatchpoints(dump, None, str(tmp_path))
    w.take_triage(_triage.watchpoints(), scan(dump, _triage.watchpoints(), jobs=1, series_sweep=False))
    first = next(iter(w.triage.watchpoints()))
    w.to_edit().remove(first)
    assert w.edited and w.current() is w.user and len(w.user) == len(w.triage) - 1
    again = DumpWatchpoints(open_dump(SINGLE), None, str(tmp_path))
    assert again.edited and [wp.to_dict() for wp in again.current().watchpoints().values()] == \
        [wp.to_dict() for wp in w.user.watchpoints().values()]
    again.back_to_defaults()
    assert not again.edited and again.current() is again.triage and hits_of(again.current()) == hits_of(w.triage)
    assert not DumpWatchpoints(open_dump(SINGLE), None, str(tmp_path)).edited
    # emptied by the user: an empty list of theirs, not the triage's
    again.to_edit().clear()
    assert again.edited and not len(again.current())


def test_a_store_from_before_the_defaults_keeps_a_list_the_user_set(dump: Any, tmp_path: Any) -> None:
    path = watchstore.store_path(SINGLE, str(tmp_path))
    watchstore.save(path, {"dump": SINGLE, "fingerprint": "x", "next": 2, "checked": [],
                           "watchpoints": [{"id": 1, "spec": {"name": "overflow", "params": {}}}]})
    assert "edited" not in json.load(open(path, encoding="utf-8"))
    w = DumpWatchpoints(dump, None, str(tmp_path))
    assert w.edited and [wp.name for wp in w.current().watchpoints().values()] == ["overflow"]
    watchstore.save(path, {"dump": SINGLE, "fingerprint": "x", "next": 1, "checked": [], "watchpoints": []})
    assert not DumpWatchpoints(dump, None, str(tmp_path)).edited     # the old empty default: the triage's now


def test_the_list_again_keeps_what_was_found_and_another_list_starts_afresh(dump: Any) -> None:
    w = DumpWatchpoints(dump, None, None, use_store=False)
    wps = _triage.watchpoints()
    w.take_triage(wps, scan(dump, wps, jobs=1, series_sweep=False))
    found = hits_of(w.triage)
    w.take_triage(wps, None)              # a cached triage names the same list: what was found stays
    assert hits_of(w.triage) == found
    w.take_triage(wps[:2], None)          # another list: nothing found yet, checked where asked
    assert len(w.triage) == 2 and not w.triage.checked()
