"""Which iterations the recorder records, and how finely: ``Recorder(level=...)`` and ``capture_next``.

A level names what an iteration holds (see formats.records.LEVELS): "ops" every ATen operator,
"modules" one node per module call, "parameters" the weights, gradients, optimizer state and loss.
A schedule maps levels to iterations, e.g. ``{"parameters": None, "ops": range(0, 10**6, 100)}``:
"parameters" every step and "ops" every 100th; an iteration takes the finest level that selects it.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Union

from ..formats.records import LEVEL_OPS, LEVELS
from ..common.selection import parse_iterations

Selection = Union[None, str, range, Iterable[int]]
# Recorder(compiled_ops=...): what an "ops" iteration of a compiled model records (debugger.torch.compiled)
COMPILED_OPS = ("boundary", "eager")


def _as_selection(sel: Selection) -> "set[int] | range | None":
    """None (every iteration), a range (kept lazy: ``range(0, 10**9, 100)`` costs nothing) or a set."""
    if sel is None or isinstance(sel, range):
        return sel
    if isinstance(sel, str):
        return parse_iterations(sel)
    return {int(i) for i in sel}


def _describe(sel: "set[int] | range | None") -> Any:
    """JSON-ready form of a selection for the dump's metadata (at most 1,000 numbers)."""
    if sel is None:
        return "all"
    if isinstance(sel, range):
        return f"range({sel.start}, {sel.stop}, {sel.step})"
    return sorted(sel)[:1000]


class LevelPlan:
    """The level of each iteration: the schedule, plus iterations asked for with :meth:`capture_next`."""

    def __init__(self, level: "str | Mapping[str, Selection]", iterations: Selection = None) -> None:
        if isinstance(level, str):
            schedule = {level: iterations}
        elif isinstance(level, Mapping):
            if iterations is not None:
                raise ValueError("give the iterations of each level in level={...}, not iterations=")
            schedule = dict(level)
        else:
            raise TypeError(f"level must be one of {', '.join(LEVELS)} or a mapping of them to iterations, "
                            f"got {type(level).__name__}")
        unknown = [k for k in schedule if k not in LEVELS]
        if unknown or not schedule:
            raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {unknown[0] if unknown else 'nothing'!r}")
        # finest first: the first level that selects an iteration is its level
        self._schedule = [(lv, _as_selection(schedule[lv])) for lv in reversed(LEVELS) if lv in schedule]
        self._asked: dict[int, str] = {}

    def level_of(self, i: int) -> str | None:
        """The level iteration ``i`` is recorded at (None: not recorded)."""
        asked = self._asked.pop(i, None)
        scheduled = next((level for level, sel in self._schedule if sel is None or i in sel), None)
        return _finer(scheduled, asked)

    def capture_next(self, first: int, n: int, level: str) -> None:
        """Record iterations ``first`` .. ``first + n - 1`` at least at ``level``."""
        if level not in LEVELS:
            raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
        for i in range(first, first + max(0, int(n))):
            self._asked[i] = _finer(level, self._asked.get(i)) or level

    def describe(self) -> dict[str, Any]:
        """The schedule for the dump's metadata."""
        return {level: _describe(sel) for level, sel in self._schedule}

    @property
    def finest(self) -> str:
        """The finest level the schedule uses."""
        return self._schedule[0][0] if self._schedule else LEVEL_OPS


def _finer(a: str | None, b: str | None) -> str | None:
    """The finer of two levels (None: no level)."""
    if a is None or b is None:
        return a or b
    return a if LEVELS.index(a) >= LEVELS.index(b) else b
