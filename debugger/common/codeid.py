"""What identifies the code that computed a stored result: every module file of the package (name, size,
modification time; the version number lives in one of them). A stored scan or triage is keyed by it, so an edited rule, a pulled
checkout or an editable install at the same version number never answers with what older code found."""
from __future__ import annotations

import functools
import hashlib
import os

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@functools.lru_cache(maxsize=1)
def code_id() -> str:
    """A digest of this process's tdbg code (one stat per module, once per process)."""
    h = hashlib.blake2b(digest_size=16)
    for folder, dirs, files in os.walk(_PACKAGE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            h.update(f"{os.path.relpath(path, _PACKAGE)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()
