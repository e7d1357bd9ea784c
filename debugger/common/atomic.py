"""Files that are never seen half-written: written whole under a temporary name beside them, then renamed."""
from __future__ import annotations

import json
import os
import threading
from typing import Any


def write_json_atomic(path: str, obj: Any, *, tmp: str | None = None, durable: bool = False, **dump_options: Any) -> None:
    """``obj`` as JSON at ``path``, replacing what is there in one rename. ``tmp``: the temporary name (default:
    unique to this process and thread, so concurrent writers never share one); ``durable``: fsync before the
    rename (survives power loss, not only a crash). An OSError leaves no temporary file behind."""
    tmp = tmp or f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(obj, f, **dump_options)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
