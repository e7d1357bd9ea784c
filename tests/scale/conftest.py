"""Fixtures of tests/scale: one Dask cluster per module (starting one takes seconds)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any, Iterator

import pytest

from debugger.common.executors import start_local_cluster


@pytest.fixture(autouse=True)
def _cache_elsewhere(monkeypatch: Any, tmp_path: Any) -> None:
    """The CLI's default statistics cache must not land in the home directory."""
    monkeypatch.setenv("TDBG_CACHE_DIR", str(tmp_path / "cli-cache"))


@pytest.fixture(scope="module")
def local_cluster() -> Iterator[Any]:
    """A real LocalCluster of 2 worker processes and its client."""
    distributed = pytest.importorskip("distributed")
    cluster = start_local_cluster(2)
    client = distributed.Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


@pytest.fixture(scope="module")
def loopback_cluster(tmp_path_factory: Any) -> Iterator[str]:
    """A scheduler and 2 workers, each its own process (the `dask` command line) on loopback: its address."""
    distributed = pytest.importorskip("distributed")
    d = tmp_path_factory.mktemp("dask")
    sfile = str(d / "scheduler.json")
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    py = [sys.executable, "-m"]
    procs = [subprocess.Popen([*py, "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--no-dashboard", "--dashboard-address", "127.0.0.1:0", "--scheduler-file", sfile],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)]
    try:
        deadline = time.time() + 60
        while not os.path.exists(sfile) and time.time() < deadline:
            time.sleep(0.1)
        for i in range(2):
            procs.append(subprocess.Popen([*py, "distributed.cli.dask_worker", "--scheduler-file", sfile,
                                           "--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1",
                                           "--name", f"w{i}", "--local-directory", str(d / f"w{i}")],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
        with distributed.Client(scheduler_file=sfile, timeout=60) as client:
            client.wait_for_workers(2, timeout=60)
            address = client.scheduler.address
        yield address
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
