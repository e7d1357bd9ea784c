"""The command table is the CLI's one lazy boundary: `tdbg --help` lists every command from the table
without importing a command's module, and a command imports its own module only."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from debugger.cli import COMMANDS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PROBE = ("import sys, runpy\n"
          "sys.argv = ['tdbg', *sys.argv[1:]]\n"
          "try:\n    runpy.run_module('debugger.cli', run_name='__main__')\n"
          "except SystemExit as exc:\n    code = exc.code\n"
          "print('MODULES', ' '.join(sorted(m for m in sys.modules if m.startswith('debugger.cli.'))))\n"
          "print('HEAVY', ' '.join(m for m in ('numpy', 'h5py', 'networkx', 'flask') if m in sys.modules))\n"
          "sys.exit(code)\n")


def _run(*args: str) -> tuple[int, str, set[str], set[str]]:
    """Exit status, what the command printed, and the command modules and heavy libraries it imported."""
    p = subprocess.run([sys.executable, "-c", _PROBE, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    lines = p.stdout.splitlines()
    modules = next(ln for ln in lines if ln.startswith("MODULES")).split()[1:]
    heavy = next(ln for ln in lines if ln.startswith("HEAVY")).split()[1:]
    shown = "\n".join(ln for ln in lines if not ln.startswith(("MODULES", "HEAVY")))
    return p.returncode, shown, set(modules), set(heavy)


def test_help_lists_every_command_and_imports_none_of_them() -> None:
    code, shown, modules, heavy = _run("--help")
    assert code == 0
    assert set(COMMANDS) == {"info", "node", "code", "scan", "compare", "convert", "graph", "serve", "spikes"}
    for name, command in COMMANDS.items():
        line = next((ln for ln in shown.splitlines() if ln.split()[:1] == [name]), None)
        assert line is not None and command.help.split()[0] in line, (name, shown)
    assert modules <= {"debugger.cli.exits", "debugger.cli.failures", "debugger.cli.pipes"}, modules   # no command module: the exit statuses', the error line's and the pipe's helpers
    assert heavy == set(), heavy


@pytest.mark.parametrize("name", ["scan", "compare"])
def test_a_command_imports_its_own_module_only(name: str) -> None:
    code, shown, modules, _ = _run(name, "--help")
    assert code == 0 and f"usage: tdbg {name}" in shown
    commands = {m.split(".")[2] for m in modules} & {c.module for c in COMMANDS.values()}
    assert commands == {name}, modules


def test_an_unknown_command_is_usage_and_names_the_choices() -> None:
    code, _, modules, _ = _run("frobnicate", "x")
    assert code == 2 and modules <= {"debugger.cli.exits", "debugger.cli.failures", "debugger.cli.pipes"}
