"""Scan sessions (debugger.watch.session): checked once, iteration by iteration, over a dump that grows;
every hit and error record tied to its watchpoint by id; kept between two session objects. The truth
is always a fresh ``scan()`` of the same dump."""
from __future__ import annotations

import json
import os
import shutil
from typing import Any

import numpy as np
import pytest

from debugger import open_dump
from debugger.watch import Watchpoint, scan
from debugger.watch.session import ScanSession
from watch_kit import Plant, full, make

ITERATIONS = 5
SPECS = ("gradient_vanishing:abs_mean_lt=1e-7",   # the fc1 gradient is tiny in iterations 1 and 3
         "tensor_too_small:abs_mean_lt=1e-7",     # the same, the all-zero activation of 4; NaN in 2: errors
         "tensor_too_small:abs_mean_lt=1e-20",    # the same name: only the all-zero activation, NaN errors
         "weight_change_too_large")               # reads the previous iteration of every weight


def wps(*specs: str) -> list[Watchpoint]:
    return [Watchpoint.parse(s) for s in specs or SPECS]


@pytest.fixture(scope="module")
def full_dump(tmp_path_factory: Any, layout: Any) -> str:
    """Five iterations of the MLP with hits in 1, 3 and 4 and NaN (error records) in 2."""
    lay = layout()
    g, act = lay.gradient("fc1.weight"), lay.activation()
    plant = Plant().set(g, full(2.0 ** -30), it=1).set(g, full(2.0 ** -30), it=3) \
        .set(act, full(0.0), it=4).set(act, full(np.nan), it=2)
    return make(tmp_path_factory.mktemp("session"), plant=plant, iterations=ITERATIONS)


def iteration_dir(root: str, it: int) -> str:
    return os.path.join(root, "rank_0", "Net", "0", str(it))


def copy_without(root: str, dest: str, missing: int) -> str:
    """The dump at ``dest`` as it was before iteration ``missing`` was written."""
    shutil.copytree(root, dest, ignore=lambda d, names: [str(missing)] if d == os.path.dirname(
        iteration_dir(root, missing)) else [])
    return dest


def fresh(root: str, watchpoints: list[Watchpoint], **kw: Any) -> Any:
    return scan(open_dump(root), watchpoints, jobs=1, **kw)


def session_hits(session: ScanSession) -> list[dict[str, Any]]:
    return [h.hit.to_dict() for h in session.hits()]


def session_errors(session: ScanSession) -> list[dict[str, Any]]:
    return sorted((e.error.to_dict() for e in session.errors()), key=lambda e: json.dumps(e, sort_keys=True))


def scan_errors(result: Any) -> list[dict[str, Any]]:
    return sorted((e.to_dict() for e in result.errors), key=lambda e: json.dumps(e, sort_keys=True))


def test_a_grown_dump_is_checked_for_its_new_iteration_only(full_dump: str, tmp_path: Any) -> None:
    root = copy_without(full_dump, str(tmp_path / "grow"), ITERATIONS - 1)
    session = ScanSession(open_dump(root), watchpoints=wps())
    assert session.check(0, session.dump.rank(0).iterations()) == list(range(ITERATIONS - 1))
    before = session.files_checked
    assert before == fresh(full_dump, wps(), iterations=set(range(ITERATIONS - 1))).files_checked
    shutil.copytree(iteration_dir(full_dump, ITERATIONS - 1), iteration_dir(root, ITERATIONS - 1))
    assert session.refresh() == []          # nothing checked before is invalid: only a later iteration came
    assert session.check(0, session.dump.rank(0).iterations()) == [ITERATIONS - 1]
    new_only = fresh(full_dump, wps(), iterations={ITERATIONS - 1}).files_checked
    assert 0 < session.files_checked - before == new_only
    truth = fresh(full_dump, wps())
    assert session.files_checked - before < truth.files_checked
    assert session_hits(session) == [h.to_dict() for h in truth.hits]
    assert {h.iteration for h in truth.hits} >= {1, 3, ITERATIONS - 1}
    assert session_errors(session) == scan_errors(truth) != []
    assert session.check(0, range(ITERATIONS)) == []     # checked once


def test_an_iteration_written_before_checked_ones_checks_those_again(full_dump: str, tmp_path: Any) -> None:
    root = copy_without(full_dump, str(tmp_path / "gap"), 2)
    session = ScanSession(open_dump(root), watchpoints=wps())
    assert session.check(0, session.dump.rank(0).iterations()) == [0, 1, 3, 4]
    shutil.copytree(iteration_dir(full_dump, 2), iteration_dir(root, 2))
    assert session.refresh() == [(0, 3), (0, 4)]   # their previous value is iteration 2 now
    assert session.checked(0) == [0, 1]
    assert session.check(0, session.dump.rank(0).iterations()) == [2, 3, 4]
    truth = fresh(full_dump, wps())
    assert session_hits(session) == [h.to_dict() for h in truth.hits]
    assert session_errors(session) == scan_errors(truth)


