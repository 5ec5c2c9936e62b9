"""The dashboard: every run of one or more stores on one self-contained page, like with like.

`reports/index.html` is written after every run, and by `simrun dashboard`, which reads several
DuckDB files at once (one per release, or per CI job) without merging them. It answers three
questions: did this run get better or worse than the last ones on the same personas and goals,
where, and at what cost?

- **Like with like.** Runs are grouped by dataset hash. A group is named by what changed since
  the group before it (personas and goals added, removed or edited), so a change of goals never
  reads as a trend. Each group has a chart per class over its runs: the rate with its 95%
  Wilson interval as a band, the blessed baseline's rate as a line, a point per run.
- **Can this release ship?** A line at the top names the newest run of each dataset, its labels
  and its verdict (`simrun.scoring.gate._run_verdict`, the one its exit status and its report give: its
  guarantees, its release criteria and, with a blessed baseline, the gate against it on the cells
  it shares with the baseline by content), with the classes and slices that failed.
- **The runs table**: identity (labels, runtime version, commit), figures, the gate's verdict
  against the baseline, and against the newest earlier finished run of the same group
  (`simrun.scoring.pages._verdicts`): both by `gate_verdict` itself.
- **Cost over time**, by user backend; **filters** by label, user backend and runtime version.

Every figure is counted in DuckDB (two queries per store, whatever the number of runs); the
charts are drawn in the browser from the figures embedded in the page, so that a filter redraws
them over the runs it keeps. Every store is read as untrusted: its run ids are checked before
they name a report to link to, its texts (labels above all) reach the page only as text, and
the embedded figures are JSON that cannot close the script element holding it.

Two files may hold the same run. A run with the same id and the same scores in several files (a
cumulative database kept beside per-release ones) is shown once, naming every file; runs that
share an id but differ (one resumed or rescored further) are each shown, marked by their file.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment
from markupsafe import Markup

from simrun._commits import short_commit
from simrun._errors import SimrunError
from simrun._settings import ReleaseSection
from simrun.scoring.checks import ALL_CLASSES, GUARANTEES
from simrun.scoring.gate import RunSummary, RunVerdict, verdict_of_run
from simrun.scoring.pages._own_verdicts import OwnVerdict, own_verdicts
from simrun.scoring.pages._render import environment, write_page
from simrun.scoring.pages._verdicts import Judged, Verdict, judge
from simrun.scoring.store import EXCLUDED_ENDS, Store, checked_run_id, compared_line, labels_of, line_of, wilson_sql

# Chart order: the outcome first, then each class; goal_reached is the one rate where higher is better.
CHARTED = ("goal_reached", *ALL_CLASSES, "runtime_error")
LISTED = 12                     # names of added or removed items shown before "and N more"
PALETTE = ("#0969da", "#bc4c00", "#1a7f37", "#8250df", "#bf3989", "#9a6700", "#57606a", "#1b7c83")


def _sql_interval(k: str, n: str) -> str:
    return ", ".join(wilson_sql(k, n))


@dataclass(eq=False)
class Run:
    """One run as the page shows it: identity, figures per class, and where it came from."""

    source: int                 # index of its file in `files`
    run_id: str
    started_at: dt.datetime
    status: str
    user_backend: str
    dataset_hash: str
    items: dict[str, str]       # persona:<id> / goal:<id> -> content hash
    scorer_version: str
    rescored_at: Any
    shard: str | None
    spent: float
    labels: list[str]
    runtime_version: str | None
    git_commit: str | None
    git_branch: str | None
    conversations: int
    rates: dict[str, tuple[int, int, float | None, float | None]] = field(default_factory=dict)
    also_in: list[int] = field(default_factory=list)        # other files holding the same run
    twin: bool = False          # another file holds a different run under the same id
    verdict: Verdict | None = None
    against: str | None = None  # the run it was judged against
    base_verdict: Verdict | None = None     # against the blessed baseline
    run_verdict: RunVerdict | None = None   # its whole verdict, for the newest run of its dataset
    own: OwnVerdict | None = None           # its own verdict (no baseline), for the runs table
    group: int = 0              # index of its dataset's group

    @property
    def per_conversation(self) -> float | None:
        return self.spent / self.conversations if self.conversations else None

    @property
    def broken(self) -> list[tuple[str, int]]:
        """Guarantees broken, each with the conversations it was broken in."""
        return [(cls, self.rates[cls][0]) for cls in GUARANTEES if cls in self.rates and self.rates[cls][0]]

    @functools.cached_property
    def scores(self) -> str:
        """What the gate's verdict on this run depends on, and what tells two copies apart."""
        counts = tuple((cls, k, n) for cls, (k, n, _, _) in sorted(self.rates.items()))
        return repr((self.run_id, self.dataset_hash, self.scorer_version, str(self.rescored_at),
                     self.conversations, counts))

    @property
    def same_copy(self) -> tuple[str, dt.datetime, str, float]:
        return (self.scores, self.started_at, self.status, self.spent)

    # What the table shows, as text (the template escapes it).

    @property
    def goal_text(self) -> str:
        k, n, low, high = self.rates["goal_reached"]
        if not n or low is None or high is None:
            return "–"
        return f"{100 * k / n:.1f}% ({k}/{n}) {100 * low:.1f}–{100 * high:.1f}%"

    @property
    def broken_text(self) -> str:
        return ", ".join(f"{cls} {k}" for cls, k in self.broken) or "none"

    @property
    def commit_text(self) -> str:
        return f"{short_commit(self.git_commit, 10)} {self.git_branch or ''}".strip() if self.git_commit else "–"

    @property
    def status_text(self) -> str:
        status = "killed" if self.status == "running" else self.status
        return " ".join(filter(None, ["" if status == "finished" else f"({status})",
                                      f"shard {self.shard}" if self.shard else ""]))


