"""`simrun check-user --user BACKEND:MODEL`: measure a user model on the reference runtime."""

from __future__ import annotations

from decimal import Decimal
from typing import Optional

import duckdb
import typer

from simrun._errors import ConfigError, SimrunError
from simrun._money import parse_usd, usd
from simrun._settings import Budgets, load_budgets
from simrun.cli._common import BUDGETS, CONFIG, DB, err_line, fail, out, print_competence, say
from simrun.scoring.gate import DEFAULT_THRESHOLD, competence
from simrun.scoring.store import Store
from simrun.simulator import (
    CheckUser,
    Ledger,
    RunProgress,
    checks_db,
    duration,
    eventloop,
    given_file,
    kept,
    load_project_file,
    measured_pace,
    project_db,
    reference_dataset,
)
from simrun.simulator.users import make_user


def register(app: typer.Typer) -> None:
    @app.command("check-user")
    def check_user_command(
            user: str = typer.Option(..., "--user", help="The user model to measure: openai:<model> or "
                                     "anthropic:<model>."),
            budget: Optional[str] = typer.Option(None, "--budget", help="Most the check may spend (default: "
                                                 "budget.default of budgets.toml)."),
            repetitions: int = typer.Option(1, "--repetitions", "-n", min=1, max=20,
                                            help="Repetitions of the 20 conversations (2 personas x 10 goals)."),
            threshold: float = typer.Option(DEFAULT_THRESHOLD, "--threshold", min=0.0, max=1.0,
                                            help="Below this goal-reached share, reports warn that the runtime's "
                                            "rates may mostly measure the user."),
            concurrency: Optional[int] = typer.Option(None, "--concurrency", min=1,
                                                      help="Conversations in flight (default: run.concurrency)."),
            fresh: bool = typer.Option(False, "--fresh", help="Start a new check even if this one was stopped before "
                                       "it finished (by default the same command finishes it)."),
            config: Optional[str] = CONFIG, budgets: Optional[str] = BUDGETS, db: Optional[str] = DB) -> None:
        """Measure how competent a user model is: a small budgeted run against the bundled reference
        runtime, whose goals are all reachable. The result is stored, and every report of a run with
        this backend and model shows it beside the rates. A check stopped early keeps its calls and
        conversations, and the same command finishes it."""
        try:
            if user == "scripted":
                raise ConfigError("check-user measures a model-played user; the scripted user is the reference "
                                  "itself", field="--user")
            project = load_project_file(config)
            budgets_file = given_file(budgets, "budgets.toml", "--budgets")
            money = load_budgets(budgets_file) if budgets_file else Budgets()
            amount = parse_usd(budget) if budget else parse_usd(money.budget.default, where="budget.default")
            make_user(user, budgets=money, settings=project.user, output=project.run.user_output)   # key, price
            check = CheckUser(user, reference_dataset(), repetitions, amount, threshold)
            path = project_db(db, config)
            kept_in = checks_db(path)
            with Store(path) as store, Store(kept_in) as checks:
                result, stored = eventloop.run(_check(check, money, project, store, checks, fresh=fresh,
                                                      concurrency=concurrency or project.run.concurrency))
                _print_check(stored, result)
                print_competence(store, user)
                found = competence(store, user)
        except SimrunError as exc:
            fail(exc)
        except KeyboardInterrupt:
            err_line(f"interrupted: {_what_was_kept(checks_db(project_db(db, config)), user)}; run the same command "
                     "again to finish it")
            raise typer.Exit(130) from None
        out.print(f"stored in {path}; every report of a run with {user} shows it beside the rates (its conversations "
                  f"and calls: run {result.run_id} in {kept_in})", highlight=False, soft_wrap=True)
        if result.stopped:
            err_line(f"error: {result.stopped}")
            raise typer.Exit(2)
        if not found or not found.judged:
            err_line("error: no conversation of the check could be judged (see the provider errors above)")
            raise typer.Exit(2)


async def _check(check: CheckUser, money, project, store: Store, checks: Store, *, fresh: bool, concurrency: int):
    """The check's plan (cost, and time at the server's measured pace), then the check itself,
    with a run's progress lines."""
    estimated = await check.estimate(money, store)
    earlier = None if fresh else check.earlier(checks)
    done = len(checks.conversation_ids(earlier["run_id"])) if earlier else 0
    left = check.conversations - done
    calls = round(estimated.calls * left / check.conversations) if check.conversations else 0
    pace = measured_pace(checks, check.backend)
    when = (f"about {duration(calls * pace[0])} at the server's measured pace ({pace[0]:.1f}s a call over "
            f"{pace[1]} calls)" if pace else "how long: measured from its first calls, in the progress lines")
    resumed = f"; finishing run {earlier['run_id']} ({done} conversations stored)" if earlier else ""
    out.print(f"check-user {check.backend}: {check.conversations} conversations against the reference runtime "
              f"(TripDesk, every goal reachable){resumed}; estimated {estimated.range_text} (p50–p90; "
              f"{estimated.basis}); budget {usd(check.budget)}; about {calls} calls, {when}",
              highlight=False, soft_wrap=True)
    ledger = Ledger(check.budget)
    with RunProgress(out, left, check.budget, ledger, calls=calls) as progress:
        return await check.run(money, project, store, checks, concurrency=concurrency, ledger=ledger,
                               resume=not fresh, on_user_ready=say, on_conversation=progress)


def _what_was_kept(path, user: str) -> str:
    """What an interrupted check left in its database, for the line that says so."""
    try:
        with Store(path, create=False) as checks:
            found = kept(checks, user)
    except (SimrunError, duckdb.Error):
        found = None
    if found is None:
        return "nothing was stored (it was stopped before its run began)"
    run_id, conversations, calls, spent = found
    return (f"{conversations} finished conversation(s) and {calls} model call(s) (${spent:.6f}) of {user} are kept "
            f"in {path} (run {run_id})")


def _print_check(check: dict, result) -> None:
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
