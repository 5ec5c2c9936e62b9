"""The transports with no protocol code, one by one: a function (sync or async), any JSON
endpoint through a body template, an OpenAI-compatible endpoint; what simrun sends each turn,
how it reads the reply, and each way a turn fails as a runtime fault with its evidence."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web
from opentelemetry import trace

from simrun._errors import ConfigError, RuntimeFault
from simrun._settings import load_project
from simrun.scoring.dataset._models import Step
from simrun.simulator.adapters._callable import CallableRuntime
from simrun.simulator.adapters._template import ChatRuntime, TemplateRuntime, fill, pointer
from simrun.simulator.users._scripted import asked_by_name

SEEN: list[tuple[list, dict, str | None]] = []   # what the functions below were given


def sync_agent(messages, session):
    """A plain function: the reply's text. It notes the trace it ran in (from the current context)."""
    context = trace.get_current_span().get_span_context()
    SEEN.append((messages, session, f"{context.trace_id:032x}" if context.is_valid else None))
    return f"You said {messages[-1]['content']!r}."


async def async_agent(messages, session):
    context = trace.get_current_span().get_span_context()
    SEEN.append((messages, session, f"{context.trace_id:032x}" if context.is_valid else None))
    return {"reply": "Which date?", "understood": True, "ask": {"operation": "rebook", "arguments": ["date"]}}


def odd_agent(messages, session):
    if messages[-1]["content"] == "raise":
        raise ValueError("the agent broke")
    return 42 if messages[-1]["content"] == "number" else {"text": "no reply field"}


def converse(runtime, *messages):
    async def go():
        await runtime.health()
        session = await runtime.start({"seed": 3, "persona": "p", "goal": "g", "setup": {"x": 1}})
        results = []
        for text in messages:
            try:
                results.append(await runtime.turn(session, {"message": text}))
            except RuntimeFault as fault:
                results.append(fault)
        state = await runtime.state(session)
        await runtime.close(session)
        await runtime.aclose()
        return results, state

    return asyncio.run(go())


@pytest.mark.parametrize("function", ["sync_agent", "async_agent"])
def test_a_function_gets_the_conversation_so_far_and_runs_in_the_turns_trace(function):
    SEEN.clear()
    runtime = CallableRuntime(f"{__name__}:{function}", traces=True, trace_wait_s=0)
    results, state = converse(runtime, "hello", "again")
    assert all(isinstance(r, dict) and isinstance(r["reply"], str) for r in results)
    (first, s1, trace1), (second, s2, trace2) = SEEN
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert second[0]["content"] == "hello" and second[1]["content"] == results[0]["reply"]
    assert (s1["turn"], s2["turn"], s1["seed"], s1["setup"]) == (1, 2, 3, {"x": 1}) and s1["id"] == s2["id"]
    # Each turn its own trace, and the function ran inside it.
    assert trace1 == s1["traceparent"].split("-")[1] and trace2 == s2["traceparent"].split("-")[1] != trace1
    # These functions make no span: with no span of the conversation heard, its tool events are
    # unknown (UNVERIFIABLE), not none, and the store says why.
    assert list(state) == ["events_unknown"] and "no span of this conversation arrived" in state["events_unknown"]
    if function == "async_agent":
        assert results[0]["ask"]["arguments"] == ["date"]    # protocol fields, as the function gave them


def test_a_function_that_raises_or_answers_oddly_is_a_runtime_fault_with_evidence():
    runtime = CallableRuntime(f"{__name__}:odd_agent")
    results, state = converse(runtime, "raise", "number", "shape")
    crash, number, shape = results
    assert crash.kind == "crash" and "ValueError: the agent broke" in str(crash)
    assert "odd_agent" in crash.evidence["traceback"]
    assert number.kind == "malformed" and "int" in str(number)
    assert shape.kind == "missing_reply"
    assert state is None           # no traces, no state hook: no store at all


def graph_agent(messages, session):
    """An agent whose answer has a `state` of its own (a graph's state), nothing like a store."""
    return {"reply": "Done.", "state": {"step": 3, "records": "not protocol 1's"}}


