"""The command line (`--scheduler ADDRESS`) and the web UI (`tdbg serve --scheduler`) on a scheduler and two
workers started as separate processes on loopback, as on a real cluster."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest

pytest.importorskip("distributed")   # the tdbg[dask] extra (part of the test extra)

from distributed import Client

from clirun import run_cli
from debugger.cli.exits import Exit
from scale_kit import multi_rank_dump, same_converted


@pytest.fixture(scope="module")
def multi(tmp_path_factory: Any) -> str:
    """A generated 4-rank dump with a NaN on rank 2."""
    return multi_rank_dump(str(tmp_path_factory.mktemp("multi") / "dump"), iterations=3)


def _tasks_run(address: str) -> dict[str, int]:
    """Tasks the scheduler has run so far, per function name."""
    with Client(address, timeout=30) as c:
        return c.run_on_scheduler(lambda dask_scheduler: {k: sum(p.state_counts.values())
                                                           for k, p in dask_scheduler.task_prefixes.items()})


@pytest.mark.parametrize("which", ["single", "dp2", "multi"])
def test_cli_scan_and_compare_with_scheduler_match_local(loopback_cluster: str, sample_root: str, multi: str,
                                                         which: str) -> None:
    dump = multi if which == "multi" else os.path.join(sample_root, which)
    before = _tasks_run(loopback_cluster).get("run_chunk", 0)
    local = run_cli("scan", "--no-cache", "--json", "--jobs", "1", dump)
    remote = run_cli("scan", "--no-cache", "--json", "--scheduler", loopback_cluster, dump)
    assert remote.code == local.code == Exit.FOUND
    assert remote.json == local.json
    assert _tasks_run(loopback_cluster).get("run_chunk", 0) > before
    if which != "single":
        before = _tasks_run(loopback_cluster).get("compare_chunk", 0)
        local = run_cli("compare", "--no-cache", "--json", "--all", "--jobs", "1", dump)
        remote = run_cli("compare", "--no-cache", "--json", "--all", "--scheduler", loopback_cluster, dump)
        assert remote.code == local.code and remote.json == local.json
        assert _tasks_run(loopback_cluster).get("compare_chunk", 0) > before


def test_cli_scan_with_scheduler_fills_the_cache_a_local_rescan_reads(loopback_cluster: str, multi: str,
                                                                       tmp_path: Any) -> None:
    from debugger import open_dump
    from debugger.stats.cache import StatsCache
    from debugger.watch import Watchpoint, scan

    cache = str(tmp_path / "cache")
    remote = run_cli("scan", "--json", "--cache-dir", cache, "--scheduler", loopback_cluster,
                     "--watch", "tensor_overflow", multi)
    # another request (one more watchpoint): no stored result, yet every statistic comes from the cache
    d = open_dump(multi)
    local = scan(d, [Watchpoint.parse("tensor_overflow"), Watchpoint.parse("tensor_too_large:max_gt=1e30")], jobs=1,
                 cache=StatsCache.for_dump(d.root, cache))
    assert [h.to_dict() for h in local.hits if h.watchpoint == "tensor_overflow"] == remote.json["hits"]
    assert remote.json["hits"] and local.files_checked == 0


def test_cli_convert_with_scheduler_matches_local(loopback_cluster: str, multi: str, tmp_path: Any) -> None:
    here, there = str(tmp_path / "here"), str(tmp_path / "there")
    a = run_cli("convert", "--json", multi, here)
    b = run_cli("convert", "--json", "--scheduler", loopback_cluster, multi, there)
    assert a.code == b.code == Exit.OK
    ja, jb = a.json, b.json
    assert ja.pop("target") == here and jb.pop("target") == there and ja == jb
    same_converted(here, there)


def test_serve_with_scheduler_runs_the_triage_scan_on_the_cluster(loopback_cluster: str, multi: str,
                                                                  tmp_path: Any) -> None:
    from tdbg_web import create_app

    def triage(scheduler: str | None, cache: str) -> dict:
        app = create_app(multi, {"TESTING": True, "CACHE_DIR": cache, "SCHEDULER": scheduler})
        c = app.test_client()
        try:
            r = c.get("/api/triage").get_json()
            deadline = time.time() + 60
            while r["state"] == "running" and time.time() < deadline:
                time.sleep(0.1)
                r = c.get("/api/triage").get_json()
        finally:
            if app.extensions["tdbg"].workers is not None:
                app.extensions["tdbg"].workers.close()
        assert r["state"] == "done", r
        return r["result"]

    before = _tasks_run(loopback_cluster)
    remote = triage(loopback_cluster, str(tmp_path / "c1"))
    after = _tasks_run(loopback_cluster)
    local = triage(None, str(tmp_path / "c2"))
    assert remote == local and remote["hits"] > 0 and remote["agreement"]["summary"]["pairs"] > 0
    assert after.get("run_chunk", 0) > before.get("run_chunk", 0)
    assert after.get("compare_chunk", 0) > before.get("compare_chunk", 0)


def test_without_the_flag_dask_is_never_imported(sample_root: str) -> None:
    code = ("import sys; from debugger.cli import main; "
            f"rc = main(['scan', '--no-cache', '--json', {os.path.join(sample_root, 'dp2')!r}]); "
            f"main(['compare', '--no-cache', '--json', {os.path.join(sample_root, 'dp2')!r}]); "
            "print(json.dumps([m for m in ('dask', 'distributed') if m in sys.modules]))")
    p = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1]) == []


@pytest.mark.parametrize("spec", ["local:0", "local:x y", "tcp:// nowhere"])
def test_a_malformed_scheduler_is_a_usage_error(spec: str, sample_root: str) -> None:
    r = run_cli("scan", "--scheduler", spec, os.path.join(sample_root, "single"))
    assert r.code == Exit.USAGE and "--scheduler" in r.err and "Traceback" not in r.err


def test_an_unreachable_scheduler_is_a_usage_error_naming_it(sample_root: str) -> None:
    env = {**os.environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "1s"}
    p = subprocess.run([sys.executable, "-m", "debugger.cli", "scan", "--no-cache", "--scheduler", "tcp://127.0.0.1:9",
                        os.path.join(sample_root, "single")], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == Exit.USAGE
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in p.stderr and "Traceback" not in p.stderr
