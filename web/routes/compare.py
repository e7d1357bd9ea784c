"""Every rank against a base rank (`tdbg compare --json`), its pairs paged."""
from __future__ import annotations

from typing import Any

from flask import Blueprint

from debugger import QueryError
from debugger.views import triage as _triage

from ..params import current_dump_id, flag_arg, int_arg, paged, workspace

compare_bp = Blueprint("compare", __name__, url_prefix="/api")


def _settled_iterations(d: Any, below: int) -> set[int]:
    """The dump's iterations below ``below`` (a QueryError when there is none yet)."""
    its = _triage.iterations_below(d, below)
    if not its:
        raise QueryError(d.root, f"no iteration is complete yet: the job is still writing iteration {below}")
    return its


@compare_bp.get("/compare")
def compare() -> tuple[dict[str, Any], int]:
    """Every rank against ``base`` (``debugger.compare.compare_ranks``): the `tdbg compare --json`
    object with its pairs paged (warning and error pairs, worst first; ``all=1`` for every pair).
    501 with a note when the compare module is not installed."""
    try:
        from debugger.compare import compare_ranks  # optional: an install may leave the compare engine out
    except ImportError:
        return {"available": False, "error": "rank comparison is not available in this install "
                "(debugger.compare.compare_ranks is missing)"}, 501
    dump_id = current_dump_id()
    base = int_arg("base", 0) or 0
    all_pairs = flag_arg("all")
    workspace().settle(dump_id)
    below = workspace().settled_below(dump_id)     # a job writing the dump: what it may still be writing is left out
    res = workspace().compared(dump_id, base, lambda d, c: compare_ranks(
        d, base=base, jobs=1, cache=c, iterations=None if below is None else _settled_iterations(d, below)))
    out = res.to_dict(all_pairs=all_pairs)
    if not all_pairs:   # worst first, as the CLI prints them
        out["pairs"] = [p.to_dict() for p in res.divergent()]
    pairs = out.pop("pairs")
    return {"available": True, "base": base, "result": out, "pairs": paged(pairs)}, 200