def test_an_assistant_s_own_state_field_is_kept_as_it_gave_it_never_taken_for_the_store(demo):
    """Protocol 1's optional `state` (the store sent with a turn) is for runtimes that keep one:
    an assistant whose store simrun builds may answer with a field of that name for its own ends,
    which is neither checked as a store nor used as one."""
    from simrun.simulator._conversation import Cell
    from simrun.simulator._conversation import converse as loop
    from simrun.simulator.users._scripted import ScriptedUser

    results, state = converse(CallableRuntime(f"{__name__}:graph_agent"), "hello")
    assert results[0]["state"] == {"step": 3, "records": "not protocol 1's"} and state is None
    cell = Cell(demo.persona("plain-paula"), demo.goal("single-add-bag"), 0, 5)
    c = asyncio.run(loop(cell, ScriptedUser(), CallableRuntime(f"{__name__}:graph_agent")))
    assert c.transcript.end != "runtime_error" and c.transcript.turns[0].state is None
    assert c.transcript.turns[0].result["state"]["step"] == 3


def serve_endpoint(answer):
    """An endpoint that answers each POST with `answer(body)` (a web.Response) and notes the request."""
    requests = []

    async def handle(request):
        body = await request.json()
        requests.append((body, dict(request.headers)))
        return answer(body)

    app = web.Application()
    app.router.add_post("/chat", handle)
    app.router.add_post("/v1/chat/completions", handle)
    return app, requests


def with_endpoint(answer, make, *messages):
    app, requests = serve_endpoint(answer)

    async def go():
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        try:
            runtime = make(f"http://127.0.0.1:{port}")
            return await asyncio.to_thread(converse, runtime, *messages)
        finally:
            await runner.cleanup()

    results, state = asyncio.run(go())
    return results, requests


def test_a_body_template_is_filled_each_turn_and_the_reply_read_at_its_pointer():
    answer = lambda body: web.json_response({"out": {"a/b": [{"text": f"got {body['q']}"}]}})  # noqa: E731
    results, requests = with_endpoint(answer, lambda url: TemplateRuntime(
        url=url + "/chat", body={"q": "{message}", "history": "{messages}", "meta": {"sid": "s={session}"}},
        reply="/out/a~1b/0/text", headers={"X-Key": "k"}, traces=True, trace_wait_s=0), "one", "two")
    assert [r["reply"] for r in results] == ["got one", "got two"]
    body, headers = requests[1]
    assert body["q"] == "two" and [m["content"] for m in body["history"]] == ["one", "got one", "two"]
    assert body["meta"]["sid"] == "s=" + headers["X-Simrun-Session"] and headers["X-Key"] == "k"
    assert headers["traceparent"].startswith("00-") and headers["traceparent"] != requests[0][1]["traceparent"]


@pytest.mark.parametrize("answer, kind", [
    (lambda body: web.json_response({"out": {}}), "missing_reply"),
    (lambda body: web.json_response({"out": {"a/b": [{"text": 7}]}}), "missing_reply"),
    (lambda body: web.Response(status=503, text="down"), "http_status"),
    (lambda body: web.Response(text="<html>"), "malformed"),
    (lambda body: web.Response(body=b'{"x": "' + b"y" * 5000 + b'"}'), "too_large")])
def test_each_way_a_template_turn_fails_is_a_fault_of_its_kind(answer, kind):
    results, _ = with_endpoint(answer, lambda url: TemplateRuntime(
        url=url + "/chat", body={"q": "{message}"}, reply="/out/a~1b/0/text", max_result_bytes=1024), "hi")
    assert isinstance(results[0], RuntimeFault) and results[0].kind == kind, results


