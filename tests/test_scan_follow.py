"""`tdbg scan --follow` on dumps a running job is writing: a real PyTorch training process recording
tdbg-h5, and a MindSpore run's files arriving iteration by iteration with half-written .npy files."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from typing import Any

import followrun
from clirun import run_cli
from followrun import MSPROBE, SINGLE


def _tdbg(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "debugger.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_fail_fast_stops_at_the_planted_nan_while_the_job_still_runs(tmp_path: Any) -> None:
    out = str(tmp_path / "dump")
    trainer = followrun.start(tmp_path, out, steps=200, nan_at=4, pause=0.2)
    try:
        followrun.wait_for(os.path.join(out, "rank_0"))
        scan = _tdbg("scan", out, "--follow", "--fail-fast", "--json", "--poll", "0.2", "--no-cache",
                     "--watch", "weight_overflow", "--idle-exit", "60")
        got, _ = scan.communicate(timeout=120)
        assert scan.returncode == 1, got
        assert trainer.poll() is None, "--fail-fast must stop before the job ends"
        lines = [json.loads(line) for line in got.splitlines()]
        hits = [ln for ln in lines if "watchpoint" in ln]
        # the planted step's hits first; a poll that found step 5 settled with it (a loaded machine) prints its too
        assert hits and min(h["iteration"] for h in hits) == 4 and hits[0]["watchpoint"] == "weight_overflow"
        assert hits[0]["iteration"] == 4
        scanned = sorted(i for ln in lines if "scanned" in ln for i in ln["scanned"]["iterations"])
        assert scanned == list(range(scanned[-1] + 1)) and scanned[-1] >= 4   # every step once, in order
    finally:
        trainer.kill()
        trainer.wait()


def test_a_healthy_job_is_followed_to_its_end_without_a_hit(tmp_path: Any) -> None:
    out = str(tmp_path / "dump")
    trainer = followrun.start(tmp_path, out, steps=12, nan_at=-1, pause=0.1)
    try:
        followrun.wait_for(os.path.join(out, "rank_0"))
        scan = _tdbg("scan", out, "--follow", "--poll", "0.2", "--no-cache", "--watch", "weight_overflow",
                     "--idle-exit", "3")
        got, err = scan.communicate(timeout=120)
        assert trainer.wait(timeout=60) == 0
        assert scan.returncode == 0, got + err
        scanned = [int(i) for line in got.splitlines() if line.startswith("scanned rank 0 iteration(s) ")
                   for i in line.rsplit(")", 1)[1].split(",")]
        assert "hit:" not in got and scanned == list(range(12)), got
    finally:
        trainer.kill()
        trainer.wait()


def test_series_watchpoints_follow_the_series_as_it_grows(tmp_path: Any) -> None:
    out = str(tmp_path / "dump")
    trainer = followrun.start(tmp_path, out, steps=400, nan_at=-1, pause=0.02, lr_jump=30)
    try:
        followrun.wait_for(os.path.join(out, "rank_0"))
        scan = _tdbg("scan", out, "--follow", "--fail-fast", "--json", "--poll", "0.2", "--no-cache",
                     "--watch", "lr_change", "--idle-exit", "60")
        got, _ = scan.communicate(timeout=120)
        assert scan.returncode == 1 and trainer.poll() is None, got
        hits = [json.loads(line)["series_hit"] for line in got.splitlines() if "series_hit" in line]
        assert [(h["step"], h["condition"]) for h in hits] == [(30, "lr_change")]
    finally:
        trainer.kill()
        trainer.wait()


def test_half_written_mindspore_files_are_never_called_corrupt(tmp_path: Any) -> None:
    root = str(tmp_path / "ms")
    writer = threading.Thread(target=followrun.mindspore_arrives, args=(root, 0.3))
    writer.start()
    try:
        followrun.wait_for(os.path.join(root, "rank_0", "Net", "0", "0"))
        scan = _tdbg("scan", root, "--follow", "--json", "--poll", "0.1", "--no-cache", "--idle-exit", "3",
                     "--watch", "activation_saturated_layer", "--watch", "weight_not_changed")
        got, err = scan.communicate(timeout=180)
    finally:
        writer.join()
    lines = [json.loads(line) for line in got.splitlines()]
    warnings = [ln["warning"] for ln in lines if "warning" in ln]
    assert not [w for w in warnings if "corrupt" in w or "truncated" in w or "cannot" in w], warnings
    assert not [ln for ln in lines if "error" in ln], got
    scanned = sorted(i for ln in lines if "scanned" in ln for i in ln["scanned"]["iterations"])
    assert scanned == list(range(8)), got + err
    # the sample's planted faults, found as the offline scan finds them
    hits = {(h["watchpoint"], h["iteration"]) for h in lines if "watchpoint" in h}
    offline = subprocess.run([sys.executable, "-m", "debugger.cli", "scan", SINGLE, "--json", "--no-cache",
                              "--watch", "activation_saturated_layer", "--watch", "weight_not_changed"],
                             capture_output=True, text=True)
    want = {(h["watchpoint"], h["iteration"]) for h in json.loads(offline.stdout)["hits"]}
    assert hits == want and scan.returncode == 1


def test_an_msprobe_dump_being_written_is_scanned_as_it_will_be(tmp_path: Any) -> None:
    root = str(tmp_path / "msprobe")
    os.makedirs(root)
    assert run_cli("scan", str(tmp_path / "nowhere"), "--follow").code == 2      # no such folder: at once
    assert run_cli("scan", root, "--follow", "--poll", "0").code == 2
    assert run_cli("scan", root, "--follow", "--iterations", "0-1").code == 2
    writer = threading.Thread(target=followrun.msprobe_arrives, args=(root, 0.4))
    writer.start()
    try:      # started on an empty folder: it waits for the dump to appear
        scan = _tdbg("scan", root, "--follow", "--json", "--poll", "0.1", "--no-cache", "--idle-exit", "3")
        got, err = scan.communicate(timeout=180)
    finally:
        writer.join()
    lines = [json.loads(line) for line in got.splitlines()]
    assert not [ln for ln in lines if "warning" in ln], got
    assert sorted(i for ln in lines if "scanned" in ln for i in ln["scanned"]["iterations"]) == [0, 1], got + err
    offline = json.loads(subprocess.run([sys.executable, "-m", "debugger.cli", "scan", MSPROBE, "--json", "--no-cache"],
                                        capture_output=True, text=True).stdout)
    key = lambda d: (d["watchpoint"], d["iteration"], d["node"])  # noqa: E731
    assert sorted(key(h) for h in lines if "watchpoint" in h and "error" not in h) == sorted(map(key, offline["hits"]))
    assert len([ln for ln in lines if "error" in ln]) == len(offline["errors"]) and scan.returncode == 1


def test_a_finished_dump_is_scanned_whole_at_the_first_poll(tmp_path: Any) -> None:
    """Files an hour old: the first poll knows the dump is quiet (the newest mtime), scans every iteration,
    newest included, and --idle-exit counts from the files' last change, so following ends at once."""
    root = str(tmp_path / "single")
    followrun.aged_copy(SINGLE, root, 3600)
    scan = _tdbg("scan", root, "--follow", "--json", "--no-cache", "--idle-exit", "600",
                 "--watch", "activation_saturated_layer")
    got, err = scan.communicate(timeout=120)       # it would follow for 600 s if it waited for quiet
    scanned = [ln["scanned"] for ln in map(json.loads, got.splitlines()) if "scanned" in ln]
    assert scanned == [{"rank": 0, "iterations": list(range(8))}], got + err
    assert scan.returncode == 1


