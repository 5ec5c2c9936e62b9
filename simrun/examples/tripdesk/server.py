"""TripDesk over HTTP (Starlette on uvicorn): `python -m simrun.examples.tripdesk.server --port 8765`."""

from __future__ import annotations

import json
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from simrun.examples.tripdesk.runtime import TripDesk
from simrun.examples.tripdesk.wire import arguments, dispatch


def create_app(desk: TripDesk | None = None) -> Starlette:
    desk = desk or TripDesk()

    async def body_of(request: Request) -> Any:
        raw = await request.body()
        return json.loads(raw) if raw else None

    def answer(op: str, session: str | None = None, body: Any = None) -> JSONResponse:
        status, payload = dispatch(desk, op, session, body)
        return JSONResponse(payload, status_code=status)

    async def health(request: Request) -> JSONResponse:
        return answer("health")

    async def start(request: Request) -> JSONResponse:
        try:
            return answer("start", body=await body_of(request))
        except ValueError:
            return JSONResponse({"error": "the body is not JSON"}, status_code=400)

    async def turn(request: Request) -> JSONResponse:
        try:
            return answer("turn", request.path_params["session"], await body_of(request))
        except ValueError:
            return JSONResponse({"error": "the body is not JSON"}, status_code=400)

    async def session_op(request: Request) -> JSONResponse:
        op = {"GET": request.url.path.rsplit("/", 1)[-1], "DELETE": "close"}[request.method]
        return answer(op, request.path_params["session"])

    app = Starlette(routes=[
        Route("/v1/health", health, methods=["GET"]),
        Route("/v1/sessions", start, methods=["POST"]),
        Route("/v1/sessions/{session}/turns", turn, methods=["POST"]),
        Route("/v1/sessions/{session}/state", session_op, methods=["GET"]),
        Route("/v1/sessions/{session}/audit", session_op, methods=["GET"]),
        Route("/v1/sessions/{session}", session_op, methods=["DELETE"]),
    ])
    app.state.desk = desk
    return app


def main() -> None:
    import uvicorn

    parser = arguments("Serve the TripDesk reference runtime over HTTP (protocol 1).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    desk = TripDesk(faults=args.faults, fault_seed=args.fault_seed, snapshot=args.snapshot)
    uvicorn.run(create_app(desk), host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
