"""The package's folders are its layers: no import cycle, no loose top-level module that one layer alone
uses, and the README's tree of the package names what is there (read with ``ast``, nothing imported)."""
from __future__ import annotations

import os
import re
from collections import defaultdict

import networkx as nx

import importscan

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def import_graph(root: str) -> nx.DiGraph:
    """Module -> module it imports when it runs (local imports too; ``if TYPE_CHECKING:`` ones never run).
    ``from a import b`` is an edge to the module ``a.b`` when b is one, else to ``a``."""
    mods = importscan.modules(root)
    known = {m.name: m for m in mods}
    g = nx.DiGraph()
    g.add_nodes_from(known)
    for module in mods:
        by_line: dict[int, list[str]] = defaultdict(list)
        for imp in importscan.imports(root, module):
            if not imp.type_only:
                by_line[imp.line].append(imp.target)
        for targets in by_line.values():
            first, names = targets[0], targets[1:]
            plain_names = False
            for name in names:
                hit = importscan.resolve(name, known)
                if hit is not None and hit.name == name:
                    g.add_edge(module.name, hit.name)
                else:
                    plain_names = True
            hit = importscan.resolve(first, known)
            if hit is not None and (plain_names or not names):
                g.add_edge(module.name, hit.name)
    g.remove_edges_from(nx.selfloop_edges(g))
    return g


def cycles(root: str) -> list[list[str]]:
    """The groups of modules that import each other, each sorted."""
    return sorted(sorted(c) for c in nx.strongly_connected_components(import_graph(root)) if len(c) > 1)


def loose_modules_of_one_layer(root: str) -> list[str]:
    """Top-level modules of debugger/ (not packages) that only one other top-level package, or none, imports:
    such a module belongs inside that package."""
    g = import_graph(root)
    found = []
    for name in sorted(g):
        parts = name.split(".")
        if len(parts) != 2 or parts[0] != "debugger" or os.path.isdir(os.path.join(root, *parts)):
            continue
        users = {".".join(u.split(".")[:2]) for u in g.predecessors(name)} - {name}
        if len(users) < 2:
            found.append(f"{name} (used by {', '.join(sorted(users)) or 'nothing'})")
    return found


def test_no_import_cycle():
    assert cycles(ROOT) == []


def test_no_loose_module_belongs_to_one_layer():
    assert loose_modules_of_one_layer(ROOT) == []


def _plant(root, files: dict[str, str]) -> str:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return str(root)


def test_the_checks_catch_a_cycle_and_a_loose_module(tmp_path):
    """A package whose __init__ and a module import each other; a module of its own imported by one
    package; a type-only import, which never runs, makes no cycle."""
    root = _plant(tmp_path, {
        "debugger/__init__.py": "", "debugger/errors.py": "",
        "debugger/query/__init__.py": "from .scopes import f\nFOLD = 5\n",
        "debugger/query/scopes.py": "from . import FOLD\nfrom ..errors import E\n",
        "debugger/cli/__init__.py": "from ..helper import h\nfrom ..errors import E\n",
        "debugger/helper.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .cli import x\n",
        "web/__init__.py": ""})
    assert cycles(root) == [["debugger.query", "debugger.query.scopes"]]
    assert loose_modules_of_one_layer(root) == ["debugger.helper (used by debugger.cli)"]


def readme_tree(readme: str) -> list[tuple[str, int]]:
    """The paths the README's "How it is built" tree names (folder/ and file.py at the start of a line,
    nested by two spaces), each with its line number."""
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## How it is built"):]
    block = section[section.index("```") + 3:]
    block = block[:block.index("```")]
    start = text.index(block)
    stack: list[tuple[int, str]] = []
    found = []
    for i, line in enumerate(block.splitlines()):
        m = re.match(r"^( *)((?:[\w.]+/?(?: [\w.]+/?)*))(?:  |$)", line)
        if not m or not m.group(2) or not (m.group(2).endswith("/") or ".py" in m.group(2)):
            continue
        depth = len(m.group(1))
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parent = stack[-1][1] if stack else ""
        for name in m.group(2).split(" "):
            found.append((parent + name, text.count("\n", 0, start) + i + 1))
        if m.group(2).endswith("/") and " " not in m.group(2):
            stack.append((depth, parent + m.group(2)))
    return found


def test_the_readme_tree_names_what_is_there():
    named = readme_tree(os.path.join(ROOT, "README.md"))
    missing = [f"README.md:{line}: {path}" for path, line in named if not os.path.exists(os.path.join(ROOT, path))]
    assert not missing, "the README's tree names what is not there:\n" + "\n".join(missing)
    paths = {p for p, _ in named}
    packages = sorted(f"debugger/{d}/" for d in os.listdir(os.path.join(ROOT, "debugger"))
                      if os.path.isfile(os.path.join(ROOT, "debugger", d, "__init__.py")))
    assert [p for p in packages if p not in paths] == [], "a package of debugger/ the README's tree leaves out"