def test_next_hit_checks_iteration_by_iteration_up_to_the_next_hit(full_dump: str) -> None:
    session = ScanSession(open_dump(full_dump), watchpoints=wps(SPECS[0]))
    truth = sorted({h.iteration for h in fresh(full_dump, wps(SPECS[0])).hits})
    assert truth == [1, 2, 3]      # 2: the NaN activation, which the always-on sweep tells
    its = session.dump.rank(0).iterations()
    assert session.next_hit(0, -1, its) == (1, [0, 1])
    assert session.checked(0) == [0, 1]                    # nothing beyond the hit was read
    assert session.next_hit(0, 1, its) == (2, [2])
    assert session.next_hit(0, 2, its) == (3, [3])
    assert session.next_hit(0, 3, its) == (None, [4])
    assert [h.hit.iteration for h in session.hits(0)] == [1, 2, 3]
    assert [h.watchpoint_id for h in session.hits(0, 2)] == [0]     # the sweep's: no watchpoint of the session


def test_hits_and_errors_name_their_watchpoint_by_id_after_one_is_removed(full_dump: str) -> None:
    session = ScanSession(open_dump(full_dump))
    ids = session.add(wps())
    assert ids == [1, 2, 3, 4] and session.add(wps()) == []    # the same watchpoints twice: added once
    session.remove(ids[0])
    its = session.dump.rank(0).iterations()
    session.check(0, its)
    kept = wps(*SPECS[1:])
    truth = fresh(full_dump, kept)
    # the sweep's hits (order past the list) belong to no watchpoint: id 0
    want_hits = sorted((ids[1 + h.order] if h.order < len(kept) else 0, h.iteration, h.node) for h in truth.hits)
    assert sorted((h.watchpoint_id, h.hit.iteration, h.hit.node) for h in session.hits()) == want_hits
    want_errors = sorted((ids[1 + e.order], e.iteration, e.node, e.error) for e in truth.errors)
    got_errors = sorted((e.watchpoint_id, e.error.iteration, e.error.node, e.error.error) for e in session.errors())
    assert got_errors == want_errors
    # the two tensor_too_small watchpoints (one name) found different things
    assert {w for w, *_ in want_hits} == {0, ids[1], ids[2]}
    assert [h.hit.iteration for h in session.hits(watchpoint=ids[2])] == [ITERATIONS - 1]
    assert len(session.hits(watchpoint=ids[1])) > len(session.hits(watchpoint=ids[2]))
    assert {e.watchpoint_id for e in session.errors(0, 2)} >= {ids[1], ids[2]}
    for h in session.hits():
        assert h.watchpoint_id == 0 or session.watchpoints()[h.watchpoint_id].name == h.hit.watchpoint


def test_a_session_is_kept_between_two_session_objects(full_dump: str, tmp_path: Any) -> None:
    store = str(tmp_path / "store" / "watch.json")
    first = ScanSession(open_dump(full_dump), store=store)
    ids = first.add(wps())
    first.remove(ids[0])
    first.check(0, [1, 2])
    second = ScanSession(open_dump(full_dump), store=store)
    assert second.watchpoints() == first.watchpoints() and list(second.watchpoints()) == ids[1:]
    assert second.checked() == [1, 2] and second.check(0, [1, 2]) == [] and second.files_checked == 0
    assert [h.to_dict() for h in second.hits()] == [h.to_dict() for h in first.hits()] != []
    assert [e.to_dict() for e in second.errors()] == [e.to_dict() for e in first.errors()] != []
    assert second.add(wps(SPECS[0])) == [ids[-1] + 1]    # a removed id is never given again


def test_a_changed_dump_keeps_the_watchpoints_and_checks_again(full_dump: str, tmp_path: Any) -> None:
    root = copy_without(full_dump, str(tmp_path / "d"), ITERATIONS - 1)
    store = str(tmp_path / "watch.json")
    first = ScanSession(open_dump(root), store=store)
    first.add(wps())
    first.check(0, [0, 1])
    shutil.copytree(iteration_dir(full_dump, ITERATIONS - 1), iteration_dir(root, ITERATIONS - 1))
    second = ScanSession(open_dump(root), store=store)
    assert second.watchpoints() == first.watchpoints() and second.checked() == []


def test_a_store_written_before_sessions_keeps_its_watchpoints_only(full_dump: str, tmp_path: Any) -> None:
    """The web's WatchSet wrote error records without their watchpoint: its results are checked again."""
    first = ScanSession(open_dump(full_dump))
    first.add(wps())
    first.check(0, [2])
    dump = open_dump(full_dump)
    old = {"format": 1, "dump": dump.root, "fingerprint": dump.fingerprint(), "next": 5,
           "watchpoints": [{"id": i, "spec": w.to_dict()} for i, w in first.watchpoints().items()],
           "checked": [[0, 2, [h.to_dict() for h in first.hits()], [e.error.to_dict() for e in first.errors()]]]}
    store = tmp_path / "old.json"
    store.write_text(json.dumps(old))
    session = ScanSession(dump, store=str(store))
    assert session.watchpoints() == first.watchpoints() and session.checked() == []
    assert session.check(0, [2]) == [2]


def test_the_sessions_whole_scan_is_the_engines(full_dump: str) -> None:
    """What `tdbg scan` prints, through a session: repeats and order kept; the findings are the session's."""
    listed = wps(*SPECS, SPECS[0])
    session = ScanSession(open_dump(full_dump), watchpoints=listed)
    got = session.scan(iterations="1-3")
    want = fresh(full_dump, listed, iterations={1, 2, 3})
    assert got.to_dict() == want.to_dict()
    assert session.checked(0) == [1, 2, 3]
    assert session_hits(session) == [h.to_dict() for h in want.hits]
    assert {h.watchpoint_id for h in session.hits() if h.hit.order == len(SPECS)} == {len(SPECS) + 1}
