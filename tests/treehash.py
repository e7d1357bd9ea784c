"""One digest of a directory tree, for the tests that prove tdbg never writes inside a dump."""
from __future__ import annotations

import hashlib
import os


def tree_digest(root: str) -> str:
    """A hash of every directory and file name, file mode and byte under ``root``."""
    h = hashlib.blake2b()
    for d, dirs, files in os.walk(root):
        dirs.sort()
        h.update(b"D" + os.path.relpath(d, root).encode())
        for name in sorted(files):
            path = os.path.join(d, name)
            h.update(b"F" + os.path.relpath(path, root).encode() + str(os.stat(path).st_mode).encode())
            with open(path, "rb") as f:
                h.update(hashlib.blake2b(f.read()).digest())
    return h.hexdigest()
