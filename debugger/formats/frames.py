"""What every format shares about source paths: installed libraries and the interpreter's frozen modules
are not the user's code. Each format adds what it knows of its own framework."""
from __future__ import annotations

_LIBRARY_MARKERS = ("site-packages/", "dist-packages/", "<frozen ")


def is_library_path(path: str) -> bool:
    """Whether ``path`` lies in an installed package or is a frozen module (not the user's code)."""
    p = path.replace("\\", "/")
    return any(m in p for m in _LIBRARY_MARKERS)
