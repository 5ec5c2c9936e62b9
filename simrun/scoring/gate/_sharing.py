"""What a candidate shares with its baseline: the cells the gate may compare, and what is new.

A pull request that adds a goal, or edits a persona, changes the dataset hash; it must still be
gated, on what it did not change, without blessing anything in the pull request. So a baseline
keeps the content hash of every persona and goal (format 3), and a cell is *gated* when its
persona and its goal have the same content in both runs and the baseline holds it. Every other
cell of the candidate is *new*, not gated against the baseline (its old cells, if any, measured
something else): it is listed with its rates and held to the absolute criteria only
(`simrun.scoring.gate._run_verdict`). Baseline cells the candidate lacks are listed as removed.

A baseline that keeps only the dataset hash (format 1 or 2) can gate a candidate of the same
dataset only: what two other datasets share cannot be told from one hash each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from simrun._errors import GateError
from simrun.scoring.gate._summary import ZERO, Cell, Counts, RunSummary

NAMES_SHOWN = 12


@dataclass(frozen=True)
class ItemChange:
    kind: str                   # persona | goal
    id: str
    change: str                 # added | edited | removed

    def __str__(self) -> str:
        return f"{self.kind} {self.id} ({self.change})"


@dataclass(frozen=True)
class Sharing:
    gated: tuple[Cell, ...]         # cells compared with the baseline
    new: tuple[Cell, ...]           # candidate cells not gated: new or edited items, or cells the baseline lacks
    removed: tuple[Cell, ...]       # baseline cells the candidate does not hold
    changes: tuple[ItemChange, ...]  # personas and goals added, edited or removed, by content

    @property
    def complete(self) -> bool:
        """The candidate was compared on every cell it holds, and held every cell of the baseline."""
        return not self.new and not self.removed


def sharing(baseline: RunSummary, candidate: RunSummary) -> Sharing:
    """The cells the gate compares; a GateError when an old baseline cannot tell them."""
    base, cand = set(baseline.cells), set(candidate.cells)
    if baseline.items is not None and candidate.items is not None:
        changes = _changes(baseline.items, candidate.items)
        moved = {(c.kind, c.id) for c in changes}
        gated = {cell for cell in base & cand if ("persona", cell[0]) not in moved and ("goal", cell[1]) not in moved}
    elif baseline.dataset_hash == candidate.dataset_hash:
        changes, gated = (), base & cand
    else:
        old = baseline if baseline.items is None else candidate
        raise GateError(
            f"dataset mismatch: baseline ({baseline.source}) has dataset {baseline.dataset_hash}, candidate "
            f"({candidate.source}) has {candidate.dataset_hash}, and {old.source} keeps only that hash, not each "
            "persona's and goal's, so what the two share cannot be told: bless a new baseline with this "
            "simrun on the protected branch (`simrun baseline bless RUN --out FILE`, format 3), or run the "
            "candidate on the baseline's dataset")
    if not gated:
        raise GateError(f"no cell in common between baseline ({baseline.source}) and candidate "
                        f"({candidate.source}) with the same persona and goal content; nothing to compare")
    return Sharing(tuple(sorted(gated)), tuple(sorted(cand - gated)), tuple(sorted(base - cand)), changes)


def _changes(before: Mapping[str, str], after: Mapping[str, str]) -> tuple[ItemChange, ...]:
    out = []
    for key in sorted(before.keys() | after.keys()):
        kind, _, name = key.partition(":")
        if key not in before:
            out.append(ItemChange(kind, name, "added"))
        elif key not in after:
            out.append(ItemChange(kind, name, "removed"))
        elif before[key] != after[key]:
            out.append(ItemChange(kind, name, "edited"))
    return tuple(out)


@dataclass(frozen=True)
class NewSlice:
    """A goal or persona whose cells were not gated, with its counts over those cells."""

    dimension: str              # goal | persona | cells (cells the baseline lacks, items unchanged)
    name: str
    why: str                    # added | edited | not in the baseline
    cells: tuple[Cell, ...]
    counts: Mapping[str, Counts]

    def rate_text(self, classes: tuple[str, ...]) -> str:
        goal = self.counts.get("goal_not_reached", ZERO)
        parts = [f"goal reached {_pct(goal.scored - goal.fired, goal.scored)}"]
        parts += [f"{cls} {_pct(c.fired, c.scored)}" for cls in classes
                  if cls != "goal_not_reached" and (c := self.counts.get(cls, ZERO)).fired]
        return ", ".join(parts)

    def __str__(self) -> str:
        what = f"{self.dimension} {self.name}" if self.dimension != "cells" else self.name
        return f"{what} ({self.why}, {len(self.cells)} cell{'s' if len(self.cells) != 1 else ''})"


def new_slices(shared: Sharing, candidate: RunSummary) -> tuple[NewSlice, ...]:
    """The new cells grouped by what made them new: each added or edited goal and persona, then the
    cells the baseline lacked though their persona and goal are unchanged."""
    why = {(c.kind, c.id): c.change for c in shared.changes if c.change != "removed"}
    left = set(shared.new)
    out = []
    for (kind, name), change in sorted(why.items()):
        index = 0 if kind == "persona" else 1
        cells = tuple(c for c in shared.new if c[index] == name)
        if cells:
            out.append(NewSlice(kind, name, change, cells, _sum(candidate, cells)))
            left -= set(cells)
    if left:
        cells = tuple(sorted(left))
        out.append(NewSlice("cells", cell_list(cells), "not in the baseline", cells, _sum(candidate, cells)))
    return tuple(out)


def cell_list(cells: tuple[Cell, ...], shown: int = NAMES_SHOWN) -> str:
    names = ", ".join(f"{p}/{g}" for p, g in cells[:shown])
    return names + (f" and {len(cells) - shown} more" if len(cells) > shown else "")


def _sum(summary: RunSummary, cells: tuple[Cell, ...]) -> dict[str, Counts]:
    classes = next(iter(summary.cells.values())).keys() if summary.cells else ()
    return {cls: sum((summary.cells[c][cls] for c in cells), ZERO) for cls in classes}


def _pct(k: int, n: int) -> str:
    return f"{100 * k / n:.1f}% ({k}/{n})" if n else "– (0 decided)"
