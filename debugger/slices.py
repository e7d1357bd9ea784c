"""Numpy-style index text (``[0, :, 1:3]``) parsed for tensor views."""
from __future__ import annotations

from typing import Any

from .errors import QueryError


def parse_slice(text: str, ndim: int) -> tuple[Any, ...]:
    """Parse a numpy-style index such as ``[0, :, 1:3]`` into a tuple usable on an array."""
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
                    raise ValueError
                nums = [int(b) if b else None for b in bits]
                out.append(slice(*nums))
            else:
                out.append(int(part))
        except ValueError:
            raise QueryError(None, f"bad slice {text!r}: expected integers, ':' and ','") from None
    if len([o for o in out if o is not Ellipsis]) > ndim:
        raise QueryError(None, f"bad slice {text!r}: {len(out)} indices for {ndim} dimensions")
    return tuple(out)
