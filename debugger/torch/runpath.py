"""One dump, one run: a recorder never writes into a rank folder that already holds a recorded run (its
iterations would replace the earlier run's, and every reader would judge the mixture as one run)."""
from __future__ import annotations

import os

from ..formats.tdbg_h5.layout import GRAPH_RE, ITERATION_RE, rank_dir_name
from ..formats.tdbg_h5.series import SEGMENT_RE, SERIES_DIR


def refuse_earlier_run(root: str, rank: int) -> None:
    """FileExistsError naming the folder when rank ``rank`` of the dump at ``root`` was recorded before."""
    rank_dir = os.path.join(os.path.abspath(root), rank_dir_name(rank))
    held = _listed(rank_dir)
    its = sorted(int(m.group(1)) for n in held if (m := ITERATION_RE.match(n)))
    graphs = [n for n in held if GRAPH_RE.match(n)]
    steps = [n for n in _listed(os.path.join(rank_dir, SERIES_DIR)) if SEGMENT_RE.match(n)]
    if not (its or graphs or steps):
        return
    what = ", ".join(p for p in (f"{len(its)} iteration(s)" if its else "", f"{len(graphs)} graph(s)" if graphs else "",
                                 f"{len(steps)} series segment(s)" if steps else "") if p)
    raise FileExistsError(f"{rank_dir} already holds a recorded run ({what}): a new run there would mix with it "
                          "(its iterations replacing the earlier ones); record into a new folder, or remove this one")


def _listed(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:         # absent (a new dump), or unreadable: the writer then says so
        return []
