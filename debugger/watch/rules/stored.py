"""What statistics a dump stores can decide without values: an unchanged tensor, an update, a saturation
share (debugger.stats.EXTRA_STAT_NAMES)."""
from __future__ import annotations

import math

from ...model import TensorRef
from ...stats.core import Stats


# -- the rule statistics can decide for unchanged tensors ----------------------------------------------
def change_lower_bound(cur: Stats, prev: Stats, n: int) -> float | None:
    """A lower bound on max|cur - prev| from statistics alone (None when no pair of them is known).

    Each term is at most max|d|: the max and the min of two tensors cannot move further apart than
    their largest element difference, |mean(cur) - mean(prev)| = |mean(d)|, and by the triangle
    inequality |l2(cur) - l2(prev)| <= l2(d) <= sqrt(n) * max|d|.
    """
    terms = [abs(a - b) for a, b in ((cur.max, prev.max), (cur.min, prev.min), (cur.mean, prev.mean))
             if a is not None and b is not None]
    if cur.l2norm is not None and prev.l2norm is not None and n > 0:
        terms.append(abs(cur.l2norm - prev.l2norm) / math.sqrt(n))
    return max(terms) if terms else None


def unchanged_from_statistics(cur: Stats, prev: Stats, n: int, same_digest: bool, rtol: float,
                              atol: float) -> bool | None:
    """Whether every |cur - prev| <= atol + rtol * |prev|, decided without values.

    True for equal digests (the change is exactly 0). False when the statistics prove the change
    larger: max(|d| - rtol * |p|) >= max|d| - rtol * max|p|, so a lower bound of max|d| with
    rtol * max|p| taken off that still exceeds atol settles it. None when they cannot tell.
    """
    if same_digest:
        return True
    bound = change_lower_bound(cur, prev, n)
    if bound is None or prev.max is None or prev.min is None:
        return None
    if bound - rtol * max(abs(prev.max), abs(prev.min)) > atol:
        return False
    return None


# -- statistics a dump stores to answer a watchpoint without values (debugger.stats.EXTRA_STAT_NAMES) --
def stored_update(cur: TensorRef, prev: TensorRef) -> dict[str, float] | None:
    """The update statistics stored with a statistics-only ``cur``, when they were taken against the
    value ``prev`` holds: the same tensor at the end of the iteration before, or the value this
    iteration's forward pass read before the update; or the same weight at an earlier run of its graph
    when ``cur``'s own update is stored (the recorder takes it against the iteration before, whatever
    graph that iteration ran: a step whose operators differ, the first one that creates the optimizer's
    state, is another graph). None otherwise: another previous value."""
    if cur.source.has_values:
        return None
    extras = dict(cur.source.stored_extras())
    if "update_max" not in extras:
        return None
    same = (prev.iteration < cur.iteration and prev.key == cur.key) or \
        (prev.iteration == cur.iteration and prev.io == "input")
    return extras if same else None


def excess_from_update(update: dict[str, float], prev: Stats, rtol: float, atol: float) -> float | None:
    """max(|cur - prev| - rtol * |prev|) from stored update statistics, or a stand-in on the same side
    of ``atol`` (unchanged exactly when it is <= atol): the stored value at its own rtol; 0 when
    max|d| <= atol (within tolerance at any rtol); inf when max|d| - rtol * max|p| > atol (a change
    at any rtol). None when they cannot tell."""
    if update.get("update_rtol") == rtol and "update_excess" in update:
        return update["update_excess"]
    if update["update_max"] <= atol:
        return 0.0
    if prev.max is not None and prev.min is not None and \
            update["update_max"] - rtol * max(abs(prev.max), abs(prev.min)) > atol:
        return math.inf
    return None


def stored_saturation(ref: TensorRef, tolerance: float) -> float | None:
    """The stored count of a statistics-only tanh/sigmoid output near an asymptote, when counted at
    ``tolerance``."""
    if ref.source.has_values:
        return None
    extras = ref.source.stored_extras()
    if "saturated" not in extras or extras.get("saturated_tolerance") != tolerance:
        return None
    return extras["saturated"]
