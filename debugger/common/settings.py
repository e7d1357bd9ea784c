"""Settings read from the environment when used, for sizes a user rarely changes and a test must: one place
that names them all."""
from __future__ import annotations

import os


def ranks_at_once(default: int) -> int:
    """How many ranks a pass over a dump holds at a time (listed, scanned or compared, then forgotten):
    ``default``, the module's, unless ``TDBG_RANKS_AT_ONCE`` says otherwise (the many-rank tests set it low,
    so that ten ranks take the path a thousand take)."""
    raw = os.environ.get("TDBG_RANKS_AT_ONCE", "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else default
