"""TripDesk's protocol operations as (status, JSON body), shared by its HTTP server and stdio loop.

Both transports carry exactly what the python transport returns, so the same seeded run gives
the same transcript over all three.
"""

from __future__ import annotations

import argparse
from typing import Any

from simrun.examples.tripdesk.domain import SetupError
from simrun.examples.tripdesk.runtime import TripDesk

OPS = ("health", "start", "turn", "state", "audit", "close")


def dispatch(desk: TripDesk, op: str, session: str | None = None, body: Any = None) -> tuple[int, Any]:
    try:
        if op == "health":
            return 200, desk.health()
        if op == "start":
            return 200, desk.start(body if isinstance(body, dict) else {})
        if op not in OPS:
            return 400, {"error": f"unknown op {op!r}; ops are {', '.join(OPS)}"}
        method = getattr(desk, op)
        if op == "turn":
            if not isinstance(body, dict) or not ({"message", "action"} & set(body)):
                return 400, {"error": "a turn is {\"message\": ...} or {\"action\": {\"offer\": ...}}"}
            return 200, method(session, body)
        return 200, method(session)
    except KeyError as exc:
        return 404, {"error": str(exc).strip("'\"")}
    except SetupError as exc:
        return 400, {"error": f"bad setup: {exc}"}
    except Exception as exc:  # the runtime failed: say so, as a server would with a 500
        return 500, {"error": f"{type(exc).__name__}: {exc}"}


def arguments(description: str) -> argparse.ArgumentParser:
    """The command-line options both ways of serving TripDesk share."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--faults", default=None, help="named faults, e.g. loop=0.2,crash=0.05")
    parser.add_argument("--fault-seed", type=int, default=0)
    parser.add_argument("--no-snapshot", dest="snapshot", action="store_false",
                        help="answer start and each turn without the store, and close without the audit "
                             "(simrun then asks for them)")
    return parser
