"""Run ids: made in one place, and checked against one strict pattern wherever they come from.

A run id becomes a file name (`reports/<run>.html`) and a key in every table. An id read from a
DuckDB file, a baseline or a bundle may have been crafted; one that does not match the pattern
is refused before it names a file, so it cannot climb out of the reports folder.

What makes two attempts one run (`identifying`) is said here too: a run resumed, or one of its
shards, is the same run as long as these settings are the same.
"""

from __future__ import annotations

import datetime as dt
import re
import secrets
from collections.abc import Mapping
from typing import Any

from simrun import _secrets
from simrun._errors import StoreError

# r20261130-013451-d29928; imported and merged runs use the same form.
RUN_ID = re.compile(r"r\d{8}-\d{6}-[0-9a-f]{6}")
# What may change between attempts at one run: a run resumed with more budget, or more workers
# (or a shard run with other concurrency than its siblings), is still the same run.
NOT_IDENTIFYING = ("budget_usd", "concurrency")


def new_run_id() -> str:
    return dt.datetime.now(dt.UTC).strftime("r%Y%m%d-%H%M%S-") + secrets.token_hex(3)


def identifying(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """A run's stored settings (`runs.config`) without those that may change between attempts
    at it: what makes it the same run."""
    return {k: v for k, v in (config or {}).items() if k not in NOT_IDENTIFYING}


def checked_run_id(run_id: object, where: str = "the database") -> str:
    """`run_id` if it has the form simrun writes, else a StoreError naming where it came from."""
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        shown = _secrets.cut(repr(run_id), 60)
        raise StoreError(f"{where} holds a run id {shown} that simrun did not write (expected the form "
                         "r20261130-013451-d29928); refusing to use it as a file name")
    return run_id