def collect(store: Store, source: int) -> list[Run]:
    """Every run of a store with its figures: two queries, counted as `simrun.scoring.store._rates` counts."""
    rows = store.con.execute(f"""
        WITH conv AS (
            SELECT run_id, count(*) AS conversations,
                   count(*) FILTER (WHERE end_reason NOT IN ({EXCLUDED_ENDS})) AS counted,
                   count(*) FILTER (WHERE end_reason NOT IN ({EXCLUDED_ENDS}) AND goal_reached) AS reached,
                   count(*) FILTER (WHERE end_reason NOT IN ({EXCLUDED_ENDS}) AND goal_reached IS NOT NULL) AS scored,
                   count(*) FILTER (WHERE end_reason = 'runtime_error') AS crashed
            FROM conversations GROUP BY run_id)
        SELECT r.run_id, r.started_at, r.status, r.user_backend, r.dataset_hash, r.dataset, r.scorer_version,
               r.rescored_at, r.shard, r.spent_usd, r.labels, r.runtime_version, r.git_commit, r.git_branch,
               coalesce(c.conversations, 0),
               coalesce(c.reached, 0), coalesce(c.scored, 0), {_sql_interval("c.reached", "c.scored")},
               coalesce(c.crashed, 0), coalesce(c.counted, 0), {_sql_interval("c.crashed", "c.counted")}
        FROM runs r LEFT JOIN conv c USING (run_id)""").fetchall()
    runs: dict[str, Run] = {}
    for (run_id, started, status, user, dataset_hash, items, scorer, rescored, shard, spent, labels, version,
         commit, branch, conversations, *outcomes) in rows:
        # A run id names a report to link to: one simrun did not write is refused, naming the file.
        run = Run(source, checked_run_id(run_id, store.path), started, status, user, dataset_hash,
                  _items(items), scorer, rescored, shard, float(spent or 0), labels_of(labels), version, commit,
                  branch, conversations)
        run.rates["goal_reached"], run.rates["runtime_error"] = tuple(outcomes[:4]), tuple(outcomes[4:])
        runs[run_id] = run
    # Progress classes leave out conversations that ended for a reason not the runtime's: an anti
    # join with those few, rather than a join of every check with its conversation (4x faster).
    for run_id, cls, k, n, low, high in store.con.execute(f"""
            SELECT run_id, class, k, n, {_sql_interval("k", "n")} FROM (
                SELECT k.run_id, k.class, count(*) FILTER (WHERE k.status = 'fired') AS k,
                       count(*) FILTER (WHERE k.status <> 'unverifiable') AS n
                FROM checks k ANTI JOIN (SELECT run_id, conversation_id FROM conversations
                                         WHERE end_reason IN ({EXCLUDED_ENDS})) e
                     ON k.kind = 'progress' AND e.run_id = k.run_id AND e.conversation_id = k.conversation_id
                GROUP BY ALL)""").fetchall():
        if run_id in runs and cls in ALL_CLASSES:
            runs[run_id].rates[cls] = (k, n, low, high)
    return list(runs.values())


