"""The runner: the persona x goal x repetition matrix, run with bounded concurrency.

Workers pull cells from one iterator (memory does not grow with the matrix), and one writer
stores each finished conversation in its own transaction. The run row is written only after
every input has been validated: bad input never leaves a run behind.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal

from scoring.scorer import SCORER_VERSION
from scoring.store import Store
from simulator import __version__
from simulator.adapters.base import RuntimeAdapter
from simulator.conversation import Cell, Conversation, converse
from simulator.dataset import Dataset
from simulator.ledger import Ledger
from simulator.users.base import UserBackend


def cell_seed(run_seed: int, persona: str, goal: str, repetition: int) -> int:
    """Each cell's own seed: stable across runs, machines and matrix order."""
    digest = hashlib.sha256(f"{run_seed}:{persona}:{goal}:{repetition}".encode()).hexdigest()
    return int(digest[:8], 16)


def matrix(dataset: Dataset, repetitions: int, seed: int) -> Iterator[Cell]:
    # Repetition outermost, so that a run cut short holds a balanced sample of every cell.
    for repetition in range(repetitions):
        for persona in dataset.personas:
            for goal in dataset.goals:
                yield Cell(persona, goal, repetition, cell_seed(seed, persona.id, goal.id, repetition))


def new_run_id() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("r%Y%m%d-%H%M%S-") + secrets.token_hex(3)


@dataclass(frozen=True)
class RunResult:
    run_id: str
    conversations: int
    spent_usd: Decimal
    budget_usd: Decimal
    planned: int = 0
    budget_stopped: bool = False     # the budget ran out before the matrix did


async def run_matrix(dataset: Dataset, runtime: RuntimeAdapter, user: UserBackend, store: Store, *,
                     repetitions: int, seed: int, budget: Decimal, concurrency: int = 8,
                     config: dict | None = None, run_id: str | None = None, ledger: Ledger | None = None,
                     on_conversation: Callable[[Conversation], None] | None = None) -> RunResult:
    """Run every cell once (or until the budget is spent), store it, and return the run's spend.

    `ledger` is the one a paid user backend reserves against; once it refuses a call, no new
    conversation starts, and those in flight end as budget_cut.
    """
    await runtime.health()
    run_id = run_id or new_run_id()
    ledger = ledger or Ledger(budget)
    store.create_run(run_id, config=config or {}, dataset_hash=dataset.hash, dataset=dataset.item_hashes,
                     scorer_version=SCORER_VERSION, simrun_version=__version__, user_backend=user.name,
                     runtime=runtime.description, seed=seed, repetitions=repetitions, budget_usd=budget)
    cells = matrix(dataset, repetitions, seed)
    done = 0
    status = "interrupted"

    async def worker() -> None:
        nonlocal done
        for cell in cells:
            if ledger.exhausted:
                return
            conversation = await converse(cell, user, runtime)
            store.record(run_id, cell.id, conversation.transcript, conversation.scorecard,
                         started_at=conversation.started_at, duration_s=conversation.duration_s,
                         cost_usd=conversation.cost_usd, model_calls=conversation.model_calls)
            done += 1
            if on_conversation is not None:
                on_conversation(conversation)

    try:
        await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
        status = "finished"
    finally:
        store.finish_run(run_id, status=status, spent_usd=ledger.spent,
                         planned=len(dataset.personas) * len(dataset.goals) * repetitions)
        await runtime.aclose()
    return RunResult(run_id, done, ledger.spent, budget, planned=len(dataset.personas) * len(dataset.goals)
                     * repetitions, budget_stopped=ledger.exhausted)
