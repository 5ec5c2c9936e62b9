"""The commands that read stored runs: `runs`, `report`, `dashboard`, `show`, `merge` and `history keep`."""

from __future__ import annotations

import json
import sys
import textwrap
from dataclasses import asdict
from typing import Optional

import typer

from simrun import (
    RunContents,
    SimrunError,
    Transcript,
    TurnRecord,
    contents,
    dashboard,
    keep_in_history,
    merge,
    report,
    runs,
    text,
)
from simrun import conversation as conversation_of
from simrun.cli._common import BUDGETS, DB, fail, out, print_summary, say
from simrun.cli._gate import BASELINE_REF, SHARED_CELLS_ONLY
from simrun.cli._tables import WIDTH, fit

HISTORY = typer.Option(None, "--history", help="Read the runs kept in this history instead (a folder, or an "
                       "object-store URL such as s3://bucket/prefix; docs/how-to/dashboards.md).")


def register(app: typer.Typer) -> None:
    @app.command("runs")
    def runs_command(db: Optional[str] = DB, history: Optional[str] = HISTORY) -> None:
        """List the runs in the database (or the history), newest first."""
        try:
            rows = runs(db=db, history=history)
        except SimrunError as exc:
            fail(exc)
        # The run id is its start time (UTC), so no column repeats it. Who ran it and on what (user,
        # labels, runtime version, commit: anyone's text, of any length) is the line under it.
        cells, identities = [], []
        for r in rows:
            rate = "–" if r.goal_rate is None else f"{100 * r.goal_rate:.1f}%"
            cells.append([r.run_id, r.status, str(r.conversations), rate, text.usd(r.spent_usd), r.dataset_hash[:8]])
            commit = (text.short_commit(r.git_commit, 8) or "–") + (f" {r.git_branch}" if r.git_branch else "")
            identities.append(f"user {r.user} · labels {', '.join(r.labels) or '–'} · runtime "
                              f"{r.runtime_version or '–'} · commit {commit}")
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


    @app.command("report")
    def report_command(
            run: str = typer.Argument("latest", help="Run id, or 'latest'."), db: Optional[str] = DB,
            reports: str = typer.Option("reports", "--reports", help="Output folder."),
            baseline: Optional[str] = typer.Option(None, "--baseline", help="A blessed baseline file or a run id: "
                                                   "the report shows each class's delta, the gate's verdict and "
                                                   "the conversations that flipped (side by side, for a run)."),
            baseline_ref: Optional[str] = BASELINE_REF,
            shared_cells_only: bool = SHARED_CELLS_ONLY,
            budgets: Optional[str] = BUDGETS) -> None:
        """Write (again) the HTML report of a stored run, against a baseline if given."""
        try:
            written = report(run, db=db, reports=reports, baseline=baseline, baseline_ref=baseline_ref,
                             budgets=budgets)
        except SimrunError as exc:
            fail(exc)
        # What the report opens on, so that the command line and the page say the same.
        say(f"verdict of run {written.run_id}: {written.verdict.headline()}")
        out.print(f"report: {written.path}", highlight=False)


    @app.command("dashboard")
    def dashboard_command(
            db: Optional[list[str]] = typer.Option(None, "--db", help="A DuckDB file to read; repeat for "
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
        try:
            path = dashboard(db, history=history, out=out_file, baseline=baseline, budgets=budgets)
        except SimrunError as exc:
            fail(exc)
        out.print(f"dashboard: {path}", highlight=False)


    @app.command()
    def show(run: str = typer.Argument(..., help="Run id, or 'latest'."),
             conversation: Optional[str] = typer.Argument(None, help="persona/goal/repetition; omit to list them."),
             db: Optional[str] = DB, as_json: bool = typer.Option(False, "--json", help="Print the raw transcript."),
             cls: Optional[str] = typer.Option(None, "--class", help="List only this class's findings.")) -> None:
        """Print one stored conversation turn by turn (or list a run's conversations and findings by class)."""
        try:
            if conversation is None:
                _list_run(contents(run, cls=cls, db=db), cls)
                return
            shown = conversation_of(run, conversation, db=db)
        except SimrunError as exc:
            fail(exc)
        t, findings = shown.transcript, shown.findings
        if as_json:
            sys.stdout.write(json.dumps(asdict(t), indent=2, default=str) + "\n")
            return
        session = f", runtime session {t.session_id}" if t.session_id else ""
        out.print(f"{conversation}: end {shown.end_reason}, {len(t.turns)} turns, seed {t.seed}{session}; "
                  f"goal: {shown.goal_detail}", highlight=False, soft_wrap=True)
        for turn in t.turns:
            said = _click(t, turn) if turn.user.kind == "click" else turn.user.text
            out.print(f"#{turn.index} user:    {said}", highlight=False, markup=False)
            if turn.result:
                out.print(f"   runtime: {turn.result.get('reply')}", highlight=False, markup=False)
            for line in _tool_calls(turn):
                out.print(f"   {line}", highlight=False, markup=False, soft_wrap=True)
            for f in findings:
                if f.turn == turn.index:
                    out.print(f"   ! {f.cls}: {f.detail}", style="red", highlight=False, markup=False)
        for f in findings:
            if f.turn is None:
                out.print(f"! {f.cls}: {f.detail}", style="red", highlight=False, markup=False)
        for cls, why in sorted(shown.unverifiable.items()):
            out.print(f"UNVERIFIABLE {cls}: {why[0][0]}", style="yellow", highlight=False, markup=False,
                      soft_wrap=True)
        if t.error:
            collateral = (" (collateral: the runtime went down in another conversation)" if t.error.get("collateral")
                          else "")
            out.print(f"error: {t.error.get('message')}{collateral}", style="red", highlight=False, markup=False,
                      soft_wrap=True)
            # The runtime's own evidence, where people look: not only in --json.
            facts, blocks = text.error_evidence(t.error)
            if facts:
                out.print(f"  {facts}", highlight=False, markup=False, soft_wrap=True)
            for title, block in blocks:
                out.print(f"  {title}:", style="bold", highlight=False, markup=False)
                for line in block.splitlines():
                    out.print(f"    {line}", highlight=False, markup=False, soft_wrap=True)


    def _tool_calls(turn: TurnRecord) -> list[str]:
        """The turn's tool calls, as the store's events show them (name, record, status, clipped
        arguments), or why they are unknown: the evidence behind what the reply claims."""
        state = turn.state if isinstance(turn.state, dict) else {}
        events = state.get("events")
        if not isinstance(events, list):
            why = state.get("events_unknown")
            return [f"tool calls unknown: {text.cut(str(why), 300)}"] if why else []
        lines = []
        mine = [e for e in events if isinstance(e, dict) and e.get("turn") == turn.index]
        for e in mine[:20]:
            args = json.dumps(e["arguments"], default=str) if e.get("arguments") is not None else ""
            why = f" ({text.cut(str(e['reason']), 120)})" if e.get("reason") else ""
            lines.append(f"tool {text.cut(str(e.get('operation')), 80)} "
                         f"{text.cut(str(e.get('record') or '(no record)'), 80)} "
                         f"{text.cut(str(e.get('status')), 20)}{why} {text.cut(args, 160)}".rstrip())
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
        return f"clicks {turn.user.offer} \"{text.one_line(label, 80) or ''}\"{where}"


    def _list_run(listed: RunContents, cls: str | None) -> None:
        """A run's conversations (unless one class is asked for), then its findings by class."""
        for c in listed.conversations:
            reached = c.goal_reached
            goal = "goal reached" if reached else "goal UNVERIFIABLE" if reached is None else "goal not reached"
            at = f"  session {c.session_id}" if c.session_id else ""
            out.print(f"{c.conversation_id}  {c.end_reason}  {goal}{at}", highlight=False, soft_wrap=True,
                      markup=False)
        if not listed.findings:
            out.print(f"no {cls + ' ' if cls else ''}findings in run {listed.run_id}", highlight=False)
            return
        out.print("findings by class:" if cls is None else f"{cls} findings:", highlight=False)
        for name, rows in listed.findings.items():
            conversations = sorted({r.conversation_id for r in rows})
            out.print(f"  {name}: {len(conversations)} conversation(s)", style="red", highlight=False, markup=False)
            for r in rows:
                at = f" turn {r.turn}" if r.turn is not None else ""
                out.print(f"    {r.conversation_id}{at}: {r.detail}", highlight=False, markup=False,
                          soft_wrap=True)


    @app.command("merge")
    def merge_command(
            shards: list[str] = typer.Argument(..., help="The DuckDB files of shards 0..n-1 of one run."),
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
        try:
            merged = merge(shards, out=out_file, reports=reports, partial=partial, baseline=baseline,
                           baseline_ref=baseline_ref, budgets=budgets)
        except SimrunError as exc:
            fail(exc)
        print_summary(merged.verdict, merged.facts)
        out.print(f"merged {merged.shards} shards into run {merged.run_id} in {out_file}; report: {merged.report}",
                  highlight=False)
        raise typer.Exit(merged.verdict.exit_code)


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
            kept = keep_in_history(run, history=history, db=db)
        except SimrunError as exc:
            fail(exc)
        out.print(f"kept run {kept.run_id} -> {kept.where}", highlight=False, soft_wrap=True, markup=False)