def _items(stored: Any) -> dict[str, str]:
    try:
        items = json.loads(stored) if isinstance(stored, str) else stored
    except ValueError:
        return {}
    if not isinstance(items, dict):
        return {}
    return {k: v for k, v in items.items() if isinstance(k, str) and isinstance(v, str)}


def merged(per_file: Sequence[list[Run]]) -> list[Run]:
    """All runs in time order; a run found whole in several files once (see the module's note)."""
    kept: dict[str, list[Run]] = {}
    for runs in per_file:
        for run in runs:
            copies = kept.setdefault(run.run_id, [])
            same = next((c for c in copies if c.same_copy == run.same_copy), None)
            if same is not None:
                same.also_in.append(run.source)
                continue
            copies.append(run)
    for copies in kept.values():
        for run in copies:
            run.twin = len(copies) > 1
    return sorted((r for copies in kept.values() for r in copies), key=lambda r: (r.started_at, r.source, r.run_id))


@dataclass
class Group:
    dataset_hash: str
    items: dict[str, str]
    runs: list[Run] = field(default_factory=list)
    change: str = ""            # what changed since the group before it

    def count(self, kind: str) -> int:
        return sum(1 for key in self.items if key.startswith(f"{kind}:"))


def grouped(runs: list[Run]) -> list[Group]:
    """Runs by dataset, groups in the order of their first run, each named by what changed."""
    groups: dict[str, Group] = {}
    for run in runs:
        group = groups.setdefault(run.dataset_hash, Group(run.dataset_hash, run.items))
        run.group = list(groups).index(run.dataset_hash)
        group.runs.append(run)
    ordered = list(groups.values())
    for before, group in zip([None, *ordered], ordered):
        group.change = what_changed(before.items, group.items) if before else "the first dataset"
    return ordered


def what_changed(before: dict[str, str], after: dict[str, str]) -> str:
    parts = []
    for kind in ("persona", "goal"):
        old = {k.split(":", 1)[1]: v for k, v in before.items() if k.startswith(f"{kind}:")}
        new = {k.split(":", 1)[1]: v for k, v in after.items() if k.startswith(f"{kind}:")}
        for verb, names in (("added", new.keys() - old.keys()), ("removed", old.keys() - new.keys()),
                            ("edited", {k for k in new.keys() & old.keys() if new[k] != old[k]})):
            if names:
                shown = sorted(names)
                more = f" and {len(shown) - LISTED} more" if len(shown) > LISTED else ""
                parts.append(f"{kind}s {verb}: {', '.join(shown[:LISTED])}{more}")
    return "; ".join(parts) or "the same personas and goals, under another dataset hash"


