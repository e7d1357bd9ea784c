"""A cached re-scan loads none of the heavy libraries: measured with ``python -X importtime`` in a real
process, so an eager import added anywhere on the way shows up here."""
from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

# and what a pool of workers needs (multiprocessing, concurrent.futures: ~17 ms of a ~0.2 s re-scan)
HEAVY = ("numpy", "h5py", "networkx", "google.protobuf", "multiprocessing", "concurrent.futures")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _imported(stderr: str) -> set[str]:
    """Every module importtime reports ("import time: self | cumulative | name" lines)."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            if name and name != "imported package":
                names.add(name)
    return names


def _scan(dump: str, cache: str) -> tuple[str, set[str]]:
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "debugger.cli", "scan", "--cache-dir", cache, dump],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode in (0, 1), p.stderr[-2000:]
    return p.stdout, _imported(p.stderr)


@pytest.mark.parametrize("sample", ["single", "torch_single", "msprobe/pair_baseline"])   # one per format
def test_a_cached_rescan_imports_no_heavy_library(sample_root: str, tmp_path: Any, sample: str) -> None:
    dump = os.path.join(sample_root, sample)
    cache = str(tmp_path / "cache")
    first_out, first = _scan(dump, cache)
    assert {"numpy", "debugger.model", "debugger.watch.batch"} <= first  # the parse sees what a scan loads
    again_out, again = _scan(dump, cache)
    assert again_out == first_out and "debugger.watch.engine" in again
    loaded = [h for h in HEAVY if h in again]
    assert loaded == [], f"a cached re-scan imported {loaded}"


def test_public_names_still_import(tmp_path: Any) -> None:
    code = ("import sys, debugger, debugger.formats as f, debugger.query as q, debugger.compare as c\n"
            "from debugger import Dump, open_dump, StatsCache, Stats, Graph, KINDS, tensor_stats\n"
            "from debugger.formats.tdbg_h5.reader import FORMAT\n"
            "from debugger.formats.tdbg_h5.writer import DumpWriter\n"
            "from debugger.formats.tdbg_h5.tensor import H5Tensor\n"
            "from debugger.formats.tdbg_h5.arrays import digest_of\n"
            "from debugger.formats.msprobe.reader import FORMAT as M\n"
            "assert f.TDBG_H5.load() is FORMAT and q.FOLD > 0 and c.GradeThresholds and M.name == 'msprobe'\n"
            "assert set(debugger.__all__) <= set(dir(debugger))\n"
            "try:\n    debugger.nothing\nexcept AttributeError:\n    pass\nelse:\n    sys.exit(1)\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
