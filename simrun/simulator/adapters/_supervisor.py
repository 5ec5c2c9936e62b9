"""Keeps a runtime's process from outliving simrun: run by `ManagedProcess`, not by hand.

    python supervisor.py FD COMMAND [ARG ...]

It starts COMMAND (which inherits its stdin, stdout and stderr: the stdio transport's pipes)
in its own process group, then waits for whichever comes first:
- COMMAND exits: the supervisor exits the same way (the same status, or the same signal);
- the pipe FD reaches its end: simrun holds the only write end, and the kernel closes it when
  simrun dies in any way, kill -9 included. The supervisor then stops the whole group (SIGTERM,
  then SIGKILL), so no runtime server is left with parent 1.

On Linux the supervisor is also a child subreaper (prctl PR_SET_CHILD_SUBREAPER): a descendant
that leaves the group (`setsid`, a double fork) and loses its parent is re-parented to the
supervisor, not to init, and the supervisor ends every descendant it has before it exits,
whichever way the runtime ended.

Why a separate process: the alternatives run code between fork and exec in simrun (preexec_fn,
to set PR_SET_PDEATHSIG), which can deadlock with simrun's writer thread, and reach only the
direct child, not what it starts. This file imports nothing of simrun's, and runs with `-I -S`.
"""

import os
import select
import signal
import subprocess
import sys
import time

GRACE_S = 3.0
PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> None:
    """Orphaned descendants become this process's children (Linux 3.4+); elsewhere, nothing."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _descendants() -> list[int]:
    """Every live process below this one, from /proc (empty where there is no /proc)."""
    parents: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields and fields[0] != b"Z":          # a zombie is already dead: it only needs reaping
            parents.setdefault(int(fields[1]), []).append(int(entry))
    found, stack = [], [os.getpid()]
    while stack:
        for child in parents.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def _end_descendants() -> None:
    """SIGTERM whatever still runs below the supervisor, then SIGKILL what outlives the grace."""
    deadline = time.monotonic() + GRACE_S
    for sig in (signal.SIGTERM, signal.SIGKILL):
        left = _descendants()
        for pid in left:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        while left and sig == signal.SIGTERM and time.monotonic() < deadline:
            _reap()
            time.sleep(0.05)
            left = _descendants()
        _reap()


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _stop_group(child: subprocess.Popen[bytes]) -> None:
    group = os.getpgid(0)
    os.killpg(group, signal.SIGTERM)          # the supervisor ignores it; the runtime gets it
    deadline = time.monotonic() + GRACE_S
    while child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    _end_descendants()                        # those that left the group too
    os.killpg(group, signal.SIGKILL)          # what is left, the supervisor included


def _exit_like(status: int) -> None:
    if status < 0:                            # killed by a signal: die of the same one
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    sys.exit(status)


def main() -> None:
    watch, command = int(sys.argv[1]), sys.argv[2:]
    _become_subreaper()
    try:
        child = subprocess.Popen(command)     # inherits the streams and the process group
    except OSError as exc:
        sys.stderr.write(f"cannot start {command[0]!r}: {exc.strerror or exc}\n")
        sys.exit(127)
    # Only now, so that the runtime does not inherit these: simrun stops the group with
    # SIGTERM, and the supervisor must outlive it to report how the runtime ended.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)                       # the runtime alone holds its ends of the pipes:
    os.dup2(devnull, 1)                       # its exit is what simrun sees as end of stream
    try:
        pidfd = os.pidfd_open(child.pid)
    except (AttributeError, OSError):         # not Linux 5.3+: poll the child instead
        pidfd = None
    while True:
        ready, _, _ = select.select([watch] + ([pidfd] if pidfd is not None else []), [], [],
                                    None if pidfd is not None else 0.1)
        if child.poll() is not None:
            _end_descendants()                # the runtime is gone: nothing it started stays
            _exit_like(child.returncode)
        if watch in ready and not os.read(watch, 4096):
            _stop_group(child)
            _exit_like(child.wait())


if __name__ == "__main__":
    main()
