"""Charts for the report, as inline SVG: no script, no font, no URL; labels escaped here.

Each function returns `Markup`, so the autoescaping templates embed it as is; every text that
comes from the data (persona and goal ids, class names) goes through `escape` first.

Text is laid out from a generous estimate of its width (no font is measured: the viewer's own
sans-serif is used), so that no label is cut and no two labels overlap; the Chromium test
checks both on the rendered report.
"""

from __future__ import annotations

import math

from markupsafe import Markup, escape

CELL = 26
BAR_W = 14
BAR_STEP = BAR_W + 4
PLOT_H = 90
CHAR_W = 0.62           # width of one character, in font sizes: wider than any sans-serif's digits


def text_width(text: str, font_size: float) -> float:
    return len(text) * CHAR_W * font_size


def _shade(bad_share: float | None) -> str:
    """Red by the share of bad conversations: a failing cell is dark, a healthy one pale."""
    if bad_share is None:
        return "#eaeef2"
    light = 97 - 62 * max(0.0, min(1.0, bad_share))
    return f"hsl(0, 70%, {light:.0f}%)"


def heatmap(rows: list[str], cols: list[str], values: dict[tuple[str, str], tuple[int, int]],
            hue: str = "bad", title: str = "") -> Markup:
    """rows x cols cells, each (occurrences, conversations), shaded by their share; with
    hue "good" the share is of a good outcome (goal reached), and its complement is shaded, so a
    cell where the goal was missed stands out."""
    size = 11
    label_w = 8 + max((text_width(r, size) for r in rows), default=30)
    head_h = 8 + max((text_width(c, size) for c in cols), default=30)
    width, height = label_w + CELL * len(cols) + 4, head_h + CELL * len(rows) + 4
    parts = [f'<svg width="{width:.0f}" height="{height:.0f}" role="img" '
             f'aria-label="{escape(title)}" font-family="sans-serif" font-size="{size}">']
    for j, col in enumerate(cols):
        # Upright columns: each label reads bottom to top, centred on its column.
        x = label_w + CELL * j + CELL / 2 + size / 3
        parts.append(f'<text transform="translate({x:.1f},{head_h - 4:.0f}) rotate(-90)">{escape(col)}</text>')
    for i, row in enumerate(rows):
        y = head_h + CELL * i
        parts.append(f'<text x="{label_w - 4:.0f}" y="{y + 17:.0f}" text-anchor="end">{escape(row)}</text>')
        for j, col in enumerate(cols):
            k, n = values.get((row, col), (0, 0))
            share = k / n if n else None
            bad = None if share is None else (1 - share if hue == "good" else share)
            tip = f"{row} × {col}: {k}/{n}" if n else f"{row} × {col}: no conversation"
            parts.append(f'<rect x="{label_w + CELL * j:.0f}" y="{y:.0f}" width="{CELL - 2}" height="{CELL - 2}" '
                         f'fill="{_shade(bad)}"><title>{escape(tip)}</title></rect>')
    parts.append("</svg>")
    return Markup("".join(parts))


def histogram(bins: list[tuple[str, int]], title: str, unit: str = "") -> Markup:
    """Bars over labelled bins: (label, count). A label is shown under every k-th bar, k chosen
    so that the widest label fits before the next one shown."""
    size = 10
    top = max((n for _, n in bins), default=0) or 1
    widest = max((text_width(label, size) for label, _ in bins), default=0)
    every = max(1, math.ceil((widest + 6) / BAR_STEP))
    last_label = 30 + BAR_STEP * ((len(bins) - 1) // every * every) + widest if bins else 0
    footer = f"max {top} conversations per bar"
    width = max(40 + BAR_STEP * len(bins), last_label + 4, text_width(title, size) + 10,
                text_width(footer, size) + 10)
    parts = [f'<svg width="{width:.0f}" height="{PLOT_H + 46}" role="img" '
             f'aria-label="{escape(title)}" font-family="sans-serif" font-size="{size}">',
             f'<text x="2" y="10">{escape(title)}</text>']
    for i, (label, n) in enumerate(bins):
        h = PLOT_H * n / top
        x = 30 + BAR_STEP * i
        parts.append(f'<rect x="{x}" y="{16 + PLOT_H - h:.1f}" width="{BAR_W}" height="{h:.1f}" fill="#57606a">'
                     f'<title>{escape(label)}{escape(unit)}: {n}</title></rect>')
        if i % every == 0:
            parts.append(f'<text x="{x}" y="{PLOT_H + 30}">{escape(label)}</text>')
    parts.append(f'<text x="2" y="{PLOT_H + 44}">{escape(footer)}</text></svg>')
    return Markup("".join(parts))
