"""The words simrun shows its records in, for any surface that shows them: the command line, a
team's own bot or page. Records inside, words at the edges: a verdict, a gate, a run is a typed
value (`simrun.RunVerdict`, `simrun.GateResult`, ...), and these make its text, the same on
every surface.

    usd, pct                    an amount of money, a rate
    duration                    a time to wait, as people say it: 40 s, 12 min, 2 h 5 min
    rate_bounds_shown,          a rate with many conversations left UNVERIFIABLE: whether its
    rate_bounds                 bounds lead, and the bounds as words
    gate_columns, gate_rows     the gate's table (one row per class), as every surface shows it
    gate_left_out, gate_sharing what the gate did not compare, and the new and removed cells
    gate_moved, gate_flips,     the cells whose rate rose most (descriptive), the conversations
    gate_flip_summary           that flipped, and the line over them
    gate_method                 how the gate tested, in one paragraph
    round_line                  one look of the sequential gate
    short_commit                a recorded commit, shortened, keeping its `-dirty` mark
    error_evidence              a runtime_error's evidence: a line of facts, and blocks of text
    database_reason             why a database could not be read, in one line (DuckDB's words,
                                cut before anything they quote)

Text from outside (a runtime's reply, a span, a file) is shown through simrun's one way out:
`redact` cuts every secret simrun knows of, `cut` does that and then clips, `escaped` shows
terminal control, bidi and zero-width characters as escapes, `one_line` makes a short identity
one line, and `CommandGuard` (`without_commands` for one piece) keeps a CI runner from reading
any line as a workflow command (`::add-mask::`).
"""

from __future__ import annotations

from simrun._commits import short_commit
from simrun._money import usd
from simrun._secrets import cut, redact
from simrun._transcript import error_evidence
from simrun._untrusted_text import CommandGuard, escaped, one_line, without_commands
from simrun.scoring.gate import pct, round_line
from simrun.scoring.gate import text as _gate
from simrun.scoring.store import rates as _rates
from simrun.scoring.store import reason as database_reason
from simrun.simulator import duration

gate_columns = _gate.columns
gate_rows = _gate.rows
gate_left_out = _gate.subset_text
gate_sharing = _gate.sharing_lines
gate_moved = _gate.moved_lines
gate_flips = _gate.flip_lines
gate_flip_summary = _gate.flip_summary
gate_method = _gate.method_text
rate_bounds_shown = _rates.bounds_shown
rate_bounds = _rates.bounds_text

__all__ = [
    "CommandGuard",
    "cut",
    "database_reason",
    "duration",
    "error_evidence",
    "escaped",
    "gate_columns",
    "gate_flip_summary",
    "gate_flips",
    "gate_left_out",
    "gate_method",
    "gate_moved",
    "gate_rows",
    "gate_sharing",
    "one_line",
    "pct",
    "rate_bounds",
    "rate_bounds_shown",
    "redact",
    "round_line",
    "short_commit",
    "usd",
    "without_commands",
]
