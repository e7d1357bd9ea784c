"""Helpers of the comparison tests: copies of the real 2-rank sample to alter, tensor files found
through the opened dump (by kind, param and op type), and rewrites of a dump's names."""
from __future__ import annotations

import os
import re
import shutil
import stat
from typing import Any, Callable, Iterator

import numpy as np
import pytest

from debugger import open_dump
from debugger.proto import debug_graph_pb2
from treehash import tree_digest

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "dumps_sample")
DP2 = os.path.join(SAMPLE, "dp2")
SINGLE = os.path.join(SAMPLE, "single")
WEIGHTS = ["conv1.weight", "fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight", "fc3.bias", "fc3.weight"]
PAIR_KEYS = {"iteration", "a", "b", "node", "param", "kind", "io", "slot", "metrics", "grade", "reason"}
METRIC_KEYS = {"cosine", "max_abs_err", "max_rel_err", "euclidean", "one_thousandth", "five_thousandths"}


_ORIGINAL: dict[str, str] = {}


@pytest.fixture(autouse=True)
def _cache_elsewhere(monkeypatch: Any, tmp_path: Any) -> None:
    """The CLI's default cache must not land in the home directory."""
    monkeypatch.setenv("TDBG_CACHE_DIR", str(tmp_path / "cli-cache"))


@pytest.fixture
def sample_copy(tmp_path: Any) -> Iterator[Callable[..., str]]:
    """Factory: ``sample_copy(name="a", which="dp2")`` copies a real sample dump into tmp_path (writable).

    After the test, the original sample must be byte-unchanged."""
    made: list[str] = []

    def factory(name: str = "a", which: str = "dp2") -> str:
        src = os.path.join(SAMPLE, which)
        if not os.path.isdir(src):
            pytest.skip(f"dumps_sample/{which} is not present")
        _ORIGINAL.setdefault(src, tree_digest(src))
        made.append(src)
        dst = str(tmp_path / name)
        shutil.copytree(src, dst)
        for d, dirs, files in os.walk(dst):
            for x in dirs + files:
                p = os.path.join(d, x)
                os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR | stat.S_IRUSR | (stat.S_IXUSR if x in dirs else 0))
        return dst

    yield factory
    for src in set(made):
        assert tree_digest(src) == _ORIGINAL[src], f"{src} was modified by a test"


def find(root: str, rank: int, iteration: int, node: str, io: str = "output", slot: int = 0) -> str:
    """The tensor file of (node, io, slot) in a rank's iteration (graph 0)."""
    return open_dump(root).rank(rank).tensor(0, iteration, node, io, slot).location


def graph(root: str, rank: int = 0) -> Any:
    """Graph 0 of a rank."""
    return open_dump(root).rank(rank).graph(0)


def kernel(root: str, op_type: str, param: str | None = None, scope: str | None = None) -> str:
    """The only kernel of an op type (and param, scope part) in graph 0's execution order."""
    g = graph(root)
    hits = [n for n in g.execution_order if g.node(n).op_type == op_type
            and (param is None or g.node(n).param == param) and (scope is None or scope in n)]
    assert len(hits) == 1, hits
    return hits[0]


def alter(path: str, fn: Callable[[np.ndarray], np.ndarray]) -> None:
    """Rewrite a tensor file in place (same name) with ``fn(values)``."""
    a = np.load(path)
    b = np.asarray(fn(a.copy()))
    os.remove(path)
    np.save(path, b, allow_pickle=False)


def rewrite_names(root: str, fn: Callable[[str], str]) -> None:
    """Apply ``fn`` to every node name of a dump: the .pb full names and scopes, the .ir text, the
    execution-order csv files and the tensor file names (as a renumbering or renaming run would)."""
    for rank in sorted(os.listdir(root)):
        rdir = os.path.join(root, rank)
        gdir = os.path.join(rdir, "graphs")
        for f in os.listdir(gdir):
            p = os.path.join(gdir, f)
            if f.endswith(".pb"):
                m = debug_graph_pb2.ModelProto()
                with open(p, "rb") as fh:
                    m.ParseFromString(fh.read())
                for n in m.graph.node:
                    n.full_name = fn(n.full_name)
                    n.scope = fn(n.scope)
                with open(p, "wb") as fh:
                    fh.write(m.SerializeToString())
            elif f.endswith(".ir"):
                with open(p, encoding="utf-8") as fh:
                    text = fh.read()
                with open(p, "w", encoding="utf-8") as fh:
                    fh.write(fn(text))
        edir = os.path.join(rdir, "execution_order")
        for f in os.listdir(edir):
            if f.startswith("ms_execution_order"):
                p = os.path.join(edir, f)
                with open(p, encoding="utf-8") as fh:
                    text = fh.read()
                with open(p, "w", encoding="utf-8") as fh:
                    fh.write(fn(text))
        for d, _, files in os.walk(os.path.join(rdir, "Net")):
            for f in files:
                new = fn(f)
                if new != f:
                    os.rename(os.path.join(d, f), os.path.join(d, new))


def shift_op_numbers(text: str, by: int = 10) -> str:
    """``-op3`` -> ``-op13``."""
    return re.sub(r"-op(\d+)", lambda m: f"-op{int(m.group(1)) + by}", text)
