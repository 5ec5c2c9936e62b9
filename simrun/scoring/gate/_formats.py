"""How the gate writes numbers, in the console and in the HTML report alike: rates in percent,
differences of rates in percentage points ("+10.0 pts"), p-values to four places.
"""

from __future__ import annotations


def pct(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f}%"


def pts(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:+.1f} pts"


def size(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f} pts"


def pval(v: float | None) -> str:
    if v is None:
        return "–"
    return "< 0.0001" if v < 1e-4 else f"{v:.4f}"


def cell_name(cell: tuple[str, str]) -> str:
    return f"{cell[0]} × {cell[1]}"
