"""What a scan checks (:class:`ScanRequest`, which keys its stored result) and how it runs (:class:`ScanRuntime`,
which changes nothing in the result): the two objects that go down the scan path instead of ten arguments."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable

from ..common.selection import parse_iterations
from .registry import Watchpoint

if TYPE_CHECKING:   # the tensor work (numpy, pools) loads after the stored-result lookup, which needs none of it
    from ..common.executors import Workers
    from ..stats.cache import StatsCache


@dataclass(frozen=True)
class ScanRequest:
    """The watchpoints and where they are checked: ``ranks`` (None: every rank of the dump), ``iterations``
    (None: every dumped one), the nodes ``where`` selects, the ranks that report a logical tensor (``scope``;
    None: those scanned) and whether the per-step series' loss is swept for its first non-finite step."""

    watchpoints: tuple[Watchpoint, ...]
    ranks: tuple[int, ...] | None = None
    iterations: frozenset[int] | None = None
    where: str | None = None
    scope: tuple[int, ...] | None = None
    series_sweep: bool = True

    @classmethod
    def of(cls, watchpoints: Iterable[Watchpoint], *, ranks: Iterable[int] | None = None,
           iterations: Iterable[int] | str | None = None, where: str | None = None,
           scope: Iterable[int] | None = None, series_sweep: bool = True) -> "ScanRequest":
        """A request from a caller's arguments (``iterations`` as a set or as text such as ``0-5,8``)."""
        its = parse_iterations(iterations) if isinstance(iterations, str) else iterations
        return cls(tuple(watchpoints), None if ranks is None else tuple(sorted(ranks)),
                   None if its is None else frozenset(its), where, None if scope is None else tuple(sorted(scope)),
                   series_sweep)


@dataclass(frozen=True)
class ScanRuntime:
    """Where the tensor work runs and what it tells: the statistics cache, ``jobs`` local processes or the given
    ``workers`` (a Dask cluster, say), and ``progress(done, total)`` over steps."""

    cache: "StatsCache"
    jobs: int | None = None
    workers: "Workers | None" = None
    progress: Callable[[int, int], None] | None = None
