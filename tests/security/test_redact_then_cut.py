"""Redact, then cut: a secret in any text from outside (a reply, an error body, a runtime's
stderr, an exception, a model's answer) is cut out of the whole text before an excerpt, clip or
tail is taken, so a secret that straddles the cut leaves no part of itself behind."""

from __future__ import annotations

import asyncio
import sys

import pytest

from simrun import _secrets as secrets
from simrun._errors import RuntimeFault
from simrun.simulator.adapters import _base as base
from simrun.simulator.adapters._process import STDERR_LINE_CHARS, ManagedProcess

SECRET = "tok-9Qm2Zr7Lx4Vb8Nc1Hd6Kp3Ws5Ty0Ue"      # 33 characters, no whitespace


@pytest.fixture()
def registered():
    secrets.forget_all()
    secrets.register(SECRET)
    yield SECRET
    secrets.forget_all()


def leaks(text: str) -> bool:
    """Whether any 8 characters in a row of the secret are in `text` (a part long enough to be
    told from ordinary text, as the registry's own minimum says)."""
    return any(SECRET[i:i + secrets.MIN_CHARS] in text for i in range(len(SECRET) - secrets.MIN_CHARS + 1))


def straddling(limit: int, filler: str = "x") -> list[str]:
    """Texts in which the secret starts just before, at, and across the cut at `limit`."""
    return [filler * (limit - back) + SECRET + " and more text after it" for back in range(1, len(SECRET) + 3)]


CUTS = {
    "excerpt (bodies)": lambda t: base.excerpt(t),
    "excerpt of bytes": lambda t: base.excerpt(t.encode()),
    "a 500-character excerpt": lambda t: base.excerpt(t, 500),
    "json_excerpt": lambda t: base.json_excerpt({"reply": t}),
    "secrets.cut": lambda t: secrets.cut(t, 300),
}
LIMITS = {"excerpt (bodies)": base.EXCERPT_BYTES, "excerpt of bytes": base.EXCERPT_BYTES,
          "a 500-character excerpt": 500, "json_excerpt": base.EXCERPT_BYTES - len('{"reply": "'),
          "secrets.cut": 300}


@pytest.mark.parametrize("name", list(CUTS))
def test_a_secret_across_any_cut_leaves_no_part(registered, name):
    for text in straddling(LIMITS[name]):
        shown = CUTS[name](text)
        assert not leaks(shown), (name, text.index(SECRET), shown[-60:])


def test_a_tail_keeps_no_part_of_a_secret_across_its_start(registered):
    for back in range(0, len(SECRET) + 2):
        text = "head " + SECRET + "y" * (200 - len(SECRET) + back)
        assert not leaks(secrets.tail(text, 200))


def test_cut_is_the_cut_of_the_redacted_whole(registered):
    """Whatever the text, cut(text, n) == redact(text)[:n]: cheaper, never different."""
    import random

    rng = random.Random(7)
    pieces = [SECRET, "ab", " ", SECRET[:10], "ü", "x" * 40, "\n"]
    for _ in range(300):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        for n in (0, 5, 17, 60, 400):
            assert secrets.cut(text, n) == secrets.redact(text)[:n]


def test_an_exception_message_is_redacted_before_it_is_cut(registered):
    from simrun.simulator._conversation import _evidence_of

    for text in straddling(500):
        evidence = _evidence_of(ValueError(text))
        assert not leaks(evidence["message"]) and not leaks(evidence["traceback"])


def test_a_runtime_s_stderr_line_is_redacted_before_it_is_cut(registered, tmp_path):
    """A real child that writes lines in which the secret straddles the line cut, some in
    small pieces (so the line is put together across reads)."""
    script = tmp_path / "noisy.py"
    script.write_text(
        "import sys, time\n"
        f"secret = {SECRET!r}\n"
        f"for back in range(1, len(secret) + 2):\n"
        f"    line = 'e' * ({STDERR_LINE_CHARS} - back) + secret + ' tail\\n'\n"
        "    for i in range(0, len(line), 700):\n"
        "        sys.stderr.write(line[i:i + 700]); sys.stderr.flush()\n"
        "    time.sleep(0.001)\n")

    async def go() -> str:
        process = ManagedProcess([sys.executable, str(script)])
        await process.start()
        await process.exited(20)
        await asyncio.sleep(0.2)          # the reader's last chunk
        tail = process.stderr_tail()
        await process.stop()
        return tail + "".join(process._stderr)

    shown = asyncio.run(go())
    assert "[redacted]" in shown
    assert not leaks(shown)


def test_a_fault_from_a_python_runtime_is_redacted_before_it_is_cut(registered):
    from simrun.simulator.adapters._python import PythonRuntime

    class Echoing:
        def health(self):
            return {"protocol": 1}

        def start(self, request):
            raise RuntimeError("x" * (base.EXCERPT_BYTES - 5) + SECRET)

    adapter = PythonRuntime(Echoing())
    with pytest.raises(RuntimeFault) as raised:
        asyncio.run(adapter.start({"persona": "p", "goal": "g", "seed": 1}))
    assert not leaks(str(raised.value)) and not leaks(raised.value.evidence["traceback"])


def test_a_store_batch_searched_at_once_still_has_every_secret_cut_out(registered, tmp_path):
    """The store searches a batch's strings together, once, and redacts string by string only
    when a secret is there: a secret anywhere in a batch (its first string, its last, one in the
    middle) is cut out all the same, and a batch without one is written as it came."""
    import duckdb

    from simrun.scoring.store._duck import insert_rows

    con = duckdb.connect(str(tmp_path / "b.duckdb"))
    con.execute("CREATE TABLE t (a VARCHAR, b VARCHAR, n INTEGER)")
    clean = [["plain text", "more text", i] for i in range(50)]
    assert not secrets.found_in([r[0] for r in clean]) and secrets.found_in(["x", SECRET])
    for where in ((0, 0), (49, 1), (25, 0)):
        rows = [list(r) for r in clean]
        rows[where[0]][where[1]] = f"echoed {SECRET} back"
        insert_rows(con, "t", rows)
    insert_rows(con, "t", clean, leading=())
    stored = [v for row in con.execute("SELECT a, b FROM t").fetchall() for v in row]
    assert not any(leaks(v) for v in stored)
    assert stored.count(f"echoed {secrets.REDACTED} back") == 3
    assert stored.count("plain text") == 4 * 50 - 2          # every other string as it came
