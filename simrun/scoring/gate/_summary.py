"""Run summaries: per-cell counts of every class, the only thing the gate compares.

A summary comes from a stored run, from conversations scored in process (the calibration
benchmark), or from a blessed baseline file (`simrun.scoring.gate._baseline`). Besides the counts, a
summary keeps per cell the repetitions where each class fired (and those where it was not
scored), so that the gate can name the conversations that flipped.

A summary may come from a file the pull request it judges wrote, so `validate_summary` checks
it: every count fits in the cell's repetitions, and the repetitions agree with the counts. A
summary never holds a transcript: it is counts, the dataset hash and the scorer version, which
is all a verdict needs and all two runs must agree on to be compared.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from simrun._errors import BaselineError, StoreError
from simrun._input_files import printable
from simrun._storable import MAX_REPETITIONS
from simrun._transcript import NOT_THE_RUNTIME, Scorecard
from simrun.scoring.checks import ALL_CLASSES, GUARANTEES, SCORER_VERSION, kind_of
from simrun.scoring.dataset import canonical_json
from simrun.scoring.store import Store, checked_run_id
from simrun.scoring.store import rates as R

GATE_CLASSES = (*ALL_CLASSES, *R.OUTCOME_CLASSES)   # every class the gate counts
# Those it tests by statistics; guarantees are decided by the zero rule (`simrun.scoring.gate._compare`).
TESTED = tuple(c for c in GATE_CLASSES if c not in GUARANTEES)


@dataclass(frozen=True)
class Counts:
    fired: int              # conversations where the class fired
    scored: int             # conversations where it could be decided (fired or clean)
    unverifiable: int       # conversations where the evidence was missing

    @property
    def rate(self) -> float | None:
        return self.fired / self.scored if self.scored else None

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.fired + other.fired, self.scored + other.scored,
                      self.unverifiable + other.unverifiable)

    def __str__(self) -> str:
        return f"{self.fired}/{self.scored}"


ZERO = Counts(0, 0, 0)
Cell = tuple[str, str]      # (persona, goal)


@dataclass(frozen=True)
class CellRepetitions:
    """Which repetitions of one cell a run holds, and each class's status in them."""

    held: frozenset[int]
    fired: Mapping[str, frozenset[int]]         # class -> repetitions where it fired
    unscored: Mapping[str, frozenset[int]]      # class -> repetitions where it was not scored
    ids: Mapping[int, str] = field(default_factory=dict)   # only where not "persona/goal/repetition"

    def clean(self, cls: str) -> frozenset[int]:
        return self.held - self.fired.get(cls, frozenset()) - self.unscored.get(cls, frozenset())


# Who played the user, as a run records it: scripted, or backend:model (a model's name may hold
# slashes, dots and colons); one printable line, bounded.
USER_BACKEND = r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$"


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    dataset_hash: str
    scorer_version: str
    repetitions: int
    cells: Mapping[Cell, Mapping[str, Counts]]
    source: str             # where it came from, for messages: a file, or a run in a database
    # Per cell, the repetitions behind the counts; None when the source does not say (a
    # baseline file of format 1, a run whose conversations share repetition numbers).
    repetitions_held: Mapping[Cell, CellRepetitions] | None = None
    why_no_repetitions: str = ""
    # "persona:<id>" / "goal:<id>" -> content hash: what tells which cells two datasets share
    # (`simrun.scoring.gate._sharing`); None for a baseline file that kept only the dataset hash.
    items: Mapping[str, str] | None = None
    # Who played the user (scripted, or backend:model): the instrument the rates were measured
    # with. None for a baseline file blessed before it was kept (formats 1 to 3).
    user_backend: str | None = None
    # The runs a baseline was blessed from, when several (`merge_runs`): run j holds repetitions
    # j*R/K to (j+1)*R/K - 1 of every cell, R `repetitions` and K runs, so that the gate can
    # measure how far a cell's rate moves from run to run (`simrun.scoring.gate._variation`).
    # Empty for one run.
    runs: tuple[str, ...] = ()
    # The run's seed (`run.seed`): with a scripted user, the same seed replays every conversation
    # of a cell and repetition alike, which is what pairs two runs (`simrun.scoring.gate._paired`).
    # None where it is not known: a baseline file blessed before it was kept (formats 1 to 5), a
    # baseline of several runs, or conversations scored in process without one.
    seed: int | None = None
    # The first repetitions of a run judged in rounds (`first_repetitions`): a sequential look,
    # whose levels are worked out for the unpaired test, so it is never paired.
    look: bool = False

    def total(self, cls: str) -> Counts:
        out = ZERO
        for counts in self.cells.values():
            out = out + counts.get(cls, ZERO)
        return out

    @property
    def personas(self) -> list[str]:
        return sorted({p for p, _ in self.cells})

    @property
    def goals(self) -> list[str]:
        return sorted({g for _, g in self.cells})

    def conversation_id(self, cell: Cell, repetition: int) -> str:
        ids = self.repetitions_held[cell].ids if self.repetitions_held and cell in self.repetitions_held else {}
        return ids.get(repetition, f"{cell[0]}/{cell[1]}/{repetition}")