def test_following_ends_with_coverage_and_exit_4_when_a_watchpoint_checked_nothing(tmp_path: Any) -> None:
    """A statistics dump cannot answer a watchpoint that needs tensor values: following prints what each
    watchpoint checked and ends INCOMPLETE (exit 4; 1 with --strict), never a silent clean exit 0."""
    root = str(tmp_path / "stats")
    followrun.aged_copy(os.path.join(os.path.dirname(SINGLE), "msprobe", "statistics_L0"), root, 3600)
    args = ("scan", root, "--follow", "--no-cache", "--idle-exit", "600", "--watch", "weight_change_too_large",
            "--watch", "weight_overflow")
    got, err = (scan := _tdbg(*args, "--json")).communicate(timeout=120)
    last = json.loads(got.splitlines()[-1])
    assert scan.returncode == 4 and last["verdict"] == "incomplete", got + err
    status = {c["watchpoint"]: c["status"] for c in last["coverage"]["watchpoints"]}
    assert status["weight_change_too_large"] == "unanswered" and status["weight_overflow"] != "unanswered"
    got, err = (scan := _tdbg(*args)).communicate(timeout=120)
    assert scan.returncode == 4 and "Coverage:" in got and "NOT CHECKED" in got and "verdict: incomplete" in got
    assert _tdbg(*args, "--strict").wait(timeout=120) == 1
