"""Live progress of a run: a rich progress bar on a terminal, plain periodic lines elsewhere (CI).

It shows conversations done, the spend and the budget left, the goal-reached share and how many
conversations raised a progress finding or broke a guarantee so far.
"""

from __future__ import annotations

import time
from decimal import Decimal

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from simulator.conversation import Conversation

PLAIN_EVERY_S = 10.0


class RunProgress:
    def __init__(self, console: Console, total: int, budget: Decimal) -> None:
        self.console, self.total, self.budget = console, total, budget
        self.done = self.reached = self.findings = self.broken = 0
        self.spent = Decimal(0)
        self.started = self.last_line = time.monotonic()
        self.bar: Progress | None = None
        if console.is_terminal:
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), TextColumn("{task.fields[status]}"), console=console,
                                transient=True)
            self.task = self.bar.add_task("conversations", total=total, status="")

    def __enter__(self) -> "RunProgress":
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()

    def status(self) -> str:
        share = f"{self.reached / self.done:.0%}" if self.done else "–"
        return (f"goal reached {share} · with a progress finding {self.findings} · guarantees broken in "
                f"{self.broken} · spent ${self.spent:.4f}, ${self.budget - self.spent:.4f} left")

    def __call__(self, conversation: Conversation) -> None:
        card = conversation.scorecard
        self.done += 1
        self.reached += bool(card.goal_reached)
        self.findings += any(f.cls in ("dead_end", "loop", "refused_offer", "not_understood", "unanswered")
                             for f in card.findings)
        self.broken += any(c.status == "fired" for name, c in card.checks.items()
                           if name in ("wrong_record", "stale_click", "phantom_receipt", "card_not_actionable",
                                       "refusal_with_hedge", "audit_gap", "integrity_leak"))
        self.spent += Decimal(str(conversation.cost_usd))
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done, status=self.status())
        elif time.monotonic() - self.last_line >= PLAIN_EVERY_S or self.done == self.total:
            self.last_line = time.monotonic()
            self.console.print(f"[{self.done}/{self.total}] {self.status()}", highlight=False, soft_wrap=True)
