"""Where a scan session (debugger.watch.session, the web UI's watch panel) keeps a dump's watchpoints
and their hits between runs: one JSON file per dump and list (the user's, the triage's defaults) in the
cache folder (never inside the dump), written atomically."""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from ..common.atomic import write_json_atomic
from ..stats.cache import default_cache_dir

FORMAT = 1   # bump when the stored file changes shape: older files are ignored


def store_path(dump_root: str, cache_dir: str | None = None, kind: str = "watch") -> str:
    """The file of one dump root (named after its real path) under the cache folder; ``kind``: whose list,
    ``watch`` (the user's) or ``triage`` (the triage's defaults, :mod:`debugger.watch.defaults`)."""
    tag = hashlib.blake2b(os.path.realpath(dump_root).encode(), digest_size=8).hexdigest()
    return os.path.join(cache_dir or default_cache_dir(), "watch", f"{kind}-{tag}.json")


def load(path: str) -> dict[str, Any] | None:
    """The stored object, or None when absent, unreadable or of another format."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError, RecursionError):   # our own file, damaged: start afresh
        return None
    return data if isinstance(data, dict) and data.get("format") == FORMAT else None


def save(path: str, data: dict[str, Any]) -> bool:
    """Write ``data`` (with the format) atomically; False when the folder is not writable."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_json_atomic(path, {**data, "format": FORMAT})
    except OSError:
        return False
    return True


__all__ = ["FORMAT", "load", "save", "store_path"]
