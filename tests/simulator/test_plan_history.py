"""`simrun plan` for a model user: from the history of the same backend and model, within ±30%
of what a run then spends, where the scripted user's lengths (the prior) are far off."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest

from simrun._settings import Budgets
from simrun.examples.tripdesk import TripDesk
from simrun.scoring.store._database import Store
from simrun.simulator._ledger import Ledger
from simrun.simulator._plan import estimate
from simrun.simulator._runner import run_matrix
from simrun.simulator.adapters._python import PythonRuntime
from tests.fixtures.model_api import FakeModelAPI
from tests.simulator.users.test_model_users import PRICE, small, user_for

pytestmark = pytest.mark.usefixtures("api_keys")

SMALL_TALK = ("Hi there.", "Before we start, is your service open on weekends?", "Do you also handle hotel bookings?",
              "Thanks, that is good to know.", "One more thing: can I pay by card?", "Sorry, where was I?")


def long_talker(system: str, messages: list[dict]) -> dict:
    """A chatty user: some small talk first (more for some goals than others), then to the point."""
    title = system.split("## Your goal\n", 1)[1].split("\n", 1)[0]
    chat = 2 + len(title) % 4
    said = sum(m["role"] == "assistant" for m in messages)
    if said < chat:
        return {"action": "message", "text": SMALL_TALK[said], "offer": None, "reason": None, "step": None}
    return FakeModelAPI.play(system, messages[2 * chat:])


def spend(db, dataset, seed: int) -> Decimal:
    ledger = Ledger(Decimal(5))
    user = user_for("openai", FakeModelAPI(policy=long_talker), ledger)
    with Store(db) as store:
        return asyncio.run(run_matrix(dataset, PythonRuntime(TripDesk()), user, store, repetitions=3, seed=seed,
                                      budget=ledger.budget, ledger=ledger, resume=False)).spent_usd


def plan(db, dataset, seed: int):
    budgets = Budgets(prices={"openai:m": PRICE})
    with Store(db) as store:
        (found,) = asyncio.run(estimate(dataset, PythonRuntime(TripDesk()), budgets, Decimal(5), repetitions=3,
                                        seed=seed, backends=["openai:m"], store=store))
    return found


@pytest.mark.parametrize("seed", [6, 7])
def test_the_plan_from_history_is_within_30_percent_where_the_prior_is_not(tmp_path, demo, seed):
    dataset = small(demo, ("single-add-bag", "cancel-trip", "rename-trip"))
    db = tmp_path / "h.duckdb"
    prior = plan(db, dataset, seed)
    spend(db, dataset, seed=5)                          # an earlier run of the same model: the history
    found = plan(db, dataset, seed)
    actual = spend(db, dataset, seed)
    assert prior.source == "prior" and found.source == "history"
    assert "history: 18 conversations of openai:m" in found.basis
    assert abs(actual - found.cost_usd) / actual <= Decimal("0.30"), (found.cost_usd, actual)
    assert found.cost_usd <= found.high_usd
    assert abs(actual - prior.cost_usd) / actual > Decimal("0.30")      # the scripted user's lengths mislead
