"""Source stacks as every format gives them (StackFrames): user code first, frames indexed to nodes,
and the user's Python read for statements and layer definitions."""
from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from ..errors import QueryError
from ..formats.frames import is_library_path, library_folder
from ..formats.records import StackFrame


def user_first(frames: Iterable[StackFrame]) -> list[StackFrame]:
    """Frames with the user's code before framework code, order kept within each group."""
    frames = list(frames)
    return [f for f in frames if not f.is_framework] + [f for f in frames if f.is_framework]


@dataclass(frozen=True)
class CodeHit:
    """One node created by a source line."""

    graph_id: int
    node: str
    direction: str  # "forward" | "backward"


class SourceIndex:
    """Frames to nodes: ``train.py:14`` finds its nodes through two dict look-ups."""

    def __init__(self) -> None:
        self._by_basename: dict[str, set[str]] = defaultdict(set)
        self._by_file_line: dict[tuple[str, int], list[CodeHit]] = defaultdict(list)
        self._lines_by_file: dict[str, set[int]] = defaultdict(set)
        self._code: dict[tuple[str, int], str] = {}
        self._framework: dict[str, bool] = {}

    def add(self, graph_id: int, node: str, frames: Sequence[StackFrame], backward: bool) -> None:
        """Index the frames of one node."""
        seen: set[tuple[str, int]] = set()
        for f in frames:
            lines = range(f.line, f.end_line + 1) if f.covers(f.end_line) else (f.line,)
            direction = "backward" if (backward or f.forward_candidate) else "forward"
            for ln in lines:
                key = (f.file, ln)
                if key in seen:
                    continue
                seen.add(key)
                self._by_file_line[key].append(CodeHit(graph_id, node, direction))
            self._by_basename[_basename(f.file)].add(f.file)
            self._lines_by_file[f.file].add(f.line)
            self._code.setdefault((f.file, f.line), f.code)
            self._framework[f.file] = f.is_framework

    def files(self, suffix: str) -> list[str]:
        """Indexed source paths ending with ``suffix`` (matched on whole path components)."""
        suffix = suffix.replace("\\", "/")
        candidates = self._by_basename.get(_basename(suffix), set())
        return sorted(p for p in candidates if _path_endswith(p, suffix))

    def nodes_at(self, file_suffix: str, line: int,
                 statement: "Callable[[str, int], Sequence[int]] | None" = None) -> list[tuple[str, CodeHit]]:
        """Every (file, hit) created by ``file_suffix:line``.

        ``statement(path, line)`` gives the lines of the statement that holds ``line`` (from the
        source file, when it can be read): a line inside a multi-line statement then finds the nodes
        the stacks recorded at any of the statement's lines.
        """
        out: list[tuple[str, CodeHit]] = []
        for path in self.files(file_suffix):
            hits = self._by_file_line.get((path, line), ())
            if not hits and statement is not None:
                seen: set[tuple[int, str]] = set()
                for ln in statement(path, line):
                    for h in self._by_file_line.get((path, ln), ()):
                        if (h.graph_id, h.node) not in seen:
                            seen.add((h.graph_id, h.node))
                            out.append((path, h))
                continue
            out.extend((path, h) for h in hits)
        return out

    def all_files(self) -> list[str]:
        """Every indexed source file."""
        return sorted(self._lines_by_file)

    def lines(self, path: str) -> list[int]:
        """Start lines of frames in ``path`` that created nodes."""
        return sorted(self._lines_by_file.get(path, ()))

    def code(self, path: str, line: int) -> str:
        """Code text the stacks recorded for a line ('' when none)."""
        return self._code.get((path, line), "")

    def is_framework(self, path: str) -> bool:
        """Whether an indexed file is framework code."""
        return self._framework.get(path, is_library_path(path))

    @staticmethod
    def folder(path: str) -> str | None:
        """A library file's folder from its package on (a page shows no install path); None otherwise."""
        return library_folder(path)


def statement_lines(text: str, line: int) -> list[int]:
    """The lines of the innermost simple statement of Python ``text`` that holds ``line`` (the header
    lines of a compound statement); [] when ``line`` is in none or the text does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    best: tuple[int, int] | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        first, last = node.lineno, node.end_lineno or node.lineno
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
            last = max(first, body[0].lineno - 1)    # a compound statement: its header only
        if first <= line <= last and (best is None or last - first < best[1] - best[0]):
            best = (first, last)
    return list(range(best[0], best[1] + 1)) if best else []


def assigned_attribute(text: str, line: int) -> str | None:
    """``fc3`` when ``line`` is in a statement ``self.fc3 = ...`` of an ``__init__`` method: the line
    that defines a layer, whose nodes carry its attribute name in their module path (``backbone.fc3``)."""
    return layer_definitions(text).get(line)


def layer_definitions(text: str) -> dict[int, str]:
    """Every line of a ``self.X = ...`` statement in an ``__init__`` method of Python ``text`` -> ``X``."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    out: dict[int, str] = {}
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef) or fn.name != "__init__":
            continue
        for node in ast.walk(fn):
            if not isinstance(node, (ast.Assign, ast.AnnAssign)):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            name = next((t.attr for t in targets if isinstance(t, ast.Attribute)
                         and isinstance(t.value, ast.Name) and t.value.id == "self"), None)
            if name:
                for ln in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                    out.setdefault(ln, name)
    return out


def parse_location(text: str) -> tuple[str, int]:
    """Split ``FILE:LINE`` into its parts."""
    file, sep, line = text.rpartition(":")
    if not sep or not file or not line.strip().isdigit():
        raise QueryError(None, f"bad code location {text!r}: expected FILE:LINE, e.g. train.py:14")
    return file.strip(), int(line)


def _basename(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def _path_endswith(path: str, suffix: str) -> bool:
    p = path.replace("\\", "/")
    return p == suffix or p.endswith("/" + suffix.lstrip("/")) or (suffix.startswith("/") and p == suffix)
