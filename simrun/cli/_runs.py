"""The commands that read stored runs: `runs`, `report`, `dashboard`, `show`, `merge` and `history keep`."""

from __future__ import annotations

import contextlib
import json
import sys
import textwrap
from pathlib import Path
from typing import Optional

import typer

from simrun import _secrets as secrets
from simrun._api import chosen_baseline
from simrun._commits import short_commit
from simrun._errors import ConfigError, SimrunError
from simrun._money import usd
from simrun._settings import Budgets, load_budgets
from simrun._transcript import Transcript, TurnRecord, error_evidence
from simrun._untrusted_text import one_line
from simrun.cli._common import BUDGETS, DB, fail, out, print_summary, say
from simrun.cli._gate import BASELINE_REF, SHARED_CELLS_ONLY
from simrun.cli._history import HISTORY, history_location
from simrun.cli._tables import WIDTH, fit
from simrun.scoring.gate import verdict_of_run
from simrun.scoring.pages import build_report
from simrun.scoring.store import Store, history_store, keep_run, reading, unverifiable_reasons
from simrun.simulator import given_file, load_project_file, project_baseline, project_db, project_reports


def _budgets(budgets: str | None) -> Budgets:
    """--budgets (or ./budgets.toml): the gate's thresholds for the dashboard's verdicts, and
    the release criteria."""
    budgets_file = given_file(budgets, "budgets.toml", "--budgets")
    return load_budgets(budgets_file) if budgets_file else Budgets()


