"""The `simrun` command: a thin shell over the Python API (`simrun`'s exports).

`app` is the command; each module beside this one registers the commands of one concern on it:
`run` (plain `simrun`, `run`, `resume`), `start` (init, demo), `check_user`, `runs` (runs,
report, dashboard, show, merge), `project` (validate, check-runtime, plan, schema) and `gate`
(baseline, gate, rescore, export, import). `main` is the console script.

Exit status, for every command: 0 on success, 1 when a run failed (a guarantee broken, a release
criterion or the gate failed), 2 on a user error, printed as one line with no traceback.
"""

from __future__ import annotations

import duckdb
import typer

from simrun import text
from simrun.cli import _check_user as check_user
from simrun.cli import _gate as gate
from simrun.cli import _project as project
from simrun.cli import _run as run
from simrun.cli import _runs as runs
from simrun.cli import _start as start
from simrun.cli._common import err_line

app = typer.Typer(add_completion=False, no_args_is_help=False, rich_markup_mode=None,
                  pretty_exceptions_show_locals=False,
                  help="Evaluate a conversational runtime with simulated users, and gate releases on the rates.")

# The order of registration is the order `simrun --help` lists the commands in.
run.register(app)
start.register(app)
check_user.register(app)
runs.register(app)
project.register(app)
gate.register(app)


def main() -> None:
    try:
        app()
    except OSError as exc:
        # A file the command had to read or write (a folder it may not write to, a full disk):
        # the user's to fix, so one line, not a traceback. Exit 1 stays "a guarantee broke".
        where = f"{exc.filename}: " if exc.filename else ""
        err_line(f"error: {where}{exc.strerror or exc}")
        raise SystemExit(2) from None
    except duckdb.Error as exc:
        err_line(f"error: the database could not be read: {text.database_reason(exc)}")
        raise SystemExit(2) from None
