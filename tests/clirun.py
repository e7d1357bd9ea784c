"""Run the tdbg CLI in-process and capture what it prints."""
from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any

from debugger.cli import main


@dataclass
class CliResult:
    """Exit code and output of one CLI run."""

    code: int
    out: str
    err: str

    @property
    def json(self) -> Any:
        """stdout parsed as JSON."""
        return json.loads(self.out)


def run_cli(*args: str) -> CliResult:
    """``tdbg ARGS`` in this process."""
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), out=out, err=err)
    return CliResult(code, out.getvalue(), err.getvalue())


# what a dump without activations (level "parameters", a compiled program's fused operators) leaves unanswered
ACTIVATION_WATCHPOINTS = frozenset({"activation_saturated_layer", "activation_dead_layer"})


def scan_quiet(path: str, *args: str, unanswered: frozenset[str] = ACTIVATION_WATCHPOINTS) -> CliResult:
    """``tdbg scan PATH ARGS --json`` of a healthy run: no hit; exit 0, or 4 when the watchpoints that checked
    nothing (named in the coverage) are among ``unanswered``."""
    r = run_cli("scan", path, *args, "--json")
    assert r.code in (0, 4), (r.code, r.err)
    doc = r.json
    assert doc["hits"] == [], doc["hits"][:3]
    names = {u.split(":")[0] for u in doc["coverage"]["unanswered"]}
    assert names <= unanswered, doc["coverage"]["unanswered"]
    assert (r.code, doc["verdict"]) == ((4, "incomplete") if names else (0, "clean")), (r.code, names)
    return r