def conversations_in(counts: Mapping[str, Counts]) -> int:
    """A cell's conversations: guarantees are counted in every one, so any of them counts them all."""
    probe = counts[ALL_CLASSES[-1]]
    return probe.scored + probe.unverifiable


# --- building ---------------------------------------------------------------------------------

def summary_from_store(store: Store, run: str | None) -> RunSummary:
    row = store.run(run)
    source = f"run {row['run_id']} in {store.path}"
    try:
        run_id = checked_run_id(row["run_id"], str(store.path))
    except StoreError as exc:
        raise BaselineError(str(exc)) from None
    counts = R.cell_counts(store, run_id)
    cells = {cell: {cls: Counts(*counts[cell].get(cls, (0, 0, 0))) for cls in GATE_CLASSES}
             for cell in sorted(counts)}
    held, why = _repetitions_from_rows(R.cell_repetitions(store, run_id))
    backend = row.get("user_backend")
    seed = row.get("seed")
    summary = RunSummary(run_id, row["dataset_hash"], row["scorer_version"], int(row["repetitions"]),
                         cells, source, held, why, _items_of(row.get("dataset"), row["dataset_hash"]),
                         backend if isinstance(backend, str) and re.fullmatch(USER_BACKEND, backend) else None,
                         seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None)
    validate_summary(summary)
    return summary


def _repetitions_from_rows(rows: Iterable[tuple[str, str, int, str, str | None, str]]
                           ) -> tuple[dict[Cell, CellRepetitions] | None, str]:
    held: dict[Cell, set[int]] = {}
    statuses: dict[Cell, dict[str, dict[str, set[int]]]] = {}
    ids: dict[Cell, dict[int, str]] = {}
    for persona, goal, rep, cid, cls, status in rows:
        cell = (persona, goal)
        if cls is None:
            if rep in held.setdefault(cell, set()):
                return None, (f"its cell {persona}/{goal} holds repetition {rep} twice (imported conversations?), "
                              "so a conversation is not known by its cell and repetition")
            held[cell].add(rep)
            if cid != f"{persona}/{goal}/{rep}":
                ids.setdefault(cell, {})[rep] = cid
        elif cls in GATE_CLASSES:
            statuses.setdefault(cell, {}).setdefault(status, {}).setdefault(cls, set()).add(rep)
    return {cell: CellRepetitions(frozenset(reps),
                                  {c: frozenset(r) for c, r in statuses.get(cell, {}).get("fired", {}).items()},
                                  {c: frozenset(r) for c, r in statuses.get(cell, {}).get("unscored", {}).items()},
                                  ids.get(cell, {}))
            for cell, reps in sorted(held.items())}, ""


def scorecard_counts(scorecard: Scorecard) -> dict[str, Counts]:
    """One conversation's contribution to its cell, by the rules of `simrun.scoring.store._rates`."""
    counted = scorecard.end not in NOT_THE_RUNTIME
    out: dict[str, Counts] = {}
    for cls in ALL_CLASSES:
        check = scorecard.checks.get(cls)
        # Progress rates leave out conversations that are not the runtime's doing.
        if check is None or (not counted and kind_of(cls) == "progress"):
            out[cls] = ZERO
            continue
        status = check.status
        out[cls] = Counts(int(status == "fired"), int(status != "unverifiable"), int(status == "unverifiable"))
    if counted:
        out["runtime_error"] = Counts(int(scorecard.end == "runtime_error"), 1, 0)
        reached = scorecard.goal_reached
        out["goal_not_reached"] = Counts(int(reached is False), int(reached is not None), int(reached is None))
    else:
        out["runtime_error"] = out["goal_not_reached"] = ZERO
    return out


