"""What every format shares about source paths: installed libraries and the interpreter's frozen modules
are not the user's code. Each format adds what it knows of its own framework."""
from __future__ import annotations

from typing import Callable

from .records import StackFrame

_LIBRARY_MARKERS = ("site-packages/", "dist-packages/", "<frozen ")


def is_library_path(path: str) -> bool:
    """Whether ``path`` lies in an installed package or is a frozen module (not the user's code)."""
    p = path.replace("\\", "/")
    return any(m in p for m in _LIBRARY_MARKERS)


def library_folder(path: str) -> str | None:
    """The folder of an installed package's file from the package on (``torch/nn/modules/``), with no
    install path; None for a file outside an installed package."""
    p = path.replace("\\", "/")
    for marker in _LIBRARY_MARKERS[:2]:
        i = p.find(marker)
        if i >= 0:
            rest = p[i + len(marker):]
            return rest[:rest.rfind("/") + 1]
    return None


def split_stack(text: str, is_header: Callable[[str], bool],
                parse: Callable[[str, bool], StackFrame | None], outermost_first: bool) -> tuple[StackFrame, ...]:
    """A stack text as frames, innermost first: a node's own frames, then those after the header line
    ``is_header`` finds (its forward node candidates); ``parse(line, candidate)`` reads one frame line."""
    own: list[StackFrame] = []
    candidates: list[StackFrame] = []
    in_candidates = False
    for raw in text.splitlines():
        if is_header(raw):
            in_candidates = True
            continue
        frame = parse(raw, in_candidates)
        if frame is not None:
            (candidates if in_candidates else own).append(frame)
    if outermost_first:
        own.reverse()
        candidates.reverse()
    return tuple(own + candidates)


def dotted_module(scope: str) -> str:
    """The module path of a scope whose components are ``<attribute>-<Class>``: their attributes, dotted
    (``a/network-WithLossCell/fc3-Dense`` -> ``network.fc3``)."""
    return ".".join(part.split("-", 1)[0] for part in scope.split("/") if "-" in part)
