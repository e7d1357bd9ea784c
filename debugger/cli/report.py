"""Terminal output for the CLI: sizes, tables, a progress bar."""
from __future__ import annotations

import sys
import time
from typing import Sequence, TextIO


def human_bytes(n: int) -> str:
    """1536 -> '1.5 KiB'."""
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if v < 1024 or unit == "TiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return f"{n} B"


def table(rows: Sequence[Sequence[object]], header: Sequence[str] | None = None, indent: str = "  ") -> str:
    """Left-aligned columns."""
    cells = [[str(c) for c in r] for r in ([list(header)] if header else []) + [list(r) for r in rows]]
    if not cells:
        return ""
    widths = [max(len(r[i]) for r in cells if i < len(r)) for i in range(max(len(r) for r in cells))]
    lines = [indent + "  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in cells]
    if header:
        lines.insert(1, indent + "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def fmt_num(v: float | None) -> str:
    """Compact number formatting for statistics."""
    if v is None:
        return "-"
    if v == 0 or 1e-3 <= abs(v) < 1e5:
        return f"{v:.4g}"
    return f"{v:.3e}"


class Progress:
    """A one-line progress bar on a terminal; silent otherwise."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.label = label
        self.enabled = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.start = time.monotonic()
        self._last = 0.0

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if done < total and now - self._last < 0.1:
            return
        self._last = now
        width = 30
        filled = int(width * done / total) if total else width
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} "
                          f"{now - self.start:.1f}s")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()
