"""What a run tested: its labels, the runtime's version, and the git commit and branch simrun ran in.

A run carries these so that a dashboard over many runs can say which release each one was.

- Labels come from `--label` or `run.labels` (a release, a branch name), both checked by
  `simrun._labels.clean_labels`: plain one-line text, bounded.
- The version is whatever the runtime's health answer says, which may be any JSON: it is made
  one line of bounded text, or left out.
- The commit and branch come from git, run without a shell, bounded in time, in the folder
  simrun runs in; a work tree whose tracked files differ from the commit is recorded as
  `<commit>-dirty`, as `git describe --dirty` writes it. When git is missing, the folder is not
  a work tree, or git fails or hangs, they are simply absent: a run never fails for want of them.
"""

from __future__ import annotations

import re
import subprocess
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simrun._commits import recorded_commit
from simrun._errors import ConfigError
from simrun._labels import clean_labels
from simrun._untrusted_text import one_line

VERSION_CHARS = 100
BRANCH_CHARS = 200
GIT_TIMEOUT_S = 2.0
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")     # SHA-1, or SHA-256 repositories


def given_labels(labels: Iterable[str]) -> tuple[str, ...]:
    """A run's labels given to the call (`labels`; `--label` on the command line), checked as
    `run.labels` is: a ConfigError naming the parameter."""
    try:
        return clean_labels(labels)
    except ValueError as exc:
        raise ConfigError(str(exc), field="labels") from None


def runtime_version(health: Any) -> str | None:
    """The `version` of a health answer as one line of text, or None when it gives none usable."""
    return one_line(health.get("version") if isinstance(health, dict) else None, VERSION_CHARS)


@dataclass(frozen=True)
class GitState:
    commit: str | None = None      # `<sha>-dirty` when the tracked files differ from it
    branch: str | None = None      # None on a detached HEAD


def git_state(folder: Path | str = ".") -> GitState:
    """The commit checked out in `folder` and its branch, when `folder` is in a git work tree."""
    commit = _git(folder, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    if commit is None or not _COMMIT.fullmatch(commit):
        return GitState()
    branch = _git(folder, "symbolic-ref", "--quiet", "--short", "HEAD")
    if branch is not None and (len(branch) > BRANCH_CHARS or any(unicodedata.category(ch) == "Cc" for ch in branch)):
        branch = None
    # Tracked files changed, staged or not (untracked ones are not the commit's, as for describe).
    # git failing here says nothing either way: the commit alone, as before.
    changed = _git(folder, "status", "--porcelain", "--untracked-files=no")
    return GitState(recorded_commit(commit, bool(changed)), branch)


def _git(folder: Path | str, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(folder), "--no-optional-locks", *args], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):     # no git, or it hung
        return None
    if done.returncode != 0:
        return None
    try:
        return done.stdout.decode("utf-8").strip() or None
    except UnicodeDecodeError:
        return None
