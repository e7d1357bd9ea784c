"""benchmarks/structure.py: long functions (Python and JavaScript) and the package import graph of a checkout."""
from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import jsfunctions  # noqa: E402
import structure  # noqa: E402

JS = """export function short(a) {
  const s = '}', t = "{ // not a comment", r = /[}{]\\/+/g;   // a } in a comment
  return `${a.map((x) => { return `{${x}}`; }).join('}')}` + s + t + r;
}
/* } */
export const arrow = (el, opts) => {
  const o = { a: 1 };
BODY};
class View {
  render(x) {
    if (x) {
      return x / 2;
    }
  }
}
"""


def test_js_functions_skip_braces_in_strings_templates_comments_and_regexes():
    fns = {f.name: f for f in jsfunctions.functions(JS.replace("BODY", "  o.b = 2;\n" * 3))}
    assert (fns["short"].start, fns["short"].end) == (1, 4)
    assert (fns["arrow"].start, fns["arrow"].end) == (6, 11)
    assert (fns["render"].start, fns["render"].end) == (13, 17)
    assert "if" not in fns


def _plant(root, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_report_lists_long_functions_with_their_reasons_and_the_import_edges(tmp_path):
    body = "    x = 1\n" * 85
    _plant(tmp_path, {
        "debugger/__init__.py": "",
        "debugger/model.py": "from .errors import DumpError\n\ndef build():\n" + body,
        "debugger/errors.py": "class DumpError(Exception):\n    pass\n",
        "debugger/cli.py": "def main():\n    from .model import build\n",
        "benchmarks/bench.py": "# long: one measurement read top to bottom\ndef main():\n" + body,
        "web/__init__.py": "from debugger.model import build\n",
        "web/static/js/view.js": JS.replace("BODY", "  o.b = 2;\n" * 90),
    })
    text = structure.report(str(tmp_path))
    assert "| `debugger/model.py:3` | `build` | 86 | **no** |" in text
    assert "| `benchmarks/bench.py:2` | `main` | 86 | yes |" in text
    assert "| `web/static/js/view.js:6` | `arrow` | 93 | **no** |" in text
    assert "| `debugger.model` | `debugger.errors` | 1 | 0 | 0 |" in text
    assert "| `debugger.cli` | `debugger.model` | 0 | 1 | 0 |" in text
    assert "| `web` | `debugger.model` | 1 | 0 | 0 |" in text
    assert "3 edges between 4 packages" in text


def test_structure_runs_on_this_checkout():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "structure.py")],
                         capture_output=True, text=True, check=True).stdout
    assert "## Module sizes" in out and "## Functions over 80 lines" in out and "## Import graph" in out