def summary_from_scorecards(run_id: str, dataset_hash: str, repetitions: int,
                            scored: Iterable[tuple[str, str, int, Scorecard]],
                            scorer_version: str = SCORER_VERSION, items: Mapping[str, str] | None = None, *,
                            seed: int | None = None, user_backend: str | None = None) -> RunSummary:
    """A summary of conversations scored in process: (persona, goal, repetition, scorecard) each."""
    return summary_from_counts(run_id, dataset_hash, repetitions,
                               [(p, g, r, scorecard_counts(card)) for p, g, r, card in scored], scorer_version,
                               items, seed=seed, user_backend=user_backend)


def summary_from_counts(run_id: str, dataset_hash: str, repetitions: int,
                        conversations: Iterable[tuple[str, str, int, Mapping[str, Counts]]],
                        scorer_version: str = SCORER_VERSION, items: Mapping[str, str] | None = None, *,
                        seed: int | None = None, user_backend: str | None = None) -> RunSummary:
    """A summary of conversations given as (persona, goal, repetition, `scorecard_counts`) each;
    `seed` and `user_backend` as the run would record them (the gate pairs two runs only when
    both say the same seed and a scripted user)."""
    cells: dict[Cell, dict[str, Counts]] = {}
    rows: list[tuple[str, str, int, str, str | None, str]] = []     # as _repetitions_from_rows reads them
    for persona, goal, rep, counts in conversations:
        cell = cells.setdefault((persona, goal), {cls: ZERO for cls in GATE_CLASSES})
        cid = f"{persona}/{goal}/{rep}"
        rows.append((persona, goal, rep, cid, None, "held"))
        for cls, add in counts.items():
            cell[cls] = cell[cls] + add
            if add.fired or not add.scored:
                rows.append((persona, goal, rep, cid, cls, "fired" if add.fired else "unscored"))
    held, why = _repetitions_from_rows(rows)
    return RunSummary(run_id, dataset_hash, scorer_version, repetitions, {c: cells[c] for c in sorted(cells)},
                      f"run {run_id} (in process)", held, why, items, user_backend, seed=seed)


def first_repetitions(summary: RunSummary, n: int) -> RunSummary:
    """The summary of the run's first `n` repetitions of every cell (what a sequential gate's
    look sees after its rounds so far). Needs the repetitions held."""
    if summary.repetitions_held is None:
        raise StoreError(f"{summary.source}: it does not say which repetition fired what "
                         f"({summary.why_no_repetitions})")
    cells, held = {}, {}
    for cell, reps in summary.repetitions_held.items():
        kept = frozenset(r for r in reps.held if r < n)
        fired = {c: r & kept for c, r in reps.fired.items()}
        unscored = {c: r & kept for c, r in reps.unscored.items()}
        counts = {}
        gone = len(reps.held - kept)
        for cls, whole in summary.cells[cell].items():
            # Unverifiable conversations are among the unscored ones (the rest were not counted):
            # a cut cell keeps at most as many as it has unscored.
            f, u = len(fired.get(cls, ())), len(unscored.get(cls, ()))
            scored = len(kept) - u
            unverifiable = min(whole.unverifiable, u) if gone else whole.unverifiable
            counts[cls] = Counts(f, scored, unverifiable)
        cells[cell] = counts
        held[cell] = CellRepetitions(kept, fired, unscored, {r: i for r, i in reps.ids.items() if r < n})
    return dataclasses.replace(summary, repetitions=max(1, min(n, summary.repetitions)), cells=cells,
                               repetitions_held=held, look=True)


