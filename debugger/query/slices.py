"""Numpy-style index text (``[0, :, 1:3]``) parsed for tensor views."""
from __future__ import annotations

import re
from typing import Any

from ..errors import QueryError

MAX_SLICE_TEXT = 1000     # characters of index text at most: a tensor has a few dimensions, not thousands
_INT_RE = re.compile(r"[+-]?[0-9]{1,19}")   # ASCII digits only; int() would also take "1_0" and "٣"


def _int(text: str) -> int:
    if not _INT_RE.fullmatch(text):
        raise ValueError(text)
    return int(text)


def parse_slice(text: str, ndim: int) -> tuple[Any, ...]:
    """Parse a numpy-style index such as ``[0, :, 1:3]`` into a tuple usable on an array.

    Raises :class:`QueryError` for anything numpy would reject or that is not integers, ``:``,
    ``,`` and at most one ``...``: a zero step, two ellipses, more indices than dimensions.
    """
    if len(text) > MAX_SLICE_TEXT:
        raise QueryError(None, f"bad slice: {len(text)} characters (at most {MAX_SLICE_TEXT})")
    body = text.strip()
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1]
    if not body.strip():
        return ()
    out: list[Any] = []
    for part in body.split(","):
        part = part.strip()
        try:
            if part == "...":
                out.append(Ellipsis)
            elif ":" in part:
                bits = [b.strip() for b in part.split(":")]
                if len(bits) > 3:
                    raise ValueError(part)
                nums = [_int(b) if b else None for b in bits]
                out.append(slice(*nums))
            else:
                out.append(_int(part))
        except ValueError:
            raise QueryError(None, f"bad slice {text!r}: expected integers, ':' and ','") from None
        if isinstance(out[-1], slice) and out[-1].step == 0:
            raise QueryError(None, f"bad slice {text!r}: slice step cannot be zero")
    if out.count(Ellipsis) > 1:
        raise QueryError(None, f"bad slice {text!r}: at most one '...'")
    indices = len(out) - out.count(Ellipsis)
    if indices > ndim:
        raise QueryError(None, f"bad slice {text!r}: {indices} indices for {ndim} dimensions")
    return tuple(out)
