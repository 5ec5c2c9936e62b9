"""`simrun check-user --user BACKEND:MODEL`: measure a user model on the reference runtime."""

from __future__ import annotations

from decimal import Decimal
from typing import Optional

import typer

from scoring.gate.competence import DEFAULT_THRESHOLD, competence
from scoring.errors import ConfigError, SimrunError
from scoring.store.database import Store
from simulator import eventloop
from simulator.check_user import CheckUser, reference_dataset
from simulator.cli.common import BUDGETS, CONFIG, DB, err_line, fail, out, print_competence, say
from simulator.config import Budgets, load_budgets
from simulator.money import parse_usd, usd
from simulator.project import given_file, load_project_file, project_db
from simulator.users.base import make_user


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
            config: Optional[str] = CONFIG, budgets: Optional[str] = BUDGETS, db: Optional[str] = DB) -> None:
        """Measure how competent a user model is: a small budgeted run against the bundled reference
        runtime, whose goals are all reachable. The result is stored, and every report of a run with
        this backend and model shows it beside the rates."""
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
            with Store(path) as store:
                estimated = eventloop.run(check.estimate(money, store))
                out.print(f"check-user {user}: {check.conversations} conversations against the reference runtime "
                          f"(TripDesk, every goal reachable); estimated {estimated.range_text} (p50–p90; "
                          f"{estimated.basis}); budget {usd(amount)}", highlight=False, soft_wrap=True)
                result, stored = eventloop.run(check.run(
                    money, project, store, concurrency=concurrency or project.run.concurrency,
                    on_user_ready=say))
                _print_check(stored, result)
                print_competence(store, user)
                found = competence(store, user)
        except SimrunError as exc:
            fail(exc)
        except KeyboardInterrupt:
            err_line("interrupted: nothing was stored")
            raise typer.Exit(130)
        out.print(f"stored in {path}; every report of a run with {user} shows it beside the rates", highlight=False)
        if result.stopped:
            err_line(f"error: {result.stopped}")
            raise typer.Exit(2)
        if not found or not found.judged:
            err_line("error: no conversation of the check could be judged (see the provider errors above)")
            raise typer.Exit(2)


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
