"""The shape of a checkout of tdbg, as markdown: module sizes, long functions and the package import graph.

    python benchmarks/structure.py [CHECKOUT]        # default: this checkout

Reads the files only (``ast`` for Python, a brace scan for JavaScript); nothing of the checkout is
imported, so it measures any commit (``git worktree add /tmp/before COMMIT``) with this script.
A function over 80 lines is "reasoned" when a comment holding ``long:`` sits on its first line or in the
comment lines right above it (``# long: one table of 40 cases, read top to bottom``).
"""
from __future__ import annotations

import argparse
import ast
import os
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
import importscan  # noqa: E402   (tests/importscan.py: the same reading of imports the layer test checks)
from jsfunctions import functions as js_functions  # noqa: E402

LONG = 80                           # lines: the bar for a function that does one job
PY_FOLDERS = ("debugger", "web", "tests", "benchmarks")
JS_FOLDERS = (os.path.join("web", "static"), "tests")


@dataclass(frozen=True)
class Function:
    """One function: where it is, how long, and whether a ``long:`` comment gives a reason."""

    path: str
    name: str
    line: int
    lines: int
    reasoned: bool


def _files(root: str, folders: tuple[str, ...], ext: str) -> list[str]:
    out = []
    for folder in folders:
        for d, dirs, names in os.walk(os.path.join(root, folder)):
            dirs[:] = sorted(n for n in dirs if n not in ("__pycache__", "node_modules") and not n.startswith("."))
            out += [os.path.relpath(os.path.join(d, n), root) for n in sorted(names) if n.endswith(ext)]
    return sorted(set(out))


def _line_count(path: str) -> int:
    with open(path, encoding="utf-8", errors="replace") as f:
        return sum(1 for _ in f)


def _comment(line: str) -> str:
    """The comment part of a Python or JavaScript line ('' when none)."""
    cuts = [i for i in (line.find("#"), line.find("//")) if i >= 0]
    return line[min(cuts):] if cuts else ""


def _reasoned(lines: list[str], first: int) -> bool:
    """A ``long:`` comment on line ``first`` (1-based) or in the comment (or decorator) lines right above it."""
    if "long:" in _comment(lines[first - 1]):
        return True
    i = first - 2
    while i >= 0 and lines[i].strip().startswith(("#", "//", "@")):
        if "long:" in _comment(lines[i]):
            return True
        i -= 1
    return False


