"""The cluster's shared budget, as a plain object, and a worker's float of it: what a worker
spends is counted once, no float goes beyond the budget, and what a dead worker held counts as
spent, recorded as a lost call (no Ray needed here)."""

from __future__ import annotations

import asyncio
import time
from decimal import Decimal

from simrun.simulator._ledger import Ledger
from simrun.simulator.cluster._floats import FloatLedger
from simrun.simulator.cluster._shared import FLOAT, Budget, LedgerLost, Rates, Report


def call(conversation: str, turn: int = 1) -> dict:
    return {"conversation_id": conversation, "turn": turn, "backend": "openai:m", "model": "m",
            "request_hash": f"h-{conversation}-{turn}"}


def record(conversation: str, cost: str) -> dict:
    return {**call(conversation), "cost_usd": Decimal(cost), "cache_status": "miss"}


def test_a_dead_worker_s_float_counts_as_spent_and_a_late_report_is_not_counted_twice():
    budget = Budget(Decimal("1.00"), Ledger(Decimal("1.00")).figures(), "openai:m")
    assert budget.draw("worker 0/a.0", Report(), Decimal("0.30"))[0] == Decimal("0.30")
    assert budget.draw("worker 1/b.0", Report(), Decimal("0.20"))[0] == Decimal("0.20")
    budget.draw("worker 0/a.0", Report(Decimal("0.05"), 1, records=[record("p/g/0", "0.05")]), Decimal(0))
    assert budget.forfeit("worker 1/") == 1
    late = budget.draw("worker 1/b.0", Report(Decimal("0.01"), 1, records=[record("p/g/1", "0.01")]), Decimal(1))
    assert late == (Decimal(0), False, True)                   # forfeited: nothing counted, nothing given
    figures, records = budget.take()
    assert figures["spent"] == Decimal("0.25") and figures["reserved"] == Decimal("0.25")   # worker 0's float
    assert [(r["conversation_id"], r["cost_usd"], r["cache_status"]) for r in records] == [
        ("p/g/0", Decimal("0.05"), "miss"), (FLOAT, Decimal("0.20"), "lost")]
    assert sum(r["cost_usd"] for r in records) == figures["spent"]
    assert budget.forfeit(None) == 1 and budget.take()[0]["spent"] == Decimal("0.50")   # all that was held
    assert budget.take()[0]["reserved"] == 0


def test_the_cluster_budget_gives_no_float_beyond_what_is_left_and_starts_from_the_run_s_spend():
    before = Ledger(Decimal("1.00"))
    before.spent = Decimal("0.70")                      # an earlier attempt of the run, and the probe
    budget = Budget(before.budget, before.figures(), "openai:m")
    given, exhausted, _ = budget.draw("worker 0/a.0", Report(), Decimal("0.50"), need=Decimal("0.20"))
    assert given == Decimal("0.30") and not exhausted   # what is left, since the call it waits for fits
    given, exhausted, _ = budget.draw("worker 1/b.0", Report(), Decimal("0.20"), need=Decimal("0.20"))
    assert given == 0 and exhausted
    assert budget.draw("worker 0/a.0", Report(), Decimal("-0.30"))[0] == Decimal("-0.30")   # given back
    figures, _ = budget.take()
    assert figures["spent"] == Decimal("0.70") and figures["reserved"] == 0


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


def test_a_worker_holds_against_its_float_and_asks_the_actor_only_when_it_runs_low():
    budget = Budget(Decimal("1.00"), Ledger(Decimal("1.00")).figures(), "openai:m")
    handle = Handle(budget)
    ledger = FloatLedger(handle, "worker 0/a")

    async def calls():
        for i in range(200):
            held = await ledger.hold(Decimal("0.004"), call(f"p/g/{i}"))
            ledger.settle(held, Decimal("0.001"), record(f"p/g/{i}", "0.001"))
        await ledger.flush()

    asyncio.run(calls())
    # 200 calls; the float is drawn again only when it runs below half its size (4 worst cases at
    # least): a draw per few calls here, where each call is instant, and the last one gives back.
    assert len(handle.calls) <= 200 // 4 and handle.calls == ["draw"] * len(handle.calls)
    figures, records = budget.take()
    assert figures["spent"] == Decimal("0.200") == sum(r["cost_usd"] for r in records) and len(records) == 200
    assert figures["reserved"] == 0 and figures["calls"] == 200


