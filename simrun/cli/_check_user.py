"""`simrun check-user --user BACKEND:MODEL`: measure a user model on the reference runtime."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Optional

import typer

from simrun import PreparedCheckUser, RunFacts, RunProgress, SimrunError, UserCheck, prepare_check_user, text
from simrun.cli._common import BUDGETS, CONFIG, DB, err_line, fail, out, print_competence, say


def register(app: typer.Typer) -> None:
    @app.command("check-user")
    def check_user_command(
            user: str = typer.Option(..., "--user", help="The user model to measure: openai:<model> or "
                                     "anthropic:<model>."),
            budget: Optional[str] = typer.Option(None, "--budget", help="Most the check may spend (default: "
                                                 "budget.default of budgets.toml)."),
            repetitions: int = typer.Option(1, "--repetitions", "-n",
                                            help="Repetitions of the 20 conversations (2 personas x 10 goals; 1 "
                                            "to 20)."),
            threshold: Optional[float] = typer.Option(None, "--threshold",
                                                      help="Below this goal-reached share (0 to 1; default 0.8), "
                                                      "reports warn that the runtime's rates may mostly measure the "
                                                      "user."),
            concurrency: Optional[int] = typer.Option(None, "--concurrency",
                                                      help="Conversations in flight (default: run.concurrency)."),
            fresh: bool = typer.Option(False, "--fresh", help="Start a new check even if this one was stopped before "
                                       "it finished (by default the same command finishes it)."),
            config: Optional[str] = CONFIG, budgets: Optional[str] = BUDGETS, db: Optional[str] = DB) -> None:
        """Measure how competent a user model is: a small budgeted run against the bundled reference
        runtime, whose goals are all reachable. The result is stored, and every report of a run with
        this backend and model shows it beside the rates. A check stopped early keeps its calls and
        conversations, and the same command finishes it."""
        try:
            prepared = prepare_check_user(user, budget=budget, repetitions=repetitions, threshold=threshold,
                                          concurrency=concurrency, fresh=fresh, config=config, budgets=budgets, db=db)
        except SimrunError as exc:
            fail(exc)
        _say_plan(prepared)
        try:
            checked = prepared.run(progress=lambda ledger: RunProgress(out, prepared.left, prepared.budget, ledger,
                                                                        calls=prepared.calls), note=say)
        except SimrunError as exc:
            fail(exc)
        except KeyboardInterrupt:
            err_line(f"interrupted: {_what_was_kept(prepared)}; run the same command again to finish it")
            raise typer.Exit(130) from None
        _print_check(checked.measured, checked)
        print_competence(RunFacts(checked.run_id, user, None, checked.competence))
        out.print(f"stored in {prepared.db}; every report of a run with {user} shows it beside the rates (its "
                  f"conversations and calls: run {checked.run_id} in {prepared.checks_db})", highlight=False,
                  soft_wrap=True)
        if checked.stopped:
            err_line(f"error: {checked.stopped}")
            raise typer.Exit(2)
        if not checked.judged:
            err_line("error: no conversation of the check could be judged (see the provider errors above)")
            raise typer.Exit(2)


def _say_plan(check: PreparedCheckUser) -> None:
    """The check's plan, before anything is spent: its cost, and its time at the server's measured pace."""
    pace = check.pace
    when = (f"about {text.duration(check.calls * pace[0])} at the server's measured pace ({pace[0]:.1f}s a call "
            f"over {pace[1]} calls)" if pace else "how long: measured from its first calls, in the progress lines")
    resumed = f"; finishing run {check.earlier} ({check.stored} conversations stored)" if check.earlier else ""
    estimated = check.estimate
    out.print(f"check-user {check.user}: {check.conversations} conversations against the reference runtime "
              f"(TripDesk, every goal reachable){resumed}; estimated {estimated.range_text} (p50–p90; "
              f"{estimated.basis}); budget {text.usd(check.budget)}; about {check.calls} calls, {when}",
              highlight=False, soft_wrap=True)


def _what_was_kept(check: PreparedCheckUser) -> str:
    """What an interrupted check left in its database, for the line that says so."""
    found = check.kept()
    if found is None:
        return "nothing was stored (it was stopped before its run began)"
    return (f"{found.conversations} finished conversation(s) and {found.calls} model call(s) (${found.spent_usd:.6f}) "
            f"of {check.user} are kept in {check.checks_db} (run {found.run_id})")


def _print_check(check: Mapping[str, Any], result: UserCheck) -> None:
    n = check["conversations"]
    errors = ", ".join(f"{kind} {count}" for kind, count in sorted(check["simulator_errors"].items(),
                                                                   key=lambda kv: -kv[1])) or "none"
    per = Decimal(check["cost_usd"]) / n if n else Decimal(0)
    turns = check["turns_per_goal"]
    out.print(f"simulator errors by kind: {errors}; provider errors: {check['provider_errors']}", highlight=False,
              soft_wrap=True)
    out.print(f"turns per reached goal: {'–' if turns is None else f'{turns:.1f}'}; cost per conversation: "
              f"${per:.6f} (spent ${result.spent_usd:.6f}); output form: {check['user_output']}", highlight=False,
              soft_wrap=True)
    goals = "; ".join(f"{goal} {g['reached']}/{g['played']}" + (f" in {g['turns']:.1f} turns" if g["turns"] else "")
                      for goal, g in check["goals"].items())
    out.print(f"per goal (reached/judged): {goals or 'none judged'}", highlight=False, soft_wrap=True)
    for example in check["examples"]:
        out.print(f"  {example['kind']} in {example['conversation']}: {example['detail']}", highlight=False,
                  markup=False, soft_wrap=True)