def merge_runs(summaries: Sequence[RunSummary]) -> RunSummary:
    """Several runs of one dataset, scorer, user and matrix as one baseline: run j's repetition r
    becomes repetition j*R + r (R the runs' repetitions), and `runs` names them in order. The
    counts add up; the gate reads each run back from its block of repetitions to measure how far
    a cell's rate moves from run to run. Raises BaselineError naming the run that differs."""
    if len(summaries) == 1:
        return summaries[0]
    first = summaries[0]
    ids = [s.run_id for s in summaries]
    if len(set(ids)) != len(ids):
        raise BaselineError(f"run {next(i for i in ids if ids.count(i) > 1)} is named twice: bless distinct runs")
    for s in summaries:
        if s.repetitions_held is None:
            raise BaselineError(f"{s.source}: cannot be blessed with others: {s.why_no_repetitions}")
        for what in ("dataset_hash", "scorer_version", "user_backend", "repetitions"):
            if getattr(s, what) != getattr(first, what):
                raise BaselineError(
                    f"{s.source}: its {what.replace('_', ' ')} {getattr(s, what)} differs from {first.source}'s "
                    f"{getattr(first, what)}: the runs of one baseline must be runs of one matrix, scored alike "
                    "(same personas and goals, scorer, user and repetitions)")
        if set(s.cells) != set(first.cells):
            raise BaselineError(f"{s.source}: its cells differ from {first.source}'s; bless runs of one matrix")
    step = first.repetitions
    if step * len(summaries) > MAX_REPETITIONS:
        raise BaselineError(f"{len(summaries)} runs of {step} repetitions make more than {MAX_REPETITIONS} per "
                            "cell; bless fewer runs")
    cells: dict[Cell, dict[str, Counts]] = {}
    held: dict[Cell, CellRepetitions] = {}
    for cell in first.cells:
        cells[cell] = {cls: sum((s.cells[cell][cls] for s in summaries), ZERO) for cls in first.cells[cell]}
        parts = [s.repetitions_held[cell] for s in summaries if s.repetitions_held is not None]

        def moved(j: int, reps: frozenset[int]) -> frozenset[int]:
            return frozenset(j * step + r for r in reps)

        fired: dict[str, frozenset[int]] = {}
        unscored: dict[str, frozenset[int]] = {}
        ids_of: dict[int, str] = {}
        for j, (s, part) in enumerate(zip(summaries, parts)):
            for cls, reps in part.fired.items():
                fired[cls] = fired.get(cls, frozenset()) | moved(j, reps)
            for cls, reps in part.unscored.items():
                unscored[cls] = unscored.get(cls, frozenset()) | moved(j, reps)
            for r in part.held:
                ids_of[j * step + r] = f"{s.run_id}:{s.conversation_id(cell, r)}"
        held[cell] = CellRepetitions(frozenset().union(*(moved(j, p.held) for j, p in enumerate(parts))),
                                     fired, unscored, ids_of)
    merged = dataclasses.replace(first, run_id=summaries[-1].run_id, repetitions=step * len(summaries), cells=cells,
                                 source=f"{len(summaries)} runs ({', '.join(ids)})", repetitions_held=held,
                                 runs=tuple(ids), seed=None)     # not one run's: never paired
    validate_summary(merged)
    return merged


def run_of(summary: RunSummary, j: int) -> RunSummary:
    """Run j of a baseline blessed from several (`merge_runs`), as its own summary."""
    if not summary.runs or summary.repetitions_held is None:
        raise BaselineError(f"{summary.source}: not a baseline of several runs")
    step = summary.repetitions // len(summary.runs)
    low, high = j * step, (j + 1) * step
    cells, held = {}, {}
    for cell, reps in summary.repetitions_held.items():
        kept = frozenset(r - low for r in reps.held if low <= r < high)
        fired = {c: frozenset(r - low for r in v if low <= r < high) for c, v in reps.fired.items()}
        unscored = {c: frozenset(r - low for r in v if low <= r < high) for c, v in reps.unscored.items()}
        cells[cell] = {cls: Counts(len(fired.get(cls, ())), len(kept) - len(unscored.get(cls, ())), 0)
                       for cls in summary.cells[cell]}
        held[cell] = CellRepetitions(kept, fired, unscored)
    return dataclasses.replace(summary, run_id=summary.runs[j], repetitions=step, cells=cells,
                               source=f"run {summary.runs[j]} of {summary.source}", repetitions_held=held, runs=())