def test_a_float_sized_by_the_rate_of_demand_holds_amounts_the_store_keeps_whole():
    """The float's size comes from a rate (money over seconds, many decimal places); it is drawn
    to the store's precision, so that what a dead worker held, counted as spent, is stored as it
    was counted, and the run's spend stays the sum of its stored calls."""
    budget = Budget(Decimal("100"), Ledger(Decimal("100")).figures(), "openai:m")
    ledger = FloatLedger(Handle(budget), "worker 0/a")

    async def busy():
        for i in range(6):
            for j in range(7):
                await ledger.hold(Decimal("0.00123457"), call(f"p/g/{i}.{j}"))
            await asyncio.sleep(0.11 + i / 997)      # demand measured over an uneven time
            await ledger._draw_now(Decimal(0))

    asyncio.run(busy())
    assert ledger.rate and ledger.rate.as_tuple().exponent < -8, "the rate is finer than the store keeps"
    assert budget.forfeit("worker 0/") == 1
    figures, records = budget.take()
    assert [r["cache_status"] for r in records] == ["lost"]
    lost = records[0]["cost_usd"]
    assert lost > 42 * Decimal("0.00123457"), "the float was sized by the rate, beyond what was held"
    assert lost.as_tuple().exponent >= -8 and figures["spent"] == lost


def test_concurrent_holds_never_overshoot_the_budget_and_the_one_that_does_not_fit_is_refused():
    budget = Budget(Decimal("0.01"), Ledger(Decimal("0.01")).figures(), "openai:m")
    ledger = FloatLedger(Handle(budget), "worker 0/a")

    async def moment():
        held = await asyncio.gather(*(ledger.hold(Decimal("0.003"), call(f"p/g/{i}")) for i in range(5)))
        for h in held:
            if h is not None:
                ledger.settle(h, Decimal("0.003"), record("p/g/0", "0.003"))
        await ledger.flush()
        return held

    held = asyncio.run(moment())
    assert sum(h is not None for h in held) == 3 and ledger.exhausted
    figures, records = budget.take()
    assert figures["spent"] == Decimal("0.009") == sum(r["cost_usd"] for r in records) <= Decimal("0.01")


def test_a_float_forfeited_while_its_worker_lives_is_not_counted_twice_and_a_new_one_is_drawn():
    budget = Budget(Decimal("1.00"), Ledger(Decimal("1.00")).figures(), "openai:m")
    ledger = FloatLedger(Handle(budget), "worker 0/a")

    async def steps():
        old = await ledger.hold(Decimal("0.01"), call("p/g/0"))    # a float of 4 such calls drawn
        assert budget.forfeit("worker 0/") == 1              # its chunk was lost: given up for dead
        # More than is free: it draws, hears of the forfeit, and draws a float of its own.
        new = await ledger.hold(Decimal("0.05"), call("p/g/1"))
        ledger.settle(old, Decimal("0.005"), record("p/g/0", "0.005"))   # counted already, at its float
        ledger.settle(new, Decimal("0.002"), record("p/g/1", "0.002"))
        await ledger.flush()
        return old, new

    old, new = asyncio.run(steps())
    assert (old.generation, new.generation) == (0, 1)
    figures, records = budget.take()
    assert [(r["conversation_id"], r["cache_status"]) for r in records] == [(FLOAT, "lost"), ("p/g/1", "miss")]
    assert figures["spent"] == sum(r["cost_usd"] for r in records) and figures["reserved"] == 0


def test_a_gone_budget_actor_is_told_to_every_call_that_asked():
    ledger = FloatLedger(Handle(None, fail=True), "worker 0/a")

    async def ask():
        return await asyncio.gather(*(ledger.hold(Decimal("0.1"), call("p/g/0")) for _ in range(2)),
                                    return_exceptions=True)

    answers = asyncio.run(ask())
    assert all(isinstance(a, LedgerLost) for a in answers) and ledger.lost
