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