def judge_groups(groups: list[Group], stores: Sequence[Store], settings: Any, folder: Path,
                 baseline: RunSummary | None = None) -> None:
    """Each run against the baseline, if there is one, and against the newest earlier finished,
    unsharded run of its group on the line it is compared with (`compared_line`: its own
    branch; a pull request's base, never another pull request), by the gate."""
    pairs: list[tuple[Judged | RunSummary, Judged]] = []
    judged: list[tuple[Run, str]] = []
    if baseline is not None:
        runs = [run for group in groups for run in group.runs]
        pairs += [(baseline, Judged(run.run_id, stores[run.source], run.scores)) for run in runs]
    for group in groups:
        latest: dict[str | None, Run] = {}      # the newest finished run of each line so far
        for run in group.runs:
            previous = latest.get(compared_line(run.labels, run.git_branch))
            if previous is not None:
                pairs.append((Judged(previous.run_id, stores[previous.source], previous.scores),
                              Judged(run.run_id, stores[run.source], run.scores)))
                judged.append((run, previous.run_id))
            if run.status == "finished" and run.shard is None:
                latest[line_of(run.labels, run.git_branch)] = run
    verdicts = judge(pairs, settings, folder)
    if baseline is not None:
        for run, verdict in zip(runs, verdicts):
            run.base_verdict = verdict
        verdicts = verdicts[len(runs):]
    for (run, against), verdict in zip(judged, verdicts):
        run.verdict, run.against = verdict, against


def newest(groups: list[Group]) -> list[Run]:
    """The newest run of each dataset, newest dataset first: what the top line asks about."""
    return sorted((group.runs[-1] for group in groups if group.runs), key=lambda r: r.started_at, reverse=True)


def judge_newest(groups: list[Group], stores: Sequence[Store], settings: Any, release: ReleaseSection | None,
                 baseline: RunSummary | None, known: Sequence[RunVerdict] = (),
                 fallback: ReleaseSection | None = None, folder: Path = Path(".")) -> None:
    """The newest run of each dataset gets its whole verdict, the very one `simrun` printed and
    exited with (`known`: verdicts made already, by the run that writes this page; each other
    judged under `release` if given, else the criteria it ran with, else `fallback`): the top
    line must never read as a pass for a run whose exit status was 1."""
    made = {v.run_id: v for v in known}
    for run in newest(groups):
        run.run_verdict = made.get(run.run_id) or verdict_of_run(
            stores[run.source], run.run_id, release, baseline=baseline, gate_settings=settings, fallback=fallback)
    # Every run's own verdict (guarantees, release criteria), remembered beside the page: the table
    # marks one that failed beside the gate's answer, which alone may read "no regression".
    runs = [run for group in groups for run in group.runs]
    given = {**made, **{r.run_id: r.run_verdict for r in runs if r.run_verdict is not None}}
    own = own_verdicts([(r.run_id, r.scores, r.status, stores[r.source]) for r in runs], given, release, fallback,
                       folder)
    for run in runs:
        run.own = own[run.run_id]


def build_dashboard(stores: Sequence[Store], out: Path | str, *, baseline: RunSummary | None = None,
                    gate_settings: Any = None, env: Environment | None = None, release: ReleaseSection | None = None,
                    known: Sequence[RunVerdict] = (), fallback: ReleaseSection | None = None) -> Path:
    """Write the dashboard of every run in `stores` to `out`; reports beside it are linked. With
    `gate_settings`, the runs are judged by the gate, and the newest of each dataset by its whole
    verdict (`known`: verdicts made already), under the `release` criteria if given, else those it
    ran with, else `fallback`."""
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SimrunError(f"cannot create the folder {out.parent}: {exc.strerror or exc}") from None
    runs = merged([collect(store, i) for i, store in enumerate(stores)])
    groups = grouped(runs)
    if gate_settings is not None:
        judge_groups(groups, stores, gate_settings, out.parent, baseline)
        judge_newest(groups, stores, gate_settings, release, baseline, known, fallback, out.parent)
    reports = {p.stem for p in out.parent.glob("*.html")}
    context = page(runs, groups, [s.path for s in stores], reports, baseline, gate_settings is not None)
    write_page(out, (env or environment()).get_template("index.html").render(**context))
    return out


