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
