"""The package list is found: a wheel built from the checkout holds every package folder, a new one included."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _copy_sources(dest: str) -> None:
    """What a build reads (not the dumps or tests), so the build writes nothing into the checkout."""
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist")
    for name in ("debugger", "web"):
        shutil.copytree(os.path.join(ROOT, name), os.path.join(dest, name), ignore=skip)
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(os.path.join(ROOT, name), dest)


def _wheel_files(src: str, out: str) -> set[str]:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", src, "-w", out],
                   check=True, capture_output=True, text=True)
    (wheel,) = [n for n in os.listdir(out) if n.endswith(".whl")]
    with zipfile.ZipFile(os.path.join(out, wheel)) as z:
        return set(z.namelist())


def test_the_wheel_holds_every_package_and_a_new_format_folder(tmp_path):
    src = tmp_path / "src"
    _copy_sources(str(src))
    (src / "debugger" / "formats" / "newformat").mkdir()
    (src / "debugger" / "formats" / "newformat" / "__init__.py").write_text('"""A format added without a packaging edit."""\n')
    files = _wheel_files(str(src), str(tmp_path / "out"))
    packages = {os.path.relpath(d, src).replace(os.sep, "/") for d, _, ns in os.walk(src / "debugger") if "__init__.py" in ns}
    assert "debugger/formats/newformat" in packages
    missing = sorted(p for p in packages if f"{p}/__init__.py" not in files)
    assert not missing, f"packages left out of the wheel: {missing}"
    assert {"tdbg_web/__init__.py", "tdbg_web/static/index.html", "debugger/proto/debug_graph.proto"} <= files
    assert not any(n.startswith("web/") for n in files)      # installed as tdbg_web only


def _readme_command(number: int) -> str:
    """Command ``number`` of the README's "Two commands" block."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    block = text[text.index("## Two commands"):]
    block = block[block.index("```bash") + 7:]
    lines = block[:block.index("```")].splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith(f"# {number}."))
    return next(ln for ln in lines[at + 1:] if ln and not ln.startswith("#"))


def test_the_readme_first_command_installs_into_a_fresh_virtual_environment(tmp_path):
    """Command 1 makes a virtual environment (a system pip may refuse to install) and installs there: run as
    written up to `tdbg serve` (which would block), in a copy of the sources, then `tdbg info` from it."""
    command = _readme_command(1)
    assert command.startswith("python3 -m venv .venv && . .venv/bin/activate && pip install -e . && "), command
    src = tmp_path / "checkout"
    src.mkdir()
    _copy_sources(str(src))
    shutil.copytree(os.path.join(ROOT, "dumps_sample", "single"), src / "dumps_sample" / "single")
    install = command.split(" && tdbg serve")[0].replace("python3 -m venv", f"{sys.executable} -m venv")
    done = subprocess.run(["bash", "-c", f"{install} && tdbg info dumps_sample/single"], cwd=src,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "mindspore: MindSpore 2.10.0" in done.stdout and os.path.isdir(src / ".venv")
