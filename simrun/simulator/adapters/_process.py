"""A runtime's child process: started without a shell, watched, and never left behind.

The child runs under a small supervisor (`supervisor.py`) in its own process group, so stopping
it stops whatever it started too. Its stderr is kept as a bounded tail: the evidence a
`runtime_error` carries. `stop` is called by the adapter's `aclose` (after a run, and after
Ctrl-C or SIGTERM through the runner's `finally`); an `atexit` hook covers an interpreter that
exits any other way; and when simrun is killed outright (kill -9, the OOM killer), the
supervisor sees the end of the pipe only simrun held open, and stops the group itself.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import itertools
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from simrun import _secrets as secrets
from simrun._errors import RuntimeUnavailable
from simrun.simulator.adapters._base import stderr_said

# Credentials simrun may hold for itself (the user model's API keys, CI tokens) that a runtime it
# starts is not given unless runtime.env names them: the variables whose names say they are.
WITHHELD = re.compile(r"API_?KEY|TOKEN|SECRET|PASSW|CREDENTIAL|PRIVATE_?KEY|ACCESS_?KEY|^OPENAI_|^ANTHROPIC_",
                      re.IGNORECASE)
STDERR_TAIL_LINES = 40
STDERR_LINE_CHARS = 2000                # a longer line is cut: the tail stays small whatever the child writes
SUPERVISOR = str(Path(__file__).with_name("_supervisor.py"))
_live: set[int] = set()


@atexit.register
def _kill_leftovers() -> None:
    for pid in list(_live):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# The words of a stderr line that may be a session id: runs of letters, digits and dashes, and
# the same with dots and colons (ids such as "run.7:s-1").
_WORDS = re.compile(r"[\w-]+")
_DOTTED_WORDS = re.compile(r"[\w.:-]+")
_SAYS_EXCEPTION = re.compile(r"; its stderr says: [A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Fault|Panic)\b")


def _runnable(program: str, cwd: str | None) -> bool:
    """A program named by a path (relative to the runtime's folder) that can be run."""
    path = Path(cwd or ".") / program if not Path(program).is_absolute() else Path(program)
    return os.sep in program and path.is_file() and os.access(path, os.X_OK)


class SessionId(str):
    """A runtime's session id, as the runtime wrote it, that also knows which start of the
    process holds it: a server started again may hand out the same ids to new sessions."""

    generation: int

    def __new__(cls, sid: str, generation: int) -> SessionId:
        obj = super().__new__(cls, sid)
        obj.generation = generation
        return obj


def runtime_environment(given: dict[str, str] | None = None) -> dict[str, str]:
    """What a runtime simrun starts runs with: simrun's environment less its credentials (the
    variables WITHHELD names, and any holding a secret simrun registered), plus runtime.env,
    which may pass any of them on by name (`${OPENAI_API_KEY}`)."""
    known = set(secrets.registered())
    inherited = {name: value for name, value in os.environ.items()
                 if not WITHHELD.search(name) and value not in known}
    return {**inherited, **(given or {})}


def free_port() -> int:
    """A TCP port on the loopback that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ManagedProcess:
    def __init__(self, command: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None,
                 stdin_pipe: bool = False, line_limit: int = 2**24) -> None:
        if not command:
            raise RuntimeUnavailable("runtime.command is empty; give the program and its arguments as a list")
        self.command = list(command)
        self.env = runtime_environment(env)
        self.cwd = cwd
        self.stdin_pipe = stdin_pipe
        self.line_limit = line_limit        # the longest stdout line the stdio transport may read
        self.proc: asyncio.subprocess.Process | None = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self.stderr_lines = 0               # lines read from stderr so far: a mark for `stderr_since`
        self._drain: asyncio.Task[None] | None = None
        self._watch: int | None = None       # the write end of the supervisor's pipe
        self.generation = 0                 # how many times it was started: sessions belong to one
        self.down_since: float | None = None   # when this generation was first known to be dead
        # Requests under way (token -> session, or None for a start), and those that were when
        # this generation died: each conversation in flight then says how many shared its fate.
        self._flying: dict[int, str | None] = {}
        self._tokens = itertools.count(1)
        self.flying_at_death: dict[int, str | None] | None = None
        self._sessions: set[str] = set()    # the session ids this generation handed out

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode if self.proc is not None else None

    def stderr_tail(self) -> str:
        return "".join(self._stderr)[-4000:]      # lines redacted as they came: a cut is safe

    def stderr_since(self, mark: int) -> str:
        """What the process wrote to stderr after `stderr_lines` was `mark` (its last lines)."""
        new = min(self.stderr_lines - mark, len(self._stderr))
        return "".join(list(self._stderr)[-new:]) if new > 0 else ""

    async def start(self) -> None:
        if self.cwd is not None and not Path(self.cwd).is_dir():
            raise RuntimeUnavailable(f"runtime.cwd {self.cwd!r} is not a folder")
        program = self.command[0]
        if shutil.which(program, path=self.env.get("PATH")) is None and not _runnable(program, self.cwd):
            raise RuntimeUnavailable(f"cannot start the runtime {self.command!r}: no program {program!r} "
                                     "(not on PATH, or not executable)")
        # Only simrun holds the write end; the supervisor watches the read end for its close.
        self._close_watch()
        watch, self._watch = os.pipe()
        try:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-I", "-S", SUPERVISOR, str(watch), *self.command, pass_fds=(watch,),
                cwd=self.cwd, env=self.env, start_new_session=True,
                stdin=subprocess.PIPE if self.stdin_pipe else subprocess.DEVNULL,
                stdout=subprocess.PIPE if self.stdin_pipe else subprocess.DEVNULL,
                stderr=subprocess.PIPE, limit=self.line_limit)
        except OSError as exc:
            os.close(self._watch)
            raise RuntimeUnavailable(f"cannot start the runtime {self.command!r}: {exc}") from None
        finally:
            os.close(watch)
        _live.add(self.proc.pid)
        self._stderr.clear()
        self.generation += 1
        self.down_since = None
        self._flying, self.flying_at_death, self._sessions = {}, None, set()
        self._drain = asyncio.create_task(self._read_stderr(self.proc))

    async def _read_stderr(self, proc: asyncio.subprocess.Process) -> None:
        """Keep the last lines of stderr, each cut to STDERR_LINE_CHARS. Read in chunks, not lines:
        a child that writes a gigabyte without a newline must neither fill simrun's memory nor,
        with a reader stuck on its line, block on a full pipe. A line is redacted before it is
        cut, so a line being read keeps enough past the cut for a secret that straddles it."""
        keep = STDERR_LINE_CHARS + secrets.longest()
        partial = ""
        stderr = proc.stderr
        assert stderr is not None     # (`start` always pipes it)
        while True:
            chunk = await stderr.read(1 << 16)
            if not chunk:
                if partial:
                    self._stderr.append(secrets.cut(partial, STDERR_LINE_CHARS))
                    self.stderr_lines += 1
                break
            lines = (partial + chunk.decode("utf-8", "replace")).split("\n")
            partial = lines.pop()[:keep]
            self._stderr.extend(secrets.cut(line[:keep], STDERR_LINE_CHARS) + "\n"
                                for line in lines[-STDERR_TAIL_LINES:])
            self.stderr_lines += len(lines)
        await proc.wait()
        if proc is self.proc:
            self.mark_down()

    def _close_watch(self) -> None:
        if self._watch is not None:
            os.close(self._watch)
            self._watch = None

    def mark_down(self, at: float | None = None) -> None:
        """Note that this generation is dead, no later than `at` (perf_counter; default now). The
        first time, the requests still under way are noted: they were in flight when it died
        (a request that failed for the death stays under way until its fault is written)."""
        at = time.perf_counter() if at is None else at
        self.down_since = at if self.down_since is None else min(self.down_since, at)
        if self.flying_at_death is None:
            self.flying_at_death = dict(self._flying)

    def session(self, sid: str) -> SessionId:
        self._sessions.add(sid)
        return SessionId(sid, self.generation)

    @contextlib.contextmanager
    def request(self, session: str | None) -> Iterator[int]:
        """A request under way, for the conversation of `session` (None: one being started)."""
        token = next(self._tokens)
        self._flying[token] = None if session is None else str(session)
        try:
            yield token
        finally:
            self._flying.pop(token, None)

    def in_flight_at_death(self, token: int) -> int:
        """How many conversations had a request under way when this generation died, this
        request's among them (1 when it is the only one, or the death was not seen yet)."""
        flying = self.flying_at_death if self.flying_at_death is not None else self._flying
        conversations = {session if session is not None else f"#{t}" for t, session in flying.items()}
        conversations.add(self._flying.get(token) or f"#{token}")
        return len(conversations)

    def was_in_flight(self, token: int) -> bool:
        """Whether this request was under way when this generation died."""
        return self.flying_at_death is not None and token in self.flying_at_death

    def _marked(self, line: str) -> set[str]:
        """The session ids of this generation a stderr line names, each as a whole word (s-1 is
        not named by s-10). Looked up word by word: as cheap with 10,000 sessions as with one."""
        words = set(_WORDS.findall(line)) | set(_DOTTED_WORDS.findall(line))
        return words & self._sessions

    def stderr_of(self, session: str | None, text: str) -> str:
        """`text` (stderr lines) less the lines the runtime marked with another session's id: a
        conversation's evidence is its own lines, and those marked for none (the server's own)."""
        if session is None or not self._sessions:
            return text
        own = str(session)
        return "".join(line for line in text.splitlines(keepends=True)
                       if not (marked := self._marked(line)) or own in marked)

    def said_for(self, session: str | None, text: str) -> str:
        """'; its stderr says: ...' for a conversation: the last line naming an exception among
        the lines marked with its session id, else among the server's own (unmarked) lines, else
        the last line kept, as `stderr_said` picks one."""
        kept = self.stderr_of(session, text).splitlines()
        if session is None:
            return stderr_said("\n".join(kept))
        own = str(session)
        mine = [line.split(own, 1)[1].lstrip("]):;,= \t") for line in kept if own in self._marked(line)]
        unmarked = [line for line in kept if not self._marked(line)]
        for lines in (mine, unmarked):
            said = stderr_said("\n".join(lines))
            if said and _SAYS_EXCEPTION.match(said):
                return said
        return stderr_said("\n".join(kept))

    def collateral(self, sent_at: float, generation: int | None = None) -> bool:
        """Whether a request sent at `sent_at` (perf_counter), for a session of `generation`,
        failed only because the process had died before it: in another conversation's request,
        or before this session's process was replaced by a new one."""
        if generation is not None and generation != self.generation:
            return True
        return self.down_since is not None and sent_at > self.down_since

    async def exited(self, within_s: float) -> bool:
        """Whether the process has ended, waiting up to `within_s` for its exit to be seen."""
        if self.proc is None:
            return True
        try:
            await asyncio.wait_for(self.proc.wait(), within_s)
            return True
        except TimeoutError:
            return False

    async def stop(self, grace_s: float = 5.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.returncode is None:
            for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, grace_s)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    await asyncio.wait_for(proc.wait(), wait)
                    break
                except TimeoutError:
                    continue
        else:
            await proc.wait()
        try:
            os.killpg(proc.pid, signal.SIGKILL)   # anything the runtime itself started
        except (ProcessLookupError, PermissionError):
            pass
        _live.discard(proc.pid)
        self._close_watch()
        if self._drain is not None:
            self._drain.cancel()
            self._drain = None
