"""MindSpore's stack text (``# In file /p/train.py:14, 22~31/code/``) and cell scopes
(``Default/network-WithLossCell/_backbone-LeNet5/fc3-Dense``) as structured records."""
from __future__ import annotations

import re

from ..frames import dotted_module, is_library_path, split_stack
from ..records import StackFrame

# One frame, in any of the forms MindSpore has written:
#   "In file /p/train.py:14, 22~31/code/"   "In file /p/train.py:13~17, 4~26/code/"
#   "In file /p/train.py(49)/code/"         "In file /p/train.py:49/code/"
_FRAME_RE = re.compile(
    r"In file\s+(?P<file>.+?)"
    r"(?:\((?P<pline>\d+)\)|:(?P<line>\d+)(?:~(?P<end>\d+))?(?:,\s*(?P<col>\d+)~(?P<colend>\d+))?)"
    r"(?:/(?P<code>.*))?$"
)
_CANDIDATE_RE = re.compile(r"Corresponding forward node candidate", re.IGNORECASE)


def is_framework_path(path: str) -> bool:
    """An installed library, or MindSpore's own package (a source checkout included)."""
    return is_library_path(path) or "/mindspore/" in path.replace("\\", "/")


def is_stack_line(text: str) -> bool:
    """Whether a line of a ``.ir`` file belongs to a node's stack text."""
    return "In file" in text or _CANDIDATE_RE.search(text) is not None


def parse_frame(text: str, forward_candidate: bool = False) -> StackFrame | None:
    """One frame line; None when the text is not a frame."""
    s = text.strip().lstrip("#").strip()
    if s.startswith("- "):
        s = s[2:].strip()
    m = _FRAME_RE.search(s)
    if not m:
        return None
    start = int(m.group("pline") or m.group("line"))
    end = int(m.group("end") or start)
    code = (m.group("code") or "").rstrip()
    if code.endswith("/"):
        code = code[:-1]
    path = m.group("file").strip()
    column = int(m.group("col")) + 1 if m.group("col") else 0     # MindSpore counts from 0; 0 means unknown here
    return StackFrame(path, start, max(end, start), column, code.strip(), is_framework_path(path), forward_candidate)


def parse_stack(text: str, outermost_first: bool = False) -> tuple[StackFrame, ...]:
    """A node's stack text as frames, innermost first: its own, then its forward node candidates."""
    return split_stack(text, lambda line: _CANDIDATE_RE.search(line) is not None, parse_frame, outermost_first)


def module_of_scope(scope: str) -> str:
    """The cell path of a scope: its ``<attribute>-<Class>`` components' attributes, dotted
    (``Default/network-WithLossCell/_backbone-LeNet5/fc3-Dense`` -> ``network._backbone.fc3``)."""
    return dotted_module(scope)
