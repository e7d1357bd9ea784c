"""The one begin/end contract of every list a view asks for."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..errors import InvalidQueryError

DEFAULT_PAGE = 500      # items of a page when the caller gives no end
MAX_PAGE = 5000         # items of one page at most


@dataclass(frozen=True)
class Page:
    """Items ``begin`` (inclusive) to ``end`` (exclusive) of a list of ``total`` items."""

    begin: int
    end: int
    total: int
    items: list[Any]

    def to_dict(self, **extra: Any) -> dict[str, Any]:
        """``{"begin", "end", "total", "items"}`` plus any extra keys."""
        return {"begin": self.begin, "end": self.end, "total": self.total, "items": self.items, **extra}


def check_range(begin: int, end: int | None, total: int, limit: int = DEFAULT_PAGE) -> tuple[int, int]:
    """Check a begin/end pair against ``total``; ``end`` None or -1 means ``begin + limit`` (or the end).

    Raises :class:`InvalidQueryError` with the messages the API tests pin, e.g.
    ``end index (4) out of bounds (3)``.
    """
    if begin < 0:
        raise InvalidQueryError(f"begin index ({begin}) is negative")
    if begin > total:
        raise InvalidQueryError(f"begin index ({begin}) out of bounds ({total})")
    if end is None or end == -1:
        end = min(total, begin + min(limit, MAX_PAGE))
    if end < begin:
        raise InvalidQueryError(f"end index ({end}) is before begin index ({begin})")
    if end > total:
        raise InvalidQueryError(f"end index ({end}) out of bounds ({total})")
    if end - begin > MAX_PAGE:
        raise InvalidQueryError(f"page of {end - begin} items exceeds the limit of {MAX_PAGE}")
    return begin, end


def page(items: Sequence[Any], begin: int = 0, end: int | None = None, limit: int = DEFAULT_PAGE) -> Page:
    """One checked page of ``items``."""
    b, e = check_range(begin, end, len(items), limit)
    return Page(b, e, len(items), list(items[b:e]))


