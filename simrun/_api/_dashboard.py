"""The dashboard of every run in one or more databases, and in a history: `simrun dashboard`."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path

from simrun._errors import ConfigError
from simrun.scoring.gate import load_baseline
from simrun.scoring.pages import build_dashboard
from simrun.scoring.store import Store, history_store, reading
from simrun.simulator import (
    load_project_file,
    project_baseline,
    project_budgets,
    project_db,
    project_file,
    project_reports,
)


def dashboard(db: str | Path | Sequence[str | Path] | None = None, *, history: str | Path | None = None,
              out: str | Path | None = None, baseline: str | Path | None = None,
              budgets: str | Path | None = None, config: str | Path | None = None) -> Path:
    """Write the dashboard of every run in the databases `db` (one, or several: one per release,
    or per CI job; read-only, never merged; default: the project's) and in the `history` (a
    folder, or an object-store URL; with no `db`, only its runs) to `out` (default: index.html
    in the project's reports folder). Every run is judged against `baseline` (a blessed file;
    default: gate.baseline of simrun.toml), under `budgets`' release criteria if given, else
    those it ran with. Returns the page."""
    if db:
        paths = [db] if isinstance(db, (str, Path)) else list(db)
    else:
        paths = [] if history else [project_db(None, config)]
    target = Path(out) if out else project_reports(config) / "index.html"
    if target.is_dir():
        raise ConfigError(f"{target} is a folder; name the page to write, e.g. {target / 'index.html'}", field="out")
    base = load_baseline(baseline) if baseline else project_baseline(load_project_file(config), project_file(config))
    money = project_budgets(budgets)
    with contextlib.ExitStack() as stack:
        stores: list[Store] = [stack.enter_context(reading(path)) for path in paths]
        if history:
            stores.append(stack.enter_context(history_store(str(history))))
        return build_dashboard(stores, target, baseline=base, gate_settings=money.gate,
                               release=money.release if budgets else None, fallback=money.release)
