"""The user's source stack of the operator being run, as StackFrames."""
from __future__ import annotations

import linecache
import os
import sys
import sysconfig
import types

import torch

from ..formats.records import StackFrame

_SKIP_DIRS = tuple(os.path.normcase(os.path.realpath(p)) + os.sep for p in {
    os.path.dirname(torch.__file__),
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),          # debugger/
    sysconfig.get_paths().get("stdlib", "/nonexistent"),
    sysconfig.get_paths().get("platstdlib", "/nonexistent"),
})
MAX_FRAMES = 8

_user_file: dict[str, bool] = {}
_cache: dict[tuple[tuple[types.CodeType, int], ...], tuple[StackFrame, ...]] = {}


def is_user_file(filename: str) -> bool:
    """Whether ``filename`` is the user's code (not torch, the standard library or tdbg)."""
    got = _user_file.get(filename)
    if got is None:
        if filename.startswith("<"):
            got = False
        else:
            path = os.path.normcase(os.path.realpath(filename))
            got = not path.startswith(_SKIP_DIRS) and "site-packages" not in path
        _user_file[filename] = got
    return got


def user_stack(skip: int = 1) -> tuple[StackFrame, ...]:
    """Frames of user code on the current stack, innermost first (torch, the standard library and tdbg
    are skipped: every frame kept is the user's)."""
    f: types.FrameType | None = sys._getframe(skip)
    key: list[tuple[types.CodeType, int]] = []
    while f is not None and len(key) < MAX_FRAMES:
        code = f.f_code
        if is_user_file(code.co_filename):
            key.append((code, f.f_lineno))
        f = f.f_back
    k = tuple(key)
    frames = _cache.get(k)
    if frames is None:
        frames = _cache[k] = tuple(
            StackFrame(os.path.abspath(code.co_filename), line, code=linecache.getline(code.co_filename, line).strip())
            for code, line in k)
        if len(_cache) > 100_000:
            _cache.clear()
    return frames
