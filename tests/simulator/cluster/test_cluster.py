"""The cluster's shared budget, as a plain object: what a Ray worker holds it settles once, and
what a dead worker held counts as spent, recorded as a lost call (no Ray needed here)."""

from __future__ import annotations

import asyncio
import time
from decimal import Decimal

from simulator.cluster.shared import Budget, LedgerLost, Rates, RemoteLedger
from simulator.ledger import Ledger


def call(conversation: str, turn: int = 1) -> dict:
    return {"conversation_id": conversation, "turn": turn, "backend": "openai:m", "model": "m",
            "request_hash": f"h-{conversation}-{turn}"}


def record(conversation: str, cost: str) -> dict:
    return {**call(conversation), "cost_usd": Decimal(cost), "cache_status": "miss"}


def test_a_dead_worker_s_reservations_count_as_spent_and_a_late_settle_is_not_counted_twice():
    budget = Budget(Decimal("1.00"), Ledger(Decimal("1.00")).figures())
    a, _, _ = budget.reserve(Decimal("0.30"), call("p/g/0"))
    b, _, _ = budget.reserve(Decimal("0.20"), call("p/g/1"))
    budget.settle(a, Decimal("0.05"), record("p/g/0", "0.05"))
    assert budget.forfeit(["p/g/1", "p/g/2"]) == 1
    budget.settle(b, Decimal("0.01"), record("p/g/1", "0.01"))   # from the dead worker, arriving late
    figures, records = budget.take()
    assert figures["spent"] == Decimal("0.25") and figures["reserved"] == 0 and figures["in_flight"] == 0
    assert [(r["conversation_id"], r["cost_usd"], r["cache_status"]) for r in records] == [
        ("p/g/0", Decimal("0.05"), "miss"), ("p/g/1", Decimal("0.20"), "lost")]
    assert sum(r["cost_usd"] for r in records) == figures["spent"]
    assert budget.take()[1] == []


def test_the_cluster_budget_refuses_what_it_cannot_cover_and_starts_from_the_run_s_spend():
    before = Ledger(Decimal("1.00"))
    before.spent = Decimal("0.70")                      # an earlier attempt of the run, and the probe
    budget = Budget(before.budget, before.figures())
    held, left, exhausted = budget.reserve(Decimal("0.20"), call("p/g/0"))
    assert held is not None and left == Decimal("0.10") and not exhausted
    refused, left, exhausted = budget.reserve(Decimal("0.20"), call("p/g/1"))
    assert refused is None and exhausted
    budget.release(held)
    assert budget.forfeit(None) == 0 and budget.take()[0]["spent"] == Decimal("0.70")


def test_the_cluster_window_counts_what_the_driver_booked_before_the_workers_started():
    now = time.monotonic()
    rates = Rates({"openai:m": (2, None)}, {"openai:m": [(now, 10), (now, 10)]})
    # Two calls booked just now fill the minute: the next waits for the first of them to leave it.
    (wait,) = rates.book("openai:m", [10])
    assert 59 < wait <= 60


class Handle:
    """An actor handle for a plain object: `handle.method.remote(...)` calls it, awaitably."""

    def __init__(self, target, fail: bool = False) -> None:
        self.target, self.fail, self.calls = target, fail, []

    def __getattr__(self, name):
        handle = self

        class Method:
            @staticmethod
            def remote(*args):
                handle.calls.append(name)

                async def answer():
                    if handle.fail:
                        raise ConnectionError("actor died")
                    return getattr(handle.target, name)(*args)
                return answer()
        return Method


def test_a_worker_s_holds_and_frees_of_one_moment_travel_in_one_exchange():
    budget = Budget(Decimal("1.00"), Ledger(Decimal("1.00")).figures())
    handle = Handle(budget)
    ledger = RemoteLedger(handle)

    async def moment():
        held = await asyncio.gather(*(ledger.hold(Decimal("0.30"), call(f"p/g/{i}")) for i in range(4)))
        assert [h is not None for h in held] == [True, True, True, False] and ledger.exhausted
        for h in held[:3]:
            ledger.settle(h, Decimal("0.01"), record("p/g/0", "0.01"))
        await ledger.flush()

    asyncio.run(moment())
    assert handle.calls == ["exchange", "exchange"]       # four holds at once; three settles
    figures, records = budget.take()
    assert figures["spent"] == Decimal("0.03") and figures["reserved"] == 0 and len(records) == 3


def test_a_gone_budget_actor_is_told_to_every_call_that_asked():
    ledger = RemoteLedger(Handle(None, fail=True))

    async def ask():
        return await asyncio.gather(*(ledger.hold(Decimal("0.1"), call("p/g/0")) for _ in range(2)),
                                    return_exceptions=True)

    answers = asyncio.run(ask())
    assert all(isinstance(a, LedgerLost) for a in answers) and ledger.lost