def register(app: typer.Typer) -> None:
    @app.command()
    def runs(db: Optional[str] = DB, history: Optional[str] = HISTORY) -> None:
        """List the runs in the database (or the history), newest first."""
        try:
            with history_store(history) if history else Store(project_db(db), create=False) as store:
                rows = store.runs()
        except SimrunError as exc:
            fail(exc)
        # The run id is its start time (UTC), so no column repeats it. Who ran it and on what (user,
        # labels, runtime version, commit: anyone's text, of any length) is the line under it.
        cells, identities = [], []
        for r in rows:
            rate = "–" if r["goal_rate"] is None else f"{100 * r['goal_rate']:.1f}%"
            # This command holds the database's only write lock, so no run in it is running now:
            # one still marked running was killed (kill -9, a lost machine). Resuming finishes it.
            status = "killed" if r["status"] == "running" else r["status"]
            cells.append([r["run_id"], status, str(r["conversations"]), rate, usd(r["spent_usd"]),
                          r["dataset_hash"][:8]])
            commit = (short_commit(r["git_commit"], 8) or "–") + (f" {r['git_branch']}" if r["git_branch"] else "")
            identities.append(f"user {r['user_backend']} · labels {', '.join(r['labels']) or '–'} · runtime "
                              f"{r['runtime_version'] or '–'} · commit {commit}")
        if not rows and history:
            out.print(f"no run is kept in the history {history} yet: `simrun history keep` keeps one",
                      highlight=False, markup=False, soft_wrap=True)
            return
        header, lines = fit(["run", "status", "convs", "goal reached", "spent", "dataset"], cells, right={2, 3, 4})
        out.print(header, highlight=False)
        for line, identity in zip(lines, identities):
            out.print(line, highlight=False)
            out.print(textwrap.fill(identity, WIDTH, initial_indent="  ", subsequent_indent="    ",
                                    break_long_words=False, break_on_hyphens=False), highlight=False, soft_wrap=True)


    @app.command()
    def report(run: str = typer.Argument("latest", help="Run id, or 'latest'."), db: Optional[str] = DB,
               reports: str = typer.Option("reports", "--reports", help="Output folder."),
               baseline: Optional[str] = typer.Option(None, "--baseline", help="A blessed baseline file or a run id: "
                                                      "the report shows each class's delta, the gate's verdict and "
                                                      "the conversations that flipped (side by side, for a run)."),
               baseline_ref: Optional[str] = BASELINE_REF,
               shared_cells_only: bool = SHARED_CELLS_ONLY,
               budgets: Optional[str] = BUDGETS) -> None:
        """Write (again) the HTML report of a stored run, against a baseline if given."""
        try:
            database = project_db(db)
            base = chosen_baseline(baseline, baseline_ref, database, required=False)
            budgets_file = given_file(budgets, "budgets.toml", "--budgets")
            money = load_budgets(budgets_file) if budgets_file else Budgets()
            with Store(database, create=False) as store:
                # The criteria the run was judged with, unless --budgets says otherwise.
                verdict = verdict_of_run(store, run, money.release if budgets else None, baseline=base,
                                         gate_settings=money.gate, fallback=money.release)
                path = build_report(store, run, reports, baseline=base, gate_settings=money.gate,
                                    release=money.release, verdict=verdict)
        except SimrunError as exc:
            fail(exc)
        # What the report opens on, so that the command line and the page say the same.
        say(f"verdict of run {verdict.run_id}: {verdict.headline()}")
        out.print(f"report: {path}", highlight=False)


    @app.command()
    def dashboard(db: Optional[list[str]] = typer.Option(None, "--db", help="A DuckDB file to read; repeat for "
                                                         "several (one per release, or per CI job). Default: the "
                                                         "project's database."),
                  history: Optional[str] = typer.Option(None, "--history", help="Draw the runs kept in this "
                                                        "history too (a folder, or an object-store URL such as "
                                                        "s3://bucket/prefix); with no --db, only them."),
                  out_file: Optional[str] = typer.Option(None, "--out", help="The page to write (default: "
                                                         "index.html in the project's reports folder)."),
                  baseline: Optional[str] = typer.Option(None, "--baseline", help="A blessed baseline file "
                                                         "(default: gate.baseline of simrun.toml): every run is "
                                                         "judged against it, the newest of each dataset at the "
                                                         "top, and its rates are drawn in its dataset's charts."),
                  budgets: Optional[str] = BUDGETS) -> None:
        """Write the dashboard of every run in one or more databases (read-only, never merged)."""
        from simrun.scoring.gate import load_baseline
        from simrun.scoring.pages import build_dashboard

        try:
            paths = db or ([] if history else [project_db(None)])
            target = Path(out_file) if out_file else project_reports() / "index.html"
            if target.is_dir():
                raise ConfigError(f"{target} is a folder; name the page to write, e.g. {target / 'index.html'}",
                                  field="--out")
            base = load_baseline(baseline) if baseline else project_baseline(load_project_file(), given_file(
                None, "simrun.toml", "--config"))
            money = _budgets(budgets)
            with contextlib.ExitStack() as stack:
                stores = [stack.enter_context(reading(path)) for path in paths]
                if history:
                    stores.append(stack.enter_context(history_store(history)))
                path = build_dashboard(stores, target, baseline=base, gate_settings=money.gate,
                                       release=money.release if budgets else None, fallback=money.release)
        except SimrunError as exc:
            fail(exc)
        out.print(f"dashboard: {path}", highlight=False)


    @app.command()
    def show(run: str = typer.Argument(..., help="Run id, or 'latest'."),
             conversation: Optional[str] = typer.Argument(None, help="persona/goal/repetition; omit to list them."),
             db: Optional[str] = DB, as_json: bool = typer.Option(False, "--json", help="Print the raw transcript."),
             cls: Optional[str] = typer.Option(None, "--class", help="List only this class's findings.")) -> None:
        """Print one stored conversation turn by turn (or list a run's conversations and findings by class)."""
        from simrun.scoring.checks import ALL_CLASSES

        try:
            if cls is not None and cls not in (*ALL_CLASSES, "runtime_error"):
                raise ConfigError(f"no class {cls!r}; classes are: {', '.join(ALL_CLASSES)}", field="--class")
            with Store(project_db(db), create=False) as store:
                run_id = store.run(run)["run_id"]
                if conversation is None:
                    _list_run(store, run_id, cls)
                    return
                t = store.transcript(run_id, conversation)
                findings = store.findings(run_id, conversation)
                detail = store.conversation_row(run_id, conversation)
                reasons = unverifiable_reasons(store, run_id, conversation)
        except SimrunError as exc:
            fail(exc)
        if as_json:
            from dataclasses import asdict

            sys.stdout.write(json.dumps(asdict(t), indent=2, default=str) + "\n")
            return
        session = f", runtime session {t.session_id}" if t.session_id else ""
        out.print(f"{conversation}: end {detail['end_reason']}, {len(t.turns)} turns, seed {t.seed}{session}; "
                  f"goal: {detail['goal_detail']}", highlight=False, soft_wrap=True)
        for turn in t.turns:
            said = _click(t, turn) if turn.user.kind == "click" else turn.user.text
            out.print(f"#{turn.index} user:    {said}", highlight=False, markup=False)
            if turn.result:
                out.print(f"   runtime: {turn.result.get('reply')}", highlight=False, markup=False)
            for line in _tool_calls(turn):
                out.print(f"   {line}", highlight=False, markup=False, soft_wrap=True)
            for f in findings:
                if f["turn"] == turn.index:
                    out.print(f"   ! {f['class']}: {f['detail']}", style="red", highlight=False, markup=False)
        for f in findings:
            if f["turn"] is None:
                out.print(f"! {f['class']}: {f['detail']}", style="red", highlight=False, markup=False)
        for cls, why in sorted(reasons.items()):
            out.print(f"UNVERIFIABLE {cls}: {why[0][0]}", style="yellow", highlight=False, markup=False,
                      soft_wrap=True)
        if t.error:
            collateral = (" (collateral: the runtime went down in another conversation)" if t.error.get("collateral")
                          else "")
            out.print(f"error: {t.error.get('message')}{collateral}", style="red", highlight=False, markup=False,
                      soft_wrap=True)
            # The runtime's own evidence, where people look: not only in --json.
            facts, blocks = error_evidence(t.error)
            if facts:
                out.print(f"  {facts}", highlight=False, markup=False, soft_wrap=True)
            for title, text in blocks:
                out.print(f"  {title}:", style="bold", highlight=False, markup=False)
                for line in text.splitlines():
                    out.print(f"    {line}", highlight=False, markup=False, soft_wrap=True)


    def _tool_calls(turn: TurnRecord) -> list[str]:
        """The turn's tool calls, as the store's events show them (name, record, status, clipped
        arguments), or why they are unknown: the evidence behind what the reply claims."""
        state = turn.state if isinstance(turn.state, dict) else {}
        events = state.get("events")
        if not isinstance(events, list):
            why = state.get("events_unknown")
            return [f"tool calls unknown: {secrets.cut(str(why), 300)}"] if why else []
        lines = []
        mine = [e for e in events if isinstance(e, dict) and e.get("turn") == turn.index]
        for e in mine[:20]:
            args = json.dumps(e["arguments"], default=str) if e.get("arguments") is not None else ""
            why = f" ({secrets.cut(str(e['reason']), 120)})" if e.get("reason") else ""
            lines.append(f"tool {secrets.cut(str(e.get('operation')), 80)} "
                         f"{secrets.cut(str(e.get('record') or '(no record)'), 80)} "
                         f"{secrets.cut(str(e.get('status')), 20)}{why} {secrets.cut(args, 160)}".rstrip())
        if len(mine) > 20:
            lines.append(f"and {len(mine) - 20} more tool calls")
        return lines

    def _click(t: Transcript, turn: TurnRecord) -> str:
        """`clicks o-14 "Rebook the outbound"`: the button as the user saw it (the runtime's text,
        one short line), and the turn that showed it when that was not the turn just before."""
        shown = t.offer_label(turn.user.offer, turn.index)
        if shown is None:
            return f"clicks {turn.user.offer} (no earlier turn showed it)"
        label, at = shown
        where = f" (shown at #{at})" if at != turn.index - 1 else ""
        return f"clicks {turn.user.offer} \"{one_line(label, 80) or ''}\"{where}"


    def _list_run(store: Store, run_id: str, cls: str | None) -> None:
        """A run's conversations (unless one class is asked for), then its findings by class."""
        if cls is None:
            for cid, end, reached, session in store.conversation_list(run_id):
                goal = "goal reached" if reached else "goal UNVERIFIABLE" if reached is None else "goal not reached"
                at = f"  session {session}" if session else ""
                out.print(f"{cid}  {end}  {goal}{at}", highlight=False, soft_wrap=True, markup=False)
        grouped = store.findings_by_class(run_id, cls)
        if not grouped:
            out.print(f"no {cls + ' ' if cls else ''}findings in run {run_id}", highlight=False)
            return
        out.print("findings by class:" if cls is None else f"{cls} findings:", highlight=False)
        for name, rows in grouped.items():
            conversations = sorted({r["conversation_id"] for r in rows})
            out.print(f"  {name}: {len(conversations)} conversation(s)", style="red", highlight=False, markup=False)
            for r in rows:
                at = f" turn {r['turn']}" if r["turn"] is not None else ""
                out.print(f"    {r['conversation_id']}{at}: {r['detail']}", highlight=False, markup=False,
                          soft_wrap=True)


    @app.command()
    def merge(shards: list[str] = typer.Argument(..., help="The DuckDB files of shards 0..n-1 of one run."),
              out_file: str = typer.Option(..., "--out", help="The DuckDB file to write the joined run to."),
              reports: str = typer.Option("reports", "--reports", help="Folder for the joined run's report."),
              partial: bool = typer.Option(False, "--partial", help="Join shards that did not finish too; the "
                                           "joined run is then marked interrupted."),
              baseline: Optional[str] = typer.Option(None, "--baseline", help="A blessed baseline file or a run "
                                                     "id (default: gate.baseline of simrun.toml), as for `simrun`."),
              baseline_ref: Optional[str] = BASELINE_REF,
              budgets: Optional[str] = BUDGETS) -> None:
        """Join the shards of a run (each from `simrun --shard i/n`) into one run, and report it, judged
        as the same run unsharded would be: against gate.baseline too."""
        from simrun.scoring.store import merge as merge_shards

        try:
            settings = _budgets(budgets)
            base = chosen_baseline(baseline, baseline_ref, out_file, required=False)
            run_id = merge_shards(out_file, list[Path | str](shards), partial=partial)
            with Store(out_file, create=False) as store:
                verdict = verdict_of_run(store, run_id, settings.release, baseline=base, gate_settings=settings.gate)
                print_summary(store, verdict)
                path = build_report(store, run_id, reports, gate_settings=settings.gate, release=settings.release,
                                    baseline=base, verdict=verdict)
        except SimrunError as exc:
            fail(exc)
        out.print(f"merged {len(shards)} shards into run {run_id} in {out_file}; report: {path}", highlight=False)
        raise typer.Exit(verdict.exit_code)


    history_app = typer.Typer(add_completion=False, rich_markup_mode=None, no_args_is_help=True,
                              help="History: finished runs kept beyond the job that ran them, one file each.")
    app.add_typer(history_app, name="history")

    @history_app.command("keep")
    def keep(run: str = typer.Argument("latest", help="Run id, or 'latest'."), db: Optional[str] = DB,
             history: Optional[str] = typer.Option(None, "--history", help="Where to keep it: a folder, or an "
                                                   "object-store URL such as s3://bucket/prefix (default: "
                                                   "run.history of simrun.toml).")) -> None:
        """Keep a finished run in the history, as one file written whole and never overwritten."""
        try:
            run_id, where = keep_run(project_db(db), run, history_location(history))
        except SimrunError as exc:
            fail(exc)
        out.print(f"kept run {run_id} -> {where}", highlight=False, soft_wrap=True, markup=False)
