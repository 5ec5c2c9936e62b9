"""Charts for the report, as inline SVG: no script, no font, no URL; labels escaped here.

Each function returns `Markup`, so the autoescaping templates embed it as is; every text that
comes from the data (persona and goal ids, class names) goes through `escape` first.
"""

from __future__ import annotations

from markupsafe import Markup, escape

CELL = 26
BAR_W = 14
PLOT_H = 90


def _shade(value: float | None, hue: str) -> str:
    if value is None:
        return "#eaeef2"
    light = 96 - 56 * max(0.0, min(1.0, value))
    return f"hsl({120 if hue == 'good' else 0}, 62%, {light:.0f}%)"


def heatmap(rows: list[str], cols: list[str], values: dict[tuple[str, str], tuple[int, int]],
            hue: str = "bad", title: str = "") -> Markup:
    """rows x cols cells, each (occurrences, conversations), shaded by their share."""
    label_w = 8 + 7 * max((len(r) for r in rows), default=4)
    head_h = 8 + 6 * max((len(c) for c in cols), default=4)
    width, height = label_w + CELL * len(cols) + 4, head_h + CELL * len(rows) + 4
    parts = [f'<svg width="{width}" height="{height}" role="img" '
             f'aria-label="{escape(title)}" font-family="sans-serif" font-size="11">']
    for j, col in enumerate(cols):
        x = label_w + CELL * j + CELL / 2
        parts.append(f'<text transform="translate({x:.0f},{head_h - 4}) rotate(-60)">{escape(col)}</text>')
    for i, row in enumerate(rows):
        y = head_h + CELL * i
        parts.append(f'<text x="{label_w - 4}" y="{y + 17}" text-anchor="end">{escape(row)}</text>')
        for j, col in enumerate(cols):
            k, n = values.get((row, col), (0, 0))
            share = k / n if n else None
            tip = f"{row} × {col}: {k}/{n}" if n else f"{row} × {col}: no conversation"
            parts.append(f'<rect x="{label_w + CELL * j}" y="{y}" width="{CELL - 2}" height="{CELL - 2}" '
                         f'fill="{_shade(share, hue)}"><title>{escape(tip)}</title></rect>')
    parts.append("</svg>")
    return Markup("".join(parts))


def histogram(bins: list[tuple[str, int]], title: str, unit: str = "") -> Markup:
    """Bars over labelled bins: (label, count)."""
    top = max((n for _, n in bins), default=0) or 1
    width = max(40 + (BAR_W + 4) * len(bins), 6 * len(title) + 10)
    parts = [f'<svg width="{width}" height="{PLOT_H + 46}" role="img" '
             f'aria-label="{escape(title)}" font-family="sans-serif" font-size="10">',
             f'<text x="0" y="10">{escape(title)}</text>']
    for i, (label, n) in enumerate(bins):
        h = PLOT_H * n / top
        x = 30 + (BAR_W + 4) * i
        parts.append(f'<rect x="{x}" y="{16 + PLOT_H - h:.1f}" width="{BAR_W}" height="{h:.1f}" fill="#57606a">'
                     f'<title>{escape(label)}{escape(unit)}: {n}</title></rect>')
        if len(bins) <= 16 or i % max(1, len(bins) // 8) == 0:
            parts.append(f'<text x="{x}" y="{PLOT_H + 30}">{escape(label)}</text>')
    parts.append(f'<text x="0" y="{PLOT_H + 44}">max {top} conversations per bar</text></svg>')
    return Markup("".join(parts))
