"""Read a checkout's Python modules with ``ast`` (nothing is imported): their names and what they import.

The layer test (tests/test_layering.py), the framework-text test (tests/test_format_boundary.py) and the
structure report (benchmarks/structure.py) share this one reading of the tree.
"""
from __future__ import annotations

import ast
import os
from dataclasses import dataclass

# Top folders of the checkout that hold tdbg's code, and the name each is installed as
# (pyproject.toml maps the folder web/ to the package tdbg_web).
PACKAGES = {"debugger": "debugger", "web": "tdbg_web"}


@dataclass(frozen=True)
class Module:
    """One Python file of the checkout: its dotted name, path relative to the checkout and whether it is a package."""

    name: str
    path: str
    is_package: bool


@dataclass(frozen=True)
class Import:
    """One imported name: the module holding the import, the line, the target and how the import runs."""

    source: Module
    line: int
    target: str
    local: bool          # inside a function (runs when called), else at module level
    type_only: bool      # under ``if TYPE_CHECKING:``: never runs, names types for annotations


def modules(root: str) -> list[Module]:
    """Every .py file under the checkout's package folders, named as installed."""
    found = []
    for folder, installed in PACKAGES.items():
        for d, dirs, names in os.walk(os.path.join(root, folder)):
            dirs[:] = sorted(n for n in dirs if n != "__pycache__")
            for n in sorted(names):
                if n.endswith(".py"):
                    rel = os.path.relpath(os.path.join(d, n), root)
                    found.append(Module(_dotted(rel, folder, installed), rel, n == "__init__.py"))
    return found


def _dotted(rel: str, folder: str, installed: str) -> str:
    parts = rel[:-3].split(os.sep)
    parts[0] = installed if parts[0] == folder else parts[0]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(root: str, module: Module) -> list[Import]:
    """Every import of ``module`` (module level and inside functions), relative ones made absolute."""
    with open(os.path.join(root, module.path), encoding="utf-8") as f:
        tree = ast.parse(f.read(), module.path)
    package = module.name.split(".") if module.is_package else module.name.split(".")[:-1]
    found: list[Import] = []

    def visit(node: ast.AST, local: bool, type_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.extend(Import(module, child.lineno, t, local, type_only) for t in _targets(child, package))
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    visit(ast.Module(body=[stmt], type_ignores=[]), local, True)
                for stmt in child.orelse:
                    visit(ast.Module(body=[stmt], type_ignores=[]), local, type_only)
            else:
                visit(child, local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)),
                      type_only)

    visit(tree, False, False)
    return found


def _targets(node: ast.Import | ast.ImportFrom, package: list[str]) -> list[str]:
    """The dotted names an import statement binds: ``from a import b`` names both ``a`` and ``a.b``."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = ".".join(package[:len(package) - node.level + 1])
        mod = ".".join(p for p in (base, node.module) if p)
    else:
        mod = node.module or ""
    return [mod] + [f"{mod}.{a.name}" for a in node.names if a.name != "*"]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def resolve(target: str, known: dict[str, Module]) -> Module | None:
    """The checkout's module an import target lands in (``from a import name`` lands in ``a``), None if outside."""
    parts = target.split(".")
    while parts:
        hit = known.get(".".join(parts))
        if hit is not None:
            return hit
        parts.pop()
    return None
