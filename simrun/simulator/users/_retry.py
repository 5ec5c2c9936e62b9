"""The one owner of retries for model calls: tenacity, with the SDKs' own retries turned off.

Retried: 429 (waiting what Retry-After asks, up to a cap), 5xx, timeouts, broken
connections and malformed bodies. Never retried: any other 4xx (a bad key, a bad request), which no
retry can fix, nor a 5xx whose message says the request itself is invalid (llama.cpp's server
answers 500 "Input should be 'text' or 'json_object'" to a response_format it does not know).
Every attempt, the first included, runs inside tenacity. Classified: simrun's own errors from its
light path (simulator/users/_wire.py) and the SDKs' documented exception types, as each raised
them. One failure is one request; when the attempts run out the conversation ends as
`provider_error`, and the run goes on.
"""

from __future__ import annotations

import asyncio
import random
import re
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from simrun import _secrets as secrets
from simrun._errors import BudgetCut, ProviderFailure
from simrun.simulator.users._providers import MalformedResponse
from simrun.simulator.users._wire import ModelAPIError, ModelStatusError

if TYPE_CHECKING:
    import anthropic
    import openai

    # An error for an answer with an HTTP status (`status_code`, `body`, and `headers` or `response`).
    StatusError = ModelStatusError | openai.APIStatusError | anthropic.APIStatusError

T = TypeVar("T")


def _errors() -> tuple[tuple[type[BaseException], ...], tuple[type[StatusError], ...]]:
    """The errors a model call raises: (transient ones, ones with an HTTP status). simrun's own,
    from its light path (simulator/users/_wire.py), and the SDKs' documented types, of the SDKs this
    process has imported. An SDK that was never imported raised nothing, so it is not imported
    here: a llama.cpp server's first refused form used to import both SDKs, which took seconds."""
    # simrun's own: any but a status error is a timeout, a broken connection or an answer
    # past the bound (a status error is told by its status, below).
    transient: list[type[BaseException]] = [MalformedResponse, ModelAPIError]
    status: list[type[StatusError]] = [ModelStatusError]
    for name in ("openai", "anthropic"):
        sdk = sys.modules.get(name)
        if sdk is not None:
            # A body that is not the JSON the API documents is a broken reply, as likely
            # transient as a 5xx.
            transient += [sdk.APITimeoutError, sdk.APIConnectionError, sdk.APIResponseValidationError]
            status.append(sdk.APIStatusError)
    return tuple(transient), tuple(status)

# A server error that blames the request (a validation message) is the request's fault: the same
# request fails the same way however often it is sent.
REQUEST_BLAMED = re.compile(r"input should be|validation error|is not supported|unsupported|not permitted|"
                            r"unrecognized|unknown (field|parameter|argument)|invalid (request|value|type|"
                            r"response_format|json)|field required|extra (inputs|fields)", re.I)


def server_message(exc: BaseException) -> str:
    """What the server said, on one line: the error body's message (else the exception's text),
    without the Python traceback some servers append, whitespace runs made single spaces."""
    body = getattr(exc, "body", None)
    text = str(exc)
    if isinstance(body, dict):
        error = body.get("error")
        inner = error if isinstance(error, dict) else body
        text = next((str(inner[key]) for key in ("message", "detail", "error")
                     if isinstance(inner.get(key), (str, list))), text)
    text = re.split(r'\n\s*(?:Traceback \(most recent call last\)|File ")', text, maxsplit=1)[0]
    return secrets.cut(" ".join(text.split()), 300)


def should_retry(exc: BaseException) -> bool:
    transient, status = _errors()
    if isinstance(exc, status):     # first: simrun's status error is one of its ModelAPIError too
        if exc.status_code >= 500 and REQUEST_BLAMED.search(server_message(exc)):
            return False
        return exc.status_code == 429 or exc.status_code >= 500
    return isinstance(exc, transient)


def retry_after(exc: BaseException) -> float | None:
    """What the answer's Retry-After asks, in seconds: simrun's error holds the headers, an SDK's
    its response."""
    response = getattr(exc, "response", None)
    headers = getattr(exc, "headers", None) if response is None else response.headers
    value = headers.get("retry-after") if headers is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


@dataclass
class RetryPolicy:
    attempts: int = 5
    base_wait_s: float = 0.5
    max_wait_s: float = 60.0
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep   # tests pass one that only records
    waits: list[float] = field(default_factory=list)
    # tenacity's controllers of this policy that no call holds now (`_retrying`).
    _idle: list[AsyncRetrying] = field(default_factory=list, init=False, repr=False, compare=False)

    def delay(self, exc: BaseException | None, attempt: int) -> float:
        """How long to wait after failed attempt number `attempt`: what Retry-After asks (capped),
        else an exponential backoff with jitter."""
        asked = retry_after(exc) if exc is not None else None
        if asked is not None:
            delay = min(asked, self.max_wait_s)
        else:
            delay = min(self.max_wait_s, self.base_wait_s * 2 ** (attempt - 1))
            delay *= 0.5 + random.random() / 2   # jitter, so concurrent conversations spread out
        self.waits.append(delay)
        return delay

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """`fn`, attempted up to `attempts` times by tenacity: each retry waits `delay`. Every
        attempt is tenacity's, the first too (issue 43: one owner of retries)."""
        retrying = self._idle.pop() if self._idle else self._retrying()
        try:
            async for attempt in retrying:
                with attempt:
                    result = await fn()
                    break   # (the attempt recorded as tenacity's on the way out; no round more)
            else:
                raise AssertionError("unreachable: tenacity ends only with an answer or an error")  # pragma: no cover
        except BudgetCut:
            raise   # the budget, not the provider, ended it (a retry could not be held)
        except Exception as exc:
            raise self._failure(exc) from None
        # Kept for a next call only after a success: a failure's state holds its exception and
        # traceback, not to be kept alive until a next call replaces it.
        self._idle.append(retrying)
        return result

    def _retrying(self) -> AsyncRetrying:
        """A tenacity controller of this policy, for one call at a time. One made per call cost
        the harness a tenth of a millisecond per model call at a fast model (issue 48): tenacity
        keeps a call's state in a reference cycle with its controller (about 34 objects), which
        only the cyclic garbage collector frees, and whose collections traverse the live heap.
        Iterating one again starts it afresh (its state, statistics and attempt count are
        reset), and the call that reuses it replaces the state of the one before, so reused
        controllers leave no cyclic garbage; `call` holds one for each call in flight."""
        return AsyncRetrying(stop=stop_after_attempt(self.attempts), wait=self._wait,
                             retry=retry_if_exception(should_retry), sleep=self.sleep, reraise=True)

    def _wait(self, state: RetryCallState) -> float:
        return self.delay(state.outcome.exception() if state.outcome else None, state.attempt_number)

    def _failure(self, exc: BaseException) -> ProviderFailure:
        status = getattr(exc, "status_code", None)
        text = str(exc)
        cause = exc.__cause__
        if cause is not None and str(cause) and str(cause) not in text:
            # The SDKs say "Connection error." and keep what happened as the cause (a refused
            # connection, an answer past the size bound): the user needs the cause.
            text += f" ({type(cause).__name__}: {cause})"
        return ProviderFailure(
            "retries_exhausted" if should_retry(exc) else "refused",
            f"{type(exc).__name__}: {secrets.cut(text, 300)}", status=status, server_message=server_message(exc),
            attempts=self.attempts if should_retry(exc) else 1)