def validate_summary(summary: RunSummary) -> None:
    """Every count fits in its cell, every cell in the repetitions, and the repetitions agree
    with the counts. A summary that breaks any of these was not written by simrun."""
    where = summary.source
    if summary.runs and (len(summary.runs) < 2 or summary.repetitions % len(summary.runs)
                         or summary.repetitions_held is None):
        raise BaselineError(f"{where}: blessed from {len(summary.runs)} runs, but its {summary.repetitions} "
                            "repetitions per cell are not the same number from each (or are not listed)")
    if summary.items is not None:
        _validate_items(summary)
    for (persona, goal), counts in summary.cells.items():
        key = f"{persona}/{goal}"
        if set(counts) != set(GATE_CLASSES):
            missing, extra = sorted(set(GATE_CLASSES) - set(counts)), sorted(set(counts) - set(GATE_CLASSES))
            raise BaselineError(f"{where}: cell {key} does not count every class the scorer knows "
                                f"(missing {missing}, unknown {printable(extra)})")
        held = conversations_in(counts)
        if held > summary.repetitions:
            raise BaselineError(f"{where}: cell {key} holds {held} conversations, more than the run's "
                                f"{summary.repetitions} repetitions")
        for cls, c in counts.items():
            if min(c.fired, c.scored, c.unverifiable) < 0:
                raise BaselineError(f"{where}: cell {key}, class {cls}: a negative count")
            if c.fired > c.scored:
                raise BaselineError(f"{where}: cell {key}, class {cls}: fired {c.fired} > scored {c.scored}")
            if c.scored + c.unverifiable > held:
                raise BaselineError(f"{where}: cell {key}, class {cls}: {c.scored} scored + {c.unverifiable} "
                                    f"UNVERIFIABLE conversations, more than the cell's {held} (of "
                                    f"{summary.repetitions} repetitions)")
    if summary.repetitions_held is None:
        return
    if set(summary.repetitions_held) != set(summary.cells):
        raise BaselineError(f"{where}: the repetitions are not given for the same cells as the counts")
    for cell, reps in summary.repetitions_held.items():
        key, counts = f"{cell[0]}/{cell[1]}", summary.cells[cell]
        if any(not 0 <= r < summary.repetitions for r in reps.held) or len(reps.held) != conversations_in(counts):
            raise BaselineError(f"{where}: cell {key}: repetitions {sorted(reps.held)[:20]} do not match its "
                                f"{conversations_in(counts)} conversations of {summary.repetitions} repetitions")
        for cls in set(reps.fired) | set(reps.unscored):
            if cls not in GATE_CLASSES:
                raise BaselineError(f"{where}: cell {key}: unknown class {printable(cls)} in its repetitions")
        for cls, c in counts.items():
            fired, unscored = reps.fired.get(cls, frozenset()), reps.unscored.get(cls, frozenset())
            if not fired | unscored <= reps.held or fired & unscored:
                raise BaselineError(f"{where}: cell {key}, class {cls}: repetitions outside the cell's, or both "
                                    "fired and not scored")
            if len(fired) != c.fired or len(reps.held) - len(unscored) != c.scored:
                raise BaselineError(f"{where}: cell {key}, class {cls}: the repetitions ({len(fired)} fired, "
                                    f"{len(reps.held) - len(unscored)} scored) disagree with the counts "
                                    f"({c.fired} fired, {c.scored} scored)")


def _items_hash(items: Mapping[str, str]) -> str:
    return hashlib.sha256(canonical_json(dict(sorted(items.items()))).encode()).hexdigest()[:16]


def _items_of(stored: object, dataset_hash: str) -> dict[str, str] | None:
    """A stored run's persona and goal hashes, if they are those its dataset hash was made of (a
    run written by hand, or damaged, is gated as a baseline of format 2 would gate it)."""
    if not isinstance(stored, dict) or not stored or any(not isinstance(v, str) for v in stored.values()):
        return None
    return dict(stored) if _items_hash(stored) == dataset_hash else None


def _validate_items(summary: RunSummary) -> None:
    """The content hashes must be those the dataset hash was made of, and name every cell's
    persona and goal: a baseline cannot claim a cell is unchanged that its hash does not cover."""
    where, items = summary.source, summary.items
    if items is None:               # a summary that keeps only its dataset hash: nothing to check here
        return
    if any(not isinstance(k, str) or not isinstance(v, str) for k, v in items.items()):
        raise BaselineError(f"{where}: the persona and goal hashes are not all text")
    if _items_hash(items) != summary.dataset_hash:
        raise BaselineError(f"{where}: the persona and goal hashes do not make its dataset hash "
                            f"{summary.dataset_hash}")
    for persona, goal in summary.cells:
        if f"persona:{persona}" not in items or f"goal:{goal}" not in items:
            raise BaselineError(f"{where}: cell {persona}/{goal} has no hash for its persona or goal")
