"""Plain-text output shared by the command line and the headless demo."""

from __future__ import annotations

from collections.abc import Sequence

from rich.filesize import decimal


def human_bytes(n: int | float) -> str:
    """Sizes people read, in decimal units (rich, a dependency of dagster): 732552 -> '732.6 kB'."""
    return decimal(int(n))


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
