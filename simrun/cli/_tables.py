"""Tables of plain rows that fit 100 columns, whatever the ids in them (`runs`, `plan`).

A table cell is never cut and never wrapped: the columns of numbers are narrow and fixed, and a
first cell too long for its column (a long model name) gets a line of its own above its row.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

WIDTH = 100          # the widest a table line may be: a CI log, a side-by-side terminal
GAP = "  "


def fit(headers: list[str], rows: list[list[str]], *, right: AbstractSet[int] = frozenset(),
        width: int = WIDTH) -> tuple[str, list[str]]:
    """(header line, one text per row) of a table of `rows`; columns in `right` are right-aligned.
    A row's text is two lines when its first cell needed a line of its own."""
    widths = [max([len(headers[i]), *(len(r[i]) for r in rows)]) for i in range(len(headers))]
    rest = sum(widths[1:]) + len(GAP) * (len(headers) - 1)
    widths[0] = max(len(headers[0]), min(widths[0], width - rest))

    def line(cells: list[str]) -> str:
        return GAP.join(c.rjust(w) if i in right else c.ljust(w)
                        for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    texts = [f"{row[0]}\n{line(['', *row[1:]])}" if len(row[0]) > widths[0] else line(row) for row in rows]
    return line(headers), texts


def tokens(count: int) -> str:
    """A token count in at most six characters: 950, 23.5k, 1.2M."""
    if count >= 999_950:             # would round to 1000.0k
        return f"{count / 1_000_000:.1f}M"
    return f"{count / 1_000:.1f}k" if count >= 1_000 else str(count)
