"""A closed output pipe never changes tdbg's exit status (issue 40 item 6): ``tdbg scan DUMP | head`` used to
exit 0 whatever the scan found, so a CI script with ``set -o pipefail`` passed a failing run. The reader of
tdbg's output is gone before tdbg writes a line: the status is the verdict's, with no traceback."""
from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dumps_sample")


def _closed_early(*args: str) -> tuple[int, str]:
    """Run ``tdbg ARGS`` with its stdout a pipe whose reader closed at once: (exit status, stderr)."""
    proc = subprocess.Popen([sys.executable, "-m", "debugger.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=300)
    return proc.returncode, err


@pytest.mark.parametrize("dump,args,status", [("single", (), 1), ("torch_2d", (), 4), ("torch_2d", ("--json",), 4),
                                              ("single", ("--preset", "parameters", "--node", "nothing*"), 0)])
def test_a_scan_whose_reader_went_away_exits_with_its_verdict(dump: str, args: tuple[str, ...], status: int) -> None:
    code, err = _closed_early("scan", os.path.join(SAMPLE, dump), "--no-cache", *args)
    assert code == status, err[-2000:]
    assert "Traceback" not in err and "Exception ignored" not in err, err[-2000:]


def test_following_ends_when_its_reader_goes_away_with_the_status_so_far(tmp_path: Any) -> None:
    """A finished dump with hits, followed with a long --idle-exit: the closed pipe ends following at once."""
    code, err = _closed_early("scan", os.path.join(SAMPLE, "single"), "--follow", "--no-cache", "--idle-exit", "600")
    assert code == 1 and "Traceback" not in err, err[-2000:]