def test_a_chat_answer_that_asks_its_caller_to_run_tools_is_a_fault_that_names_them():
    answer = lambda body: web.json_response({"choices": [{"index": 0, "message": {  # noqa: E731
        "role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "reschedule", "arguments": "{}"}}]}}]})
    results, _ = with_endpoint(answer, lambda url: ChatRuntime(url=url + "/v1", model="m"), "hi")
    assert isinstance(results[0], RuntimeFault) and results[0].kind == "missing_reply"
    assert "asks its caller to run tools (reschedule)" in str(results[0])
    assert "reschedule" in results[0].evidence["body"]


def test_an_openai_compatible_endpoint_gets_the_model_and_every_message():
    answer = lambda body: web.json_response(  # noqa: E731
        {"choices": [{"index": 0, "message": {"role": "assistant", "content": f"{len(body['messages'])} so far"}}]})
    results, requests = with_endpoint(answer, lambda url: ChatRuntime(url=url + "/v1", model="m-1"), "a", "b")
    assert [r["reply"] for r in results] == ["1 so far", "3 so far"]
    assert requests[1][0] == {"model": "m-1", "messages": [{"role": "user", "content": "a"},
                                                           {"role": "assistant", "content": "1 so far"},
                                                           {"role": "user", "content": "b"}]}
    assert "traceparent" not in requests[0][1]    # no traces asked for: no trace context sent


def test_fill_and_pointer_follow_their_rules():
    messages = [{"role": "user", "content": "hi"}]
    assert fill({"a": ["{messages}", "x {message} {session}"], "n": 3}, "hi", messages, "s") == \
        {"a": [messages, "x hi s"], "n": 3}
    assert pointer({"a": [{"~b": 1}]}, "/a/0/~0b") == 1 and pointer({"": 2}, "/") == 2
    for bad in ("/a/1", "/a/x", "/z"):
        with pytest.raises(KeyError):
            pointer({"a": [0]}, bad)


@pytest.mark.parametrize("runtime, says", [
    ('transport = "chat"\nurl = "http://h/v1"\n', "needs model"),
    ('transport = "template"\nurl = "http://h"\nreply = "/x"\n', "needs body"),
    ('transport = "template"\nurl = "http://h"\nreply = "x"\nbody = {q = "{message}"}\n', "not a JSON pointer"),
    ('transport = "chat"\nmodel = "m"\n', "needs url"),
    ('transport = "python"\n[runtime.tools.rebook]\nrecord = "trip_id"\n', "for the callable, chat, template"),
    ('transport = "callable"\n[runtime.tools.rebook]\nrecrd = "trip_id"\n', "unknown setting 'recrd'")])
def test_bad_foreign_runtime_settings_are_refused_with_their_field(tmp_path, runtime, says):
    path = tmp_path / "simrun.toml"
    path.write_text("[runtime]\n" + runtime)
    with pytest.raises(ConfigError) as info:
        load_project(path)
    assert says in str(info.value) and info.value.path == str(path) and info.value.line is not None


def test_the_scripted_user_hears_an_argument_asked_for_by_name():
    step = Step(operation="rebook", arguments={"date": "1", "new_seat": "2", "count": 3}, say=("x",),
                answers={"date": ("{date}",), "new_seat": ("{new_seat}",)})
    assert asked_by_name("Which date would you like?", step) == ["date"]
    assert asked_by_name("Which DATES and which new seat?", step) == ["date", "new_seat"]
    assert asked_by_name("I changed the date.", step) == []              # no question put
    assert asked_by_name("How many, what count?", step) == []             # no `answers` for count
    assert asked_by_name("Update the mandate?", step) == []               # a word, not a part of one


def test_check_runtime_says_when_an_assistant_sends_no_span():
    from simrun.simulator._conformance import check_runtime

    report = asyncio.run(check_runtime(CallableRuntime(f"{__name__}:sync_agent", traces=True, trace_wait_s=0)))
    assert report.traces is not None and report.traces["spans"] == 0
    assert report.level() == 0 and "wrong_record" in report.unverifiable()    # no span: no events


async def against_raw_server(handle, scenario):
    """`scenario(runtime)` with a ChatRuntime pointed at a bare asyncio server running `handle`."""
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    runtime = ChatRuntime(url=f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", model="m")
    try:
        return await scenario(runtime)
    finally:
        await runtime.aclose()
        server.close()


def test_a_connection_the_server_may_have_closed_as_idle_is_never_used_again():
    """A server closes a kept-alive connection when its idle timeout ends; a request sent on it
    at that moment is dropped unanswered, and would read as the runtime's fault. The server here
    makes that moment certain: a request that arrives on a connection idle for IDLE_S or more is
    dropped, as by a server whose timeout is IDLE_S (gunicorn's is 2 s, uvicorn's 5 s)."""
    from simrun.simulator.adapters._base import KEEPALIVE_S

    idle_s = KEEPALIVE_S + 0.3
    dropped: list[float] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        last = asyncio.get_running_loop().time()
        while head := await reader.readuntil(b"\r\n\r\n"):
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            body = json.loads(await reader.readexactly(length))
            idle = asyncio.get_running_loop().time() - last
            if idle >= idle_s:
                dropped.append(idle)
                writer.close()
                return
            text = json.dumps({"choices": [{"message": {"role": "assistant",
                                                        "content": f"got {body['messages'][-1]['content']}"}}]})
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(text), text.encode()))
            await writer.drain()
            last = asyncio.get_running_loop().time()

    async def go(runtime: ChatRuntime):
        session = await runtime.start({"seed": 1, "persona": "p", "goal": "g", "setup": {}})
        first = await runtime.turn(session, {"message": "one"})
        await asyncio.sleep(idle_s + 0.1)     # the user thinks: the connection sits idle
        return first, await runtime.turn(session, {"message": "two"})

    first, second = asyncio.run(against_raw_server(handle, go))
    assert (first["reply"], second["reply"]) == ("got one", "got two") and not dropped, dropped


def test_a_connection_that_carried_an_error_answer_is_never_used_again():
    """A server that fails inside a request may close the connection right after its 500, without
    a `Connection: close` (Starlette's error middleware under uvicorn does); a request sent on it
    next is dropped unanswered, and would read as another conversation's runtime fault. The
    server here makes that certain: any request after a 500 on the same connection is dropped."""
    dropped: list[str] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        failed = False
        while head := await reader.readuntil(b"\r\n\r\n"):
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            said = json.loads(await reader.readexactly(length))["messages"][-1]["content"]
            if failed:
                dropped.append(said)
                writer.close()
                return
            if said == "boom":
                failed = True
                text, status = "Internal Server Error", b"500 Internal Server Error"
            else:
                reply = {"choices": [{"message": {"role": "assistant", "content": f"got {said}"}}]}
                text, status = json.dumps(reply), b"200 OK"
            writer.write(b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                         % (status, len(text), text.encode()))
            await writer.drain()

    async def go(runtime: ChatRuntime):
        broken = await runtime.start({"seed": 1, "persona": "p", "goal": "broken", "setup": {}})
        other = await runtime.start({"seed": 2, "persona": "p", "goal": "other", "setup": {}})
        with pytest.raises(RuntimeFault) as fault:
            await runtime.turn(broken, {"message": "boom"})
        return fault.value, await runtime.turn(other, {"message": "fine"})

    fault, reply = asyncio.run(against_raw_server(handle, go))
    assert fault.kind == "http_status" and fault.evidence["status"] == 500
    assert reply["reply"] == "got fine" and not dropped, dropped


def test_a_chat_assistant_message_carries_its_receipts_beside_its_text():
    # The tool call ids of the writes the reply claims, as a field of the assistant message.
    answer = lambda body: web.json_response({"choices": [{"index": 0, "message": {  # noqa: E731
        "role": "assistant", "content": "Refill ordered.", "receipts": ["call_1_0"]}}]})
    results, _ = with_endpoint(answer, lambda url: ChatRuntime(url=url + "/v1", model="m"), "refill RX-1")
    assert results[0]["reply"] == "Refill ordered." and results[0]["receipts"] == ["call_1_0"]
    # Held to the protocol's shape: receipts that are not a list of ids are the runtime's fault.
    bad = lambda body: web.json_response({"choices": [{"index": 0, "message": {  # noqa: E731
        "role": "assistant", "content": "Done.", "receipts": "call_1_0"}}]})
    results, _ = with_endpoint(bad, lambda url: ChatRuntime(url=url + "/v1", model="m"), "refill RX-1")
    assert isinstance(results[0], RuntimeFault) and "receipts" in str(results[0]), results


def test_a_template_endpoints_receipts_are_read_beside_its_reply():
    answer = lambda body: web.json_response({"out": {"text": "Moved.", "receipts": ["c-9"]}})  # noqa: E731
    results, _ = with_endpoint(answer, lambda url: TemplateRuntime(url=url + "/chat", body={"q": "{message}"},
                                                                   reply="/out/text"), "move it")
    assert results[0] == {"reply": "Moved.", "receipts": ["c-9"]}
    plain = lambda body: web.json_response({"out": {"text": "Moved."}})  # noqa: E731
    results, _ = with_endpoint(plain, lambda url: TemplateRuntime(url=url + "/chat", body={"q": "{message}"},
                                                                  reply="/out/text"), "move it")
    assert results[0] == {"reply": "Moved."}


@pytest.mark.parametrize("make, says", [
    (lambda: TemplateRuntime(url="localhost:8000/ask", body={}, reply="/r"), "not an http:// or https:// address"),
    (lambda: ChatRuntime(url="ftp://h/v1", model="m"), "not an http:// or https:// address"),
    (lambda: TemplateRuntime(url="http://h/ask", body={}, reply="/r", headers={"X-Key": "k\nInjected: 1"}),
     "line break")])
def test_an_endpoint_or_header_no_request_can_carry_is_refused_when_the_transport_is_made(make, says):
    """Through the one client's own check, before a run starts, naming the settings to fix."""
    from simrun._errors import RuntimeUnavailable

    with pytest.raises(RuntimeUnavailable, match="runtime.url or runtime.headers") as info:
        make()
    assert says in str(info.value)
