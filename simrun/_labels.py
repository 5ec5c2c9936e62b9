"""The names a run carries (a release, a branch): the one rule they are held to, wherever they come from.

`run.labels` of simrun.toml (`simrun._settings`) and `--label` (`simrun.simulator._identity`)
are checked by `clean_labels` here, once for both: plain one-line text, bounded, repeats dropped.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

from simrun import _secrets

LABEL_CHARS = 100
MAX_LABELS = 20


def clean_labels(labels: Iterable[str]) -> tuple[str, ...]:
    """Labels as stored: each trimmed, one line of at most LABEL_CHARS characters, repeats
    dropped, in the order given; a ValueError says what is wrong with the first bad one."""
    out: list[str] = []
    for text in labels:
        label = text.strip()
        if not label:
            raise ValueError("a label cannot be empty")
        if len(label) > LABEL_CHARS:
            raise ValueError(f"the label {_secrets.cut(label, 30)!r}... is longer than {LABEL_CHARS} characters")
        if any(unicodedata.category(ch) == "Cc" for ch in label):
            raise ValueError(f"the label {_secrets.cut(label, 30)!r} holds a control character (a newline, a tab...)")
        if label not in out:
            out.append(label)
    if len(out) > MAX_LABELS:
        raise ValueError(f"{len(out)} labels given; a run takes at most {MAX_LABELS}")
    return tuple(out)
