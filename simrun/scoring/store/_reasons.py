"""Why classes were UNVERIFIABLE: the reasons the checks gave, as `simrun show` and the report
print them ("the runtime gives no offers as data")."""

from __future__ import annotations

from typing import Any


def unverifiable_reasons(store: Any, run_id: str, conversation: str | None = None) -> dict[str, list[tuple[str, int]]]:
    """Class -> [(reason, conversations)], commonest first, over every conversation of the run
    (or over one)."""
    where = "AND k.conversation_id = ?" if conversation is not None else ""
    rows = store.con.execute(f"""
        SELECT k.class, coalesce(k.reason, 'no reason recorded (scored by an older simrun)'), count(*)
        FROM checks k
        WHERE k.run_id = ? AND k.status = 'unverifiable' {where}
        GROUP BY 1, 2 ORDER BY 1, 3 DESC, 2""", [run_id, *([conversation] if conversation is not None else [])]
    ).fetchall()
    found: dict[str, list[tuple[str, int]]] = {}
    for cls, reason, n in rows:
        found.setdefault(cls, []).append((reason, n))
    return found
