"""Number selections a user types (``0-5,8``) for iterations and ranks, parsed strictly and bounded."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterable

from ..errors import DumpError

if TYPE_CHECKING:
    from ..model import Dump

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


def ranges_text(values: Iterable[int], sep: str = ",") -> str:
    """[0,1,2,5,7,8] -> '0-2,5,7-8': the inverse of :func:`parse_numbers` (``sep=", "`` for prose)."""
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
    return sep.join(out)


def ranks_phrase(values: Iterable[int], sep: str = ",") -> str:
    """``rank 3`` for one rank, ``ranks 0-2,5`` for more (never "ranks 0-0" or "ranks 3")."""
    vals = sorted(set(values))
    return f"rank {vals[0]}" if len(vals) == 1 else f"ranks {ranges_text(vals, sep)}"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 weight``, ``2 weights``: a count with its noun in the right number."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


# -- a selection against what a dump holds ----------------------------------------------------------
def lacking(what: str, requested: Iterable[int], present: Iterable[int], holder: str = "it has") -> str | None:
    """``iterations 8, 100-120 requested but not in the dump (it has 0-7)``; None when nothing lacks."""
    have = set(present)
    missing = sorted(set(requested) - have)
    if not missing:
        return None
    word = what if len(missing) > 1 else what[:-1]
    return (f"{word} {ranges_text(missing, ', ')} requested but not in the dump "
            f"({holder} {ranges_text(have, ', ') if have else 'none'})")


def present_ranks(dump: "Dump", ranks: Iterable[int] | None) -> tuple[list[int] | None, list[str]]:
    """The requested ranks ``dump`` holds (None: all) and a warning naming those it lacks; DumpError (exit 2)
    when it holds none of them: a selection that matches nothing is never answered "no problem"."""
    if ranks is None:
        return None, []
    wanted = sorted(set(ranks))
    note = lacking("ranks", wanted, dump.rank_ids, "it has ranks")
    got = [r for r in wanted if r in dump.rank_ids]
    if not got:
        raise DumpError(dump.root, f"nothing to read: {note}")
    return got, [f"{dump.root}: {note}"] if note else []


def lacking_iterations(dump: "Dump", ranks: list[int] | None, requested: set[int] | None,
                       found: Iterable[int] | None = None) -> list[str]:
    """A warning naming the requested iterations that the selected ranks of ``dump`` did not dump; DumpError
    (exit 2) when they dumped none. ``found``: those a command already found (no listing then unless some lack)."""
    if requested is None:
        return []
    rank_ids = ranks if ranks is not None else dump.rank_ids
    have: set[int] | None = None
    if found is None:
        have = {it for r in rank_ids for it in dump.rank(r).iterations()}
        found = requested & have
    found = set(found)
    if found >= requested:
        return []
    if have is None:
        have = {it for r in rank_ids for it in dump.rank(r).iterations()}
    holder = ("it has" if ranks is None else f"rank {rank_ids[0]} has" if len(rank_ids) == 1
              else f"ranks {ranges_text(rank_ids, ', ')} have")
    note = lacking("iterations", requested, have, holder)
    if not found:
        raise DumpError(dump.root, f"nothing to read: {note}")
    return [f"{dump.root}: {note}"]
