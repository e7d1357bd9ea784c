"""msprobe's stack frames (``File P, line N, in f, \\n code``, innermost first) as StackFrames, and
which of them are the framework's: msprobe dumps PyTorch and MindSpore runs."""
from __future__ import annotations

import re
from typing import Any

from ..frames import is_library_path
from ..records import StackFrame

_FRAME_RE = re.compile(r"^\s*File\s+(?P<file>.+?),\s*line\s+(?P<line>[0-9]+),\s*in\s+(?P<fn>[^,]*),?\s*(?P<code>.*)$",
                       re.S)
# A PyTorch source checkout: its own modules under torch/, not any user folder that happens to be
# called torch (a project's tests/torch/train.py is user code).
_TORCH_RE = re.compile(r"/torch/(?:nn|autograd|optim|utils|distributed|cuda|amp|fx|_[A-Za-z]\w*)/"
                       r"|/torch/(?:_\w+|functional|overrides|serialization|random|library|storage|hub|types)\.py$")


def is_framework_path(path: str) -> bool:
    """An installed library, a PyTorch checkout's own modules, or MindSpore's package."""
    p = path.replace("\\", "/")
    return is_library_path(p) or "/mindspore/" in p or _TORCH_RE.search(p) is not None


def frames(raw: Any) -> tuple[StackFrame, ...]:
    """The frames of one stack.json entry (a list of frame strings), innermost first; others skipped."""
    out = []
    for fr in raw if isinstance(raw, list) else []:
        m = _FRAME_RE.match(fr) if isinstance(fr, str) else None
        if m:
            path = m.group("file")
            code = " ".join(m.group("code").split())
            out.append(StackFrame(path, int(m.group("line")), code=code, is_framework=is_framework_path(path)))
    return tuple(out)