def page(runs: list[Run], groups: list[Group], files: list[str], reports: set[str],
         baseline: RunSummary | None, judged: bool) -> dict[str, Any]:
    """The template's context: the table's rows, and the figures the charts are drawn from."""
    index = {id(run): i for i, run in enumerate(runs)}
    users = sorted({r.user_backend for r in runs})
    colours = {u: PALETTE[i % len(PALETTE)] for i, u in enumerate(users)}
    shown_groups, data_groups = [], []
    for number, group in enumerate(groups):
        fired = {cls for run in group.runs for cls, (k, n, _, _) in run.rates.items()
                 if k and cls != "goal_reached"}
        decided = any(run.rates["goal_reached"][1] for run in group.runs)
        charts = [c for c in CHARTED if (c == "goal_reached" and decided) or c in fired]
        lines = _baseline_rates(baseline) if baseline is not None and baseline.dataset_hash == group.dataset_hash \
            else None
        shown_groups.append({"number": number, "hash": group.dataset_hash, "change": group.change,
                             "personas": group.count("persona"), "goals": group.count("goal"),
                             "runs": len(group.runs), "charts": charts,
                             "quiet": [c for c in CHARTED[1:] if c not in fired], "baseline": lines is not None})
        data_groups.append({"runs": [index[id(r)] for r in group.runs], "baseline": lines})
    data = {
        "classes": list(CHARTED),
        "files": files,     # as given: CI artifacts often share a name in folders of their own
        "users": [{"name": u, "colour": colours[u]} for u in users],
        "groups": data_groups,
        "runs": [_run_data(run, reports) for run in runs],
    }
    return {
        "runs": runs, "rows": list(reversed(list(enumerate(runs)))), "groups": shown_groups, "files": files,
        "reports": reports, "judged": judged, "baseline": baseline, "colours": colours, "newest": newest(groups),
        "labels": sorted({label for run in runs for label in run.labels}),
        "unlabelled": any(not run.labels for run in runs), "users": users,
        "versions": sorted({run.runtime_version for run in runs if run.runtime_version}),
        "unversioned": any(not run.runtime_version for run in runs),
        "data": _script_json(data),
        "built": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def _baseline_rates(baseline: RunSummary) -> dict[str, float]:
    rates = {cls: baseline.total(cls).rate for cls in CHARTED if cls != "goal_reached"}
    missed = baseline.total("goal_not_reached").rate
    rates["goal_reached"] = None if missed is None else 1 - missed
    return {cls: round(rate, 5) for cls, rate in rates.items() if rate is not None}


def _run_data(run: Run, reports: set[str]) -> dict[str, Any]:
    per = run.per_conversation
    judged: dict[str, Any] = {} if run.verdict is None else {"verdict": run.verdict.state}
    if run.base_verdict is not None:
        judged |= {"base": run.base_verdict.state, "base_headline": run.base_verdict.headline}
    if run.verdict is not None and run.verdict.state != "passed":
        # The charts mark a failed run on the classes it failed on: goal_not_reached is goal_reached's.
        judged |= {"headline": run.verdict.headline,
                   "failed": [c.replace("goal_not_reached", "goal_reached") for c in run.verdict.classes]}
    return {
        "id": run.run_id, "file": run.source, "when": run.started_at.strftime("%Y-%m-%d %H:%M"),
        "labels": run.labels, "version": run.runtime_version, "commit": short_commit(run.git_commit, 12),
        "branch": run.git_branch, "user": run.user_backend, "group": run.group, "n": run.conversations,
        "spent": round(run.spent, 6), "per": None if per is None else round(per, 6),
        "report": run.run_id in reports, **judged, "rates": [_rate(run.rates.get(cls)) for cls in CHARTED],
    }


def _rate(counts: tuple[int, int, float | None, float | None] | None) -> list[int] | None:
    """[k, n, low, high], the interval's ends in hundredths of a percent (what the page shows, and
    a third shorter than decimals)."""
    if counts is None or not counts[1]:
        return None
    k, n, low, high = counts
    if low is None or high is None:
        return None
    return [k, n, round(low * 10_000), round(high * 10_000)]


def _script_json(data: dict[str, Any]) -> Markup:
    """JSON to embed in <script type="application/json">: no text in it can end the element."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return Markup(text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e"))
