"""One reply with 100,000 offers costs linear time, and never stalls the other conversations.

The hostile runtime answers one conversation's first turn with 100,000 offers (5.8 MB) over
HTTP. While simrun reads, checks, answers and scores it, a probe task on the same event loop
wakes every 5 ms; the longest it waits beyond that is the stall every other conversation in
flight would feel. A quadratic step anywhere (the scripted user's seen offers, a check that
rebuilt a set per mention) makes this take minutes; linear, it is a fraction of a second.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

from simrun.simulator._conversation import converse
from simrun.simulator._runner import matrix
from simrun.simulator.adapters._http import HttpRuntime
from simrun.simulator.users._scripted import ScriptedUser
from tests.conftest import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "hostile_runtime.py"
# The stated bound: the most CPU time the event loop's thread may spend between two ticks of the
# probe (0.15-0.3 s measured). CPU time, not wall time, so that other processes on a loaded
# machine, which delay the loop without holding it, do not count.
LAG_BOUND_S = 0.6
PROBE_S = 0.005


def test_a_reply_with_100000_offers_never_holds_the_loop_past_the_bound(demo, monkeypatch):
    monkeypatch.setenv("HOSTILE", "plain-paula/new-trip-full=offers")
    cell = next(c for c in matrix(demo, 1, 1) if c.persona.id == "plain-paula" and c.goal.id == "new-trip-full")
    runtime = HttpRuntime(command=[sys.executable, str(FIXTURE), "http", "--port", "{port}"],
                          max_result_bytes=8 << 20, env=dict(os.environ))

    async def go():
        await runtime.health()
        lags: list[float] = []
        done = asyncio.Event()

        async def probe():
            while not done.is_set():
                before = time.thread_time()
                await asyncio.sleep(PROBE_S)
                lags.append(time.thread_time() - before)

        task = asyncio.create_task(probe())
        try:
            conversation = await converse(cell, ScriptedUser(), runtime)
        finally:
            done.set()
            await task
            await runtime.aclose()
        return conversation, lags

    conversation, lags = asyncio.run(go())
    first = conversation.transcript.turns[0].result
    assert len(first["next_steps"]) >= 100_000               # the reply was read whole, and scored
    assert len(conversation.transcript.turns) >= 3           # and the user read it to choose its next turns
    assert conversation.transcript.end != "runtime_error"
    assert conversation.scorecard.checks["dead_end"].checked_turns >= 1
    print(f"longest stall {max(lags):.3f} s over {len(conversation.transcript.turns)} turns")
    assert max(lags) < LAG_BOUND_S, f"the loop was held for {max(lags):.3f} s"


def test_the_report_embeds_a_bounded_amount_per_turn_whatever_the_reply(demo, tmp_path):
    from decimal import Decimal

    from simrun.examples.tripdesk import TripDesk
    from simrun.scoring.pages._report import build_report
    from simrun.scoring.store._database import Store
    from simrun.simulator._runner import run_matrix
    from simrun.simulator.adapters._python import PythonRuntime

    class Flood(TripDesk):
        """TripDesk, with a 500 KB reply and 100,000 offers in every turn."""

        def turn(self, session, payload):
            result = super().turn(session, payload)
            result["reply"] = "z" * 500_000 + result["reply"]
            result["next_steps"] = [*(result.get("next_steps") or []),
                                    *({"id": f"x{i}", "operation": "noop"} for i in range(100_000))]
            return result

    small = type(demo)(demo.personas[:1], demo.goals[:2], demo.hash, demo.item_hashes)
    with Store(tmp_path / "s.duckdb") as store:
        result = asyncio.run(run_matrix(small, PythonRuntime(Flood(), max_result_bytes=64 << 20), ScriptedUser(),
                                        store, repetitions=1, seed=1, budget=Decimal(0)))
        turns = store.con.execute("SELECT count(*) FROM turns").fetchone()[0]
        path = build_report(store, result.run_id, tmp_path / "reports")
    assert turns >= 2
    per_turn = path.stat().st_size / turns
    assert per_turn < 12_000, f"{per_turn:.0f} bytes per turn"      # the README says about 8 KB
