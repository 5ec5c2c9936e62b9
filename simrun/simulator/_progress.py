"""Live progress of a run: a rich progress bar on a terminal, plain periodic lines elsewhere (CI).

It shows conversations done (on a cluster, across its workers, with how many are alive), the spend
and the budget left, the goal-reached share and how many conversations raised a progress finding
or broke a guarantee so far. Outside a terminal a heartbeat prints a line every PLAIN_EVERY_S
even when no conversation has finished (a model user's conversation can take minutes): with the
run's ledger, it names the calls in flight and counts the money held for them in the spend.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from decimal import Decimal

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from simrun.scoring.store import Finished
from simrun.simulator._ledger import Ledger
from simrun.simulator._limits import waited, waiting_text

PLAIN_EVERY_S = 10.0


class RunProgress:
    """`workers`, on a cluster: how many of its workers are alive now (simulator/cluster/_executor.py)."""

    def __init__(self, console: Console, total: int, budget: Decimal, ledger: Ledger | None = None,
                 workers: Callable[[], int] | None = None, calls: int | None = None) -> None:
        self.console, self.total, self.budget, self.ledger = console, total, budget, ledger
        self.workers = workers
        self.calls = calls            # the model calls expected, for the time left at the measured pace
        self.done = self.reached = self.findings = self.broken = 0
        self.spent = Decimal(0)
        self.started = self.last_line = time.monotonic()
        self.waited_before = waited()      # limiters older than this run have waited for others
        self.bar: Progress | None = None
        self.heartbeat: asyncio.Task[None] | None = None
        if console.is_terminal:
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), TextColumn("{task.fields[status]}"), console=console,
                                transient=True)
            self.task = self.bar.add_task("conversations", total=total, status="")

    def __enter__(self) -> RunProgress:
        if self.bar is not None:
            self.bar.start()
        else:
            with contextlib.suppress(RuntimeError):   # no running loop: lines come with conversations only
                self.heartbeat = asyncio.get_running_loop().create_task(self._beat())
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
        if self.heartbeat is not None:
            self.heartbeat.cancel()

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(PLAIN_EVERY_S)
            if time.monotonic() - self.last_line >= PLAIN_EVERY_S * 0.99:
                self._line()

    def _line(self) -> None:
        self.last_line = time.monotonic()
        self.console.print(f"[{self.done}/{self.total}] {self.status()}", highlight=False, soft_wrap=True)

    def status(self) -> str:
        share = f"{self.reached / self.done:.0%}" if self.done else "–"
        text = f"goal reached {share} · with a progress finding {self.findings} · guarantees broken in {self.broken}"
        if self.workers is not None:
            alive = self.workers()
            text += f" · {alive} worker{'' if alive == 1 else 's'} alive"
        # What the run waits on, when a rate limit of budgets.toml holds its calls back.
        text += waiting_text(self.waited_before)
        if self.ledger is None:
            return text + f" · spent ${self.spent:.4f}, ${self.budget - self.spent:.4f} left"
        led = self.ledger
        # What is held for calls under way is spent as far as the budget knows.
        committed = led.spent + led.reserved
        return (text + f" · {led.in_flight} call(s) in flight · spent ${committed:.4f} (${led.reserved:.4f} of it "
                f"held for calls under way), ${self.budget - committed:.4f} left{self.pace()}")

    def pace(self) -> str:
        """" · 7.1s a call, about 12 min left": the calls settled so far, over the time they took,
        at the concurrency in use (a single-slot server's queue included)."""
        settled = self.ledger.calls if self.ledger is not None else 0
        if not self.calls or not settled:
            return ""
        per_call = (time.monotonic() - self.started) / settled
        left = max(self.calls - settled, 0) * per_call
        return f" · {per_call:.1f}s a call, about {duration(left)} left"

    def __call__(self, finished: Finished) -> None:
        card = finished.scorecard
        self.done += 1
        self.reached += bool(card.goal_reached)
        self.findings += any(f.cls in ("dead_end", "loop", "refused_offer", "not_understood", "unanswered")
                             for f in card.findings)
        self.broken += any(c.status == "fired" for name, c in card.checks.items()
                           if name in ("wrong_record", "stale_click", "phantom_receipt", "card_not_actionable",
                                       "refusal_with_hedge", "audit_gap", "integrity_leak"))
        self.spent += Decimal(str(finished.cost_usd))
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done, status=self.status())
        elif self.done == self.total or (self.heartbeat is None
                                         and time.monotonic() - self.last_line >= PLAIN_EVERY_S):
            self._line()


def duration(seconds: float) -> str:
    """A time to wait, as people say it: 40 s, 12 min, 2 h 5 min."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"
