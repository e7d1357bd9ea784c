"""The data flows one way: debugger/ never imports Flask, web/ never reads dump files itself."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_library_and_cli_do_not_import_flask():
    code = ("import sys, debugger, debugger.cli, debugger.watch, debugger.compare, debugger.views; "
            "print('flask' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_web_layer_only_asks_the_library():
    for name in os.listdir(os.path.join(ROOT, "web")):
        if name.endswith(".py"):
            with open(os.path.join(ROOT, "web", name), encoding="utf-8") as f:
                text = f.read()
            for banned in ("np.load", "import numpy", "debugger.formats", "import h5py", " open(", "import pydot"):
                assert banned not in text, f"web/{name} uses {banned}"
