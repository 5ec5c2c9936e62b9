"""TripDesk over stdio: one JSON request per line in, one JSON reply per line out.

    python -m simrun.examples.tripdesk.stdio [--faults loop=0.2]

Request `{"id": 1, "op": "turn", "session": "s-1", "body": {"message": "..."}}`, reply
`{"id": 1, "result": {...}}` or `{"id": 1, "error": {"status": 404, "message": "..."}}`.
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

from simrun.examples.tripdesk.runtime import TripDesk
from simrun.examples.tripdesk.wire import arguments, dispatch


def serve(desk: TripDesk, stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout) -> None:
    for line in stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            rid, op = request.get("id"), request.get("op")
        except (ValueError, AttributeError):
            stdout.write(json.dumps({"id": None, "error": {"status": 400, "message": "not a JSON object"}}) + "\n")
            stdout.flush()
            continue
        status, body = dispatch(desk, op, request.get("session"), request.get("body"))
        reply = {"id": rid, "result": body} if status == 200 else \
            {"id": rid, "error": {"status": status, "message": body.get("error")}}
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()


def main() -> None:
    args = arguments("Serve the TripDesk reference runtime over stdio (protocol 1).").parse_args()
    serve(TripDesk(faults=args.faults, fault_seed=args.fault_seed, snapshot=args.snapshot))


if __name__ == "__main__":
    main()
