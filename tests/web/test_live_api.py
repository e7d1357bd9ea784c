"""`tdbg serve` on dumps a running job is still writing, over real HTTP on loopback: a real PyTorch training
process recording tdbg-h5, and a real MindSpore and msprobe dump whose files arrive one by one, each first
half-written. GET /api/live shows new iterations while the job runs; the watchpoints check the new ones in
the server as they settle, so a planted NaN is a hit before the job ends; no half-written file is ever
read (not even when the watchpoint panel asks for every iteration while files are half-written), so none
is reported as corrupt and the hits equal the offline scan's."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable

import pytest

import followrun
from debugger import open_dump
from debugger.views import triage
from liveserver import LiveServer
from tdbg_web import create_app

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "dumps_sample")
# the MindSpore writer's slow file: it lies half-written for a while (followrun.mindspore_arrives)
SIGMOID = urllib.parse.quote("Default/network-WithLossCell/_backbone-Net/sigmoid-Sigmoid/Sigmoid-op0", safe="")
BROKEN = re.compile(r"corrupt|truncat|cannot|unreadable|not valid|incomplete|skipped|bad ", re.I)


def _get(srv: LiveServer, path: str) -> Any:
    with urllib.request.urlopen(srv.url + path.lstrip("/"), timeout=60) as resp:
        return json.loads(resp.read())


def _get_status(srv: LiveServer, path: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(srv.url + path.lstrip("/"), timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _watch(srv: LiveServer, spec: str) -> None:
    req = urllib.request.Request(srv.url + "api/watchpoints", data=json.dumps({"spec": spec}).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=60) as resp:
        assert resp.status == 201


def _until(what: Callable[[], Any], timeout: float, message: str) -> Any:
    end = time.monotonic() + timeout
    while True:
        got = what()
        if got:
            return got
        assert time.monotonic() < end, message
        time.sleep(0.1)


def _on_disk(rank_dir: str) -> list[int]:
    return sorted(int(m.group(1)) for n in os.listdir(rank_dir) if (m := re.match(r"iteration_(\d+)\.h5$", n)))


def test_a_running_job_s_new_iterations_and_planted_nan_show_while_it_runs(tmp_path: Any) -> None:
    out = str(tmp_path / "dump")
    trainer = followrun.start(tmp_path, out, steps=400, nan_at=12, pause=0.25)
    srv = None
    try:
        rank_dir = os.path.join(out, "rank_0")
        followrun.wait_for(os.path.join(rank_dir, "iteration_00000000.h5"))
        srv = LiveServer(create_app(out, {"CACHE_DIR": str(tmp_path / "cache")}))
        _watch(srv, "weight_overflow")
        first = _get(srv, "/api/live?rank=0")
        # the first look runs beside this answer, and finds the job wrote since the listing: the generation
        # may already have gone up once; what counts is that it keeps going up while the job writes
        assert first["ranks"] == [0] and first["watchpoints"] == 1
        # a new iteration on disk is listed by the server within seconds (the page asks every second)
        delays = []
        for _ in range(4):
            have = max(_until(lambda: _get(srv, "/api/live?rank=0")["iterations"], 30, "no iteration listed"))
            newest = _until(lambda: max(_on_disk(rank_dir)) > have and max(_on_disk(rank_dir)), 60, "the job stopped")
            t0 = time.monotonic()
            _until(lambda: newest in _get(srv, "/api/live?rank=0")["iterations"], 20, f"iteration {newest} never listed")
            delays.append(time.monotonic() - t0)
        print(f"new iteration listed after {', '.join(f'{d:.2f}' for d in delays)} s")
        assert max(delays) < 10      # the goal is 2 s (LOOK_S 1 s); generous on a loaded CI machine
        # the planted NaN is found by the server's own checks of the new iterations, while the job runs
        _until(lambda: _get(srv, "/api/live?rank=0")["hits"], 60, "no hit")
        hits = _get(srv, "/api/hits?rank=0")["items"]
        assert trainer.poll() is None, "found only after the job ended"
        assert min(h["iteration"] for h in hits) == 12 and {h["watchpoint"] for h in hits} == {"weight_overflow"}
        live = _get(srv, "/api/live?rank=0")
        assert live["generation"] > first["generation"] and live["error"] is None
        graphs = _get(srv, "/api/ranks/0/graphs")["items"]
        assert max(i for g in graphs for i in g["iterations"]) >= 12     # the graph list follows too
    finally:
        trainer.kill()
        trainer.wait()
        if srv is not None:
            srv.stop()


def _offline(root: str, watch: list[str]) -> set[tuple[str, int, str]]:
    args = [a for w in watch for a in ("--watch", w)]
    got = subprocess.run([sys.executable, "-m", "debugger.cli", "scan", root, "--json", "--no-cache", *args],
                         capture_output=True, text=True, check=False)
    return {(h["watchpoint"], h["iteration"], h["node"]) for h in json.loads(got.stdout)["hits"]}


@pytest.mark.parametrize("fmt", ["mindspore", "msprobe"])
def test_half_written_files_are_never_called_corrupt_and_hits_equal_the_offline_scan(tmp_path: Any, fmt: str) -> None:
    root = str(tmp_path / fmt)
    if fmt == "mindspore":
        first, src, watch = os.path.join(root, "rank_0", "Net", "0", "0"), followrun.SINGLE, [
            "activation_saturated_layer", "weight_not_changed"]
    else:
        os.makedirs(root)
        first, src, watch = os.path.join(root, "step0", "proc0", "dump.json"), followrun.MSPROBE, ["weight_overflow"]
    writer = followrun.arriving(fmt, root, 0.3)
    srv = None
    try:
        followrun.wait_for(first)
        srv = LiveServer(create_app(root, {"CACHE_DIR": str(tmp_path / "cache")}))
        for w in watch:
            _watch(srv, w)
        answers, during, warned, pending, tensors, triages = [], [], [], [], [], []
        while writer.poll() is None:
            answers.append(_get(srv, "/api/live?rank=0"))
            if fmt == "mindspore" and not answers[-1]["quiet"] and answers[-1]["iterations"]:
                tensors.append(_get_status(srv, f"/api/ranks/0/graphs/0/tensor?node={SIGMOID}&iteration="
                                                f"{answers[-1]['iterations'][-1]}"))
            if len(answers) % 5 == 0:      # the watchpoint panel's "all iterations", asked while files are half-written
                during.append(_get(srv, "/api/hits?all=1"))
                info = _get(srv, "/api/info")
                warned.extend(info["warnings"])
                pending.extend(info["pending_warnings"])
                t = _get(srv, "/api/triage")     # the landing page's triage, while files are half-written
                if t["state"] == "done":
                    triages.append(t["result"])
            time.sleep(0.1)
        # the job is over: once quiet, the newest iteration settles and is checked too
        done = _until(lambda: (a := _get(srv, "/api/live?rank=0"))["quiet"] and not a["checking"] and a, 60, "never quiet")
        answers.append(done)
        assert all(a["error"] is None for a in answers)
        assert answers[-1]["generation"] > answers[0]["generation"]
        assert len(answers[-1]["iterations"]) > len(answers[0]["iterations"])      # seen growing
        every = _get(srv, "/api/hits?all=1")
        got = {(h["watchpoint"], h["iteration"], h["node"]) for h in every["items"]}
        want = _offline(src, watch)
        assert got and got == want, (sorted(got - want), sorted(want - got))
        info = _get(srv, "/api/info")
        assert not [w for w in info["warnings"] if BROKEN.search(w)], info["warnings"]
        assert not info["pending_warnings"]
        # while files were half-written, what the reader said of them was held back, never reported
        assert not [w for w in warned if BROKEN.search(w)], warned
        assert [w for w in pending if BROKEN.search(w)] or fmt == "msprobe" and not pending
        assert not [e for e in every["errors"] if BROKEN.search(json.dumps(e))], every["errors"]
        assert during and not [e for d in during for e in d["errors"] if BROKEN.search(json.dumps(e))]
        # the newest iteration's tensor while the job writes: refused as still being written, or whole (or
        # not written yet)
        assert {code for code, _ in tensors} <= {200, 404, 409}
        assert 409 in {code for code, _ in tensors} or fmt == "msprobe", tensors
        assert all("still being written" in body["error"] for code, body in tensors if code == 409)
        assert not [b for c, b in tensors if c == 200 and BROKEN.search(json.dumps(b))]
        # the triage never read a file being written: what it checked while the job wrote left the newest
        # iteration out (and held back what the reader said of it); once quiet it is worked out again, whole,
        # as the offline triage of the finished dump
        offline = triage.triage(open_dump(src))
        assert triages and not [t for t in triages if any(BROKEN.search(w) for w in t["warnings"])]
        assert all(t["below"] is not None and not set(t["left_out"]) & set(t["checked"]) for t in triages)
        assert all(t["errors"] <= offline["errors"] for t in triages)
        whole = _until(lambda: (t := _get(srv, "/api/triage"))["state"] == "done" and t["result"], 60, "no triage")
        assert whole["below"] is None and whole["left_out"] == [] and whole["checked"] == answers[-1]["iterations"]
        assert (whole["errors"], whole["hits"]) == (offline["errors"], offline["hits"])
        assert writer.wait() == 0
    finally:
        writer.kill()
        writer.wait()
        if srv is not None:
            srv.stop()


def test_a_finished_dump_is_quiet_at_the_first_look_and_its_newest_iteration_checked(tmp_path: Any) -> None:
    """Files all an hour old: the server does not wait SETTLE_S to call the dump quiet, so the newest
    iteration is checked at once; the served dump is current (not opened again)."""
    root = str(tmp_path / "single")
    followrun.aged_copy(os.path.join(SAMPLE, "single"), root, 3600)
    srv = LiveServer(create_app(root, {"CACHE_DIR": str(tmp_path / "cache")}))
    try:
        _watch(srv, "activation_saturated_layer")
        live = _until(lambda: (a := _get(srv, "/api/live?rank=0"))["quiet"] and a, 30, "never quiet")
        # idle: since the files last changed (an hour), not since the server's first look
        assert live["idle"] > 3000 and live["generation"] == 0 and live["error"] is None
        assert live["iterations"][-1] == 7
        hits = _get(srv, "/api/hits?rank=0&iteration=7")["items"]
        assert [h["iteration"] for h in hits] == [7]      # the offline scan's one hit in the newest iteration
    finally:
        srv.stop()


def test_files_written_before_the_first_look_are_served(tmp_path: Any) -> None:
    """The job wrote an iteration after the server listed the dump and before the page's first ask: the
    first look serves the dump afresh (its fingerprint alone could not tell: it is taken at that look)."""
    import shutil
    root = str(tmp_path / "single")
    followrun.aged_copy(os.path.join(SAMPLE, "single"), root, 3600)
    srv = LiveServer(create_app(root, {"CACHE_DIR": str(tmp_path / "cache")}))
    try:
        assert _get(srv, "/api/ranks/0/graphs")["items"]        # the server lists the dump
        iterations = os.path.join(root, "rank_0", "Net", "0")
        shutil.copytree(os.path.join(iterations, "7"), os.path.join(iterations, "8"), copy_function=shutil.copy)
        live = _until(lambda: (a := _get(srv, "/api/live?rank=0"))["generation"] and a, 30, "never served afresh")
        assert live["iterations"][-1] == 8 and live["error"] is None
    finally:
        srv.stop()


def test_the_rank_comparison_leaves_out_an_iteration_being_written(tmp_path: Any) -> None:
    """Two data-parallel ranks (the MindSpore sample) whose job is writing iteration 3, rank 1's files
    half-written: the comparison holds iterations 0-2, and nothing of the half-written files; once the
    files are complete and the dump quiet, it is worked out again with iteration 3, as offline."""
    import shutil
    root = str(tmp_path / "dp2")
    followrun.aged_copy(os.path.join(SAMPLE, "dp2"), root, 3600)
    whole: dict[str, bytes] = {}
    for rank in ("rank_0", "rank_1"):
        src, dst = (os.path.join(root, rank, "Net", "0", it) for it in ("2", "3"))
        shutil.copytree(src, dst, copy_function=shutil.copy)       # fresh files: a job writing
        if rank == "rank_1":
            for name in os.listdir(dst):
                path = os.path.join(dst, name)
                with open(path, "rb") as fh:
                    whole[path] = fh.read()
                with open(path, "wb") as fh:
                    fh.write(whole[path][: len(whole[path]) // 2])
    srv = LiveServer(create_app(root, {"CACHE_DIR": str(tmp_path / "cache")}))
    try:
        live = _until(lambda: (a := _get(srv, "/api/live?rank=1"))["looks"] and a, 30, "no look")
        assert not live["quiet"] and live["iterations"] == [0, 1, 2, 3]
        during = _get(srv, "/api/compare?base=0&all=1")
        assert during["result"]["iterations"] == [0, 1, 2]
        assert not BROKEN.search(json.dumps(during)), during["result"]["warnings"]
        for path, data in whole.items():
            with open(path, "wb") as fh:
                fh.write(data)
        _until(lambda: _get(srv, "/api/live?rank=1")["quiet"], 30, "never quiet")
        after = _get(srv, "/api/compare?base=0&all=1")
        offline = subprocess.run([sys.executable, "-m", "debugger.cli", "compare", root, "--ranks", "--json",
                                  "--no-cache"], capture_output=True, text=True, check=False)
        assert after["result"]["iterations"] == [0, 1, 2, 3]
        work = ("computed", "cached", "bytes_compared")        # what was read afresh, not what was found
        want = {k: v for k, v in json.loads(offline.stdout)["summary"].items() if k not in work}
        assert {k: v for k, v in after["result"]["summary"].items() if k not in work} == want
    finally:
        srv.stop()


def test_a_triage_asked_before_any_look_takes_a_dump_still_changing_as_being_written(tmp_path: Any) -> None:
    """No page follows the dump (no GET live): a triage asked while MindSpore files keep arriving waits,
    sees them still changing and leaves out what the job may be writing, reading no half-written file."""
    root = str(tmp_path / "ms")
    writer = followrun.arriving("mindspore", root, 0.8)
    srv = None
    try:
        followrun.wait_for(os.path.join(root, "rank_0", "Net", "0", "0"))
        srv = LiveServer(create_app(root, {"CACHE_DIR": str(tmp_path / "cache")}))
        t = _until(lambda: (x := _get(srv, "/api/triage"))["state"] == "done" and x["result"], 60, "no triage")
        assert writer.poll() is None, "the job ended first: nothing was being written"
        assert t["below"] is not None and not set(t["left_out"]) & set(t["checked"])
        assert not any(BROKEN.search(w) for w in t["warnings"]) and not t["errors"]
    finally:
        writer.kill()
        writer.wait()
        if srv is not None:
            srv.stop()
