"""Number selections a user types (``0-5,8``) for iterations and ranks, parsed strictly and bounded."""
from __future__ import annotations

import re
from typing import Iterable

_PART = re.compile(r"^(\d+)(?:-(\d+))?$", re.ASCII)
MAX_SELECTED = 10_000_000   # a selection naming more numbers than this is a typo, not a request


def parse_numbers(text: str | None, what: str = "iteration") -> set[int] | None:
    """``0-5,8`` -> {0..5, 8}; None (everything) for None, "" or "all"; ValueError naming ``what``."""
    if text is None or str(text).strip() in ("", "all"):
        return None
    out: set[int] = set()
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        m = _PART.match(part)
        lo = int(m.group(1)) if m else 0
        hi = int(m.group(2)) if m and m.group(2) is not None else lo
        if m is None or lo > hi or len(out) + hi - lo + 1 > MAX_SELECTED:
            raise ValueError(f"bad {what} range {text!r}: expected e.g. 0-5,8")
        out.update(range(lo, hi + 1))
    return out


def parse_iterations(text: str | None) -> set[int] | None:
    """An iteration selection such as ``0-5,8`` (None: all)."""
    return parse_numbers(text, "iteration")


def parse_ranks(text: str | None) -> list[int] | None:
    """A rank selection such as ``0-3,7``, sorted (None: all)."""
    got = parse_numbers(text, "rank")
    return None if got is None else sorted(got)


def ranges_text(values: Iterable[int]) -> str:
    """[0,1,2,5,7,8] -> '0-2,5,7-8': the inverse of :func:`parse_numbers`."""
    vals = sorted(set(values))
    if not vals:
        return "none"
    out, start, prev = [], vals[0], vals[0]
    for v in vals[1:] + [None]:  # type: ignore[list-item]
        if v is not None and v == prev + 1:
            prev = v
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
    return ",".join(out)
