"""Stacks of tdbg-h5 version 2 and older graph files: ``nodes/source`` text in the frame lines tdbg's
readers of that time wrote (``In file P:L/code``, MindSpore's forms with line and column ranges, a
``Corresponding forward node candidate`` header), with ``nodes/source_outermost_first`` its order.
Version 3 stores frames as columns; this module only reads the old files (the text form is frozen)."""
from __future__ import annotations

import re

from ..frames import dotted_module, is_library_path, split_stack
from ..records import StackFrame

_FRAME_RE = re.compile(
    r"In file\s+(?P<file>.+?)"
    r"(?:\((?P<pline>\d+)\)|:(?P<line>\d+)(?:~(?P<end>\d+))?(?:,\s*(?P<col>\d+)~(?P<colend>\d+))?)"
    r"(?:/(?P<code>.*))?$"
)
_CANDIDATE_RE = re.compile(r"Corresponding forward node candidate", re.IGNORECASE)
# What readers of version 2 took for framework code (a library, MindSpore's package, a torch checkout).
_FRAMEWORK_RE = re.compile(r"/mindspore/|/torch/(?:nn|autograd|optim|utils|distributed|cuda|amp|fx|_[A-Za-z]\w*)/"
                           r"|/torch/(?:_\w+|functional|overrides|serialization|random|library|storage|hub|types)\.py$")


def _frame(text: str, forward_candidate: bool) -> StackFrame | None:
    s = text.strip().lstrip("#").strip()
    if s.startswith("- "):
        s = s[2:].strip()
    m = _FRAME_RE.search(s)
    if not m:
        return None
    start = int(m.group("pline") or m.group("line"))
    code = (m.group("code") or "").rstrip()
    code = code[:-1] if code.endswith("/") else code
    path = m.group("file").strip()
    column = int(m.group("col")) + 1 if m.group("col") else 0
    framework = is_library_path(path) or _FRAMEWORK_RE.search(path.replace("\\", "/")) is not None
    return StackFrame(path, start, int(m.group("end") or start), column, code.strip(), framework, forward_candidate)


def module_of_scope(scope: str) -> str:
    """A version 2 node's module: its writers named each scope component ``<attribute>-<Class>``."""
    return dotted_module(scope)


def parse_source_text(text: str, outermost_first: bool) -> tuple[StackFrame, ...]:
    """A version 2 ``source`` cell as frames, innermost first: own frames, then forward candidates."""
    return split_stack(text, lambda line: _CANDIDATE_RE.search(line) is not None, _frame, outermost_first)