def python_functions(root: str, rel: str) -> list[Function]:
    """Every function and method of a Python file (nested ones too) with its length in lines."""
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        text = f.read()
    lines = text.splitlines()
    out = []
    for node in ast.walk(ast.parse(text, rel)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            out.append(Function(rel, node.name, node.lineno, node.end_lineno - node.lineno + 1,
                                _reasoned(lines, first) or _reasoned(lines, node.lineno)))
    return out


def javascript_functions(root: str, rel: str) -> list[Function]:
    """Every function of a JavaScript file with its length in lines."""
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        text = f.read()
    lines = text.splitlines()
    return [Function(rel, fn.name, fn.start, fn.lines, _reasoned(lines, fn.start)) for fn in js_functions(text)]


def unit(module: importscan.Module) -> str:
    """The package-level node a module belongs to: a top module or sub-package of debugger (a format's folder
    on its own), or the web package."""
    parts = module.name.split(".")
    if parts[0] == "tdbg_web":
        return "web"
    if parts[1:2] == ["formats"] and (len(parts) > 3 or (len(parts) == 3 and module.is_package)):
        return ".".join(parts[:3])
    return ".".join(parts[:2]) if len(parts) > 1 else parts[0]


def import_edges(root: str) -> dict[tuple[str, str], Counter]:
    """(from unit, to unit) -> counts of import statements: module level, local (in a function), type-only."""
    mods = importscan.modules(root)
    known = {m.name: m for m in mods}
    statements: dict[tuple[str, str], set] = defaultdict(set)
    for m in mods:
        for imp in importscan.imports(root, m):
            target = importscan.resolve(imp.target, known)
            if target is None or unit(target) == unit(m):
                continue
            how = "type-only" if imp.type_only else "local" if imp.local else "module"
            statements[(unit(m), unit(target))].add((m.name, imp.line, how))
    return {edge: Counter(how for _, _, how in stmts) for edge, stmts in statements.items()}


def _table(header: list[str], rows: list[list[object]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return out + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]


def sizes_section(root: str) -> list[str]:
    """Lines per package (debugger, web, JavaScript) and the largest modules."""
    py = {m.path: _line_count(os.path.join(root, m.path)) for m in importscan.modules(root)}
    js = {p: _line_count(os.path.join(root, p)) for p in _files(root, (os.path.join("web", "static"),), ".js")}
    by_unit: dict[str, list[int]] = defaultdict(list)
    for m in importscan.modules(root):
        by_unit[unit(m)].append(py[m.path])
    by_unit["web/static (JS)"] = list(js.values())
    rows = [[u, len(v), sum(v)] for u, v in sorted(by_unit.items())]
    rows.append(["**total**", sum(r[1] for r in rows), sum(r[2] for r in rows)])
    largest = sorted({**py, **js}.items(), key=lambda kv: -kv[1])[:15]
    return (["## Module sizes", "", *_table(["package", "modules", "lines"], rows), "",
             "### Largest 15 modules", "", *_table(["module", "lines"], [[f"`{p}`", n] for p, n in largest]), ""])


def all_functions(root: str) -> list[Function]:
    """Every function of the checkout's Python and JavaScript."""
    found = [f for rel in _files(root, PY_FOLDERS, ".py") for f in python_functions(root, rel)]
    return found + [f for rel in _files(root, JS_FOLDERS, ".js") for f in javascript_functions(root, rel)]


def long_functions(root: str) -> list[Function]:
    """The functions over LONG lines, longest first."""
    return sorted((f for f in all_functions(root) if f.lines > LONG), key=lambda f: -f.lines)


def functions_section(root: str) -> list[str]:
    """Functions over LONG lines, Python and JavaScript, reasoned or not."""
    found = all_functions(root)
    long = sorted((f for f in found if f.lines > LONG), key=lambda f: -f.lines)
    rows = [[f"`{f.path}:{f.line}`", f"`{f.name}`", f.lines, "yes" if f.reasoned else "**no**"] for f in long]
    summary = Counter((f.path.split(os.sep)[0], f.reasoned) for f in long)
    counts = ", ".join(f"{top}: {summary[(top, False)]} without a reason, {summary[(top, True)]} with one"
                       for top in sorted({t for t, _ in summary}))
    return ([f"## Functions over {LONG} lines", "", f"{len(long)} of {len(found)} functions ({counts or 'none'}).", "",
             *_table(["where", "function", "lines", "reason given"], rows), ""])


def imports_section(root: str) -> list[str]:
    """The package-level import graph: one row per edge, module-level, local and type-only imports apart."""
    edges = import_edges(root)
    rows = [[f"`{a}`", f"`{b}`", c["module"], c["local"], c["type-only"]] for (a, b), c in sorted(edges.items())]
    totals = Counter()
    for c in edges.values():
        totals.update(c)
    return (["## Import graph (package level)", "",
             f"{len(edges)} edges between {len({u for e in edges for u in e})} packages; import statements: "
             f"{totals['module']} module-level, {totals['local']} local, {totals['type-only']} type-only.", "",
             *_table(["from", "to", "module-level", "local", "type-only"], rows), ""])


def report(root: str) -> str:
    """The whole report of the checkout at ``root`` as markdown."""
    head = [f"# Structure of `{os.path.abspath(root)}`", ""]
    return "\n".join(head + sizes_section(root) + functions_section(root) + imports_section(root))


def main(argv: list[str] | None = None) -> int:
    """Print the report of a checkout (default: the one holding this script)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("checkout", nargs="?", default=os.path.dirname(HERE))
    args = ap.parse_args(argv)
    if not os.path.isdir(os.path.join(args.checkout, "debugger")):
        print(f"structure.py: {args.checkout}: no debugger/ folder, not a checkout of tdbg", file=sys.stderr)
        return 2
    print(report(args.checkout))
    return 0


if __name__ == "__main__":
    sys.exit(main())
