"""The one writer of every file simrun makes: reports, the dashboard, gate outputs, baselines,
`init`'s files, bundles, exports, verdicts and the step summary.

A file simrun writes lands where it was asked, as a whole, and nowhere else:

- **never through a link**: the file is written as a new file of its own (O_EXCL, O_NOFOLLOW) in
  its folder and renamed over the name, so a symbolic link at the name (dangling or not) is
  replaced, never followed; and no folder between the folder it was given (`root`) and the file
  may be a link, so a pull request that commits `reports -> /etc` or `.github -> ~` cannot aim a
  write outside the checkout;
- **never half**: a reader sees the old file or the new one, and a failed write leaves no part;
- **never over what is there, when asked not to** (`overwrite=False`): a name taken by anything,
  a dangling link included (`Path.exists()` is false for one), is refused.

`append` is for the one file simrun adds to rather than writes (GitHub's step summary, which the
runner owns): opened with O_APPEND and O_NOFOLLOW, never through a link.

Every failure is a `SimrunError` that names the file and says what to do; `tests/test_one_writer.py`
fails when any module of simrun writes a file by another way.
"""

from __future__ import annotations

import os
import secrets as random_names
from pathlib import Path

from simrun._errors import ConfigError, SimrunError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def write_file(path: str | Path, data: str | bytes, *, what: str = "file", root: str | Path | None = None,
               make_folders: bool = False, overwrite: bool = True) -> Path:
    """Write `data` to `path` whole, through no link, and return the path.

    `root`: the folder the caller was given (the project, `--out`'s folder); no folder from it down
    to the file may be a link (default: the file's own folder). `make_folders`: create the folders
    missing, `root` included (a first `simrun baseline bless` makes `baselines/`). `what` names the
    file in errors ("the report", "the baseline")."""
    path = Path(path)
    top = Path(root) if root is not None else path.parent
    _checked_folders(path, top, what, make_folders)
    if os.path.lexists(path):
        if not overwrite:
            raise SimrunError(f"{path}: {what} is there already (a file or a link); simrun does not write over it "
                              "(remove it, or pass --force where the command offers it)")
        if path.is_dir() and not path.is_symlink():
            raise SimrunError(f"cannot write {what} {path}: it is a folder")
    raw = data.encode("utf-8") if isinstance(data, str) else data
    partial = path.parent / f".{path.name}.{random_names.token_hex(6)}.tmp"
    try:
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666)
        with os.fdopen(fd, "wb") as out:
            out.write(raw)
        if not overwrite:
            # Taken between the check and now: link(2) fails on an existing name, where a rename
            # would replace it.
            os.link(partial, path)
            partial.unlink()
        else:
            os.replace(partial, path)
    except FileExistsError:
        partial.unlink(missing_ok=True)
        raise SimrunError(f"{path}: {what} appeared while simrun was writing it; simrun does not write over it") \
            from None
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise SimrunError(f"cannot write {what} {path}: {exc.strerror or exc}") from None
    return path


def check_folder(path: str | Path | None, *, parameter: str) -> None:
    """Where a file given to the call (`parameter`) will be written, checked before anything is
    spent, as every other bad input: its folder exists. None: nothing to write."""
    if path is not None and not Path(path).parent.is_dir():
        raise ConfigError(f"the folder {Path(path).parent} does not exist; create it first", field=parameter)


def append_file(path: str | Path, text: str, *, what: str = "file") -> Path:
    """Add `text` at the end of `path` (created if missing), never through a link."""
    path = Path(path)
    _checked_folders(path, path.parent, what, make_folders=False)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | _NOFOLLOW, 0o666)
        with os.fdopen(fd, "a", encoding="utf-8") as out:
            out.write(text)
    except OSError as exc:
        raise SimrunError(f"cannot write {what} {path}: {exc.strerror or exc}") from None
    return path


def _checked_folders(path: Path, root: Path, what: str, make_folders: bool) -> None:
    """Every folder from `root` down to `path`'s own is a real folder, not a link; missing ones
    are made when `make_folders`, else refused with the fix."""
    parent = path.parent
    try:
        below = parent.relative_to(root)
    except ValueError:
        raise SimrunError(f"{path}: {what} would land outside the folder {root} it belongs in") from None
    folders = [root, *(root / Path(*below.parts[:n]) for n in range(1, len(below.parts) + 1))]
    for folder in folders:
        if folder.is_symlink():
            raise SimrunError(f"{path}: the folder {folder} is a symbolic link; simrun writes {what} only into real "
                              "folders (remove the link, or write elsewhere)")
        if not folder.exists():
            if not make_folders:
                raise SimrunError(f"{path}: the folder {folder} does not exist; create it, or write {what} elsewhere")
            try:
                # `root` as `mkdir -p` makes it (the folder asked for); those below it one by one,
                # each checked above before the next.
                folder.mkdir(parents=folder == root)
            except OSError as exc:
                raise SimrunError(f"cannot create the folder {folder} for {what}: {exc.strerror or exc}") from None
        elif not folder.is_dir():
            raise SimrunError(f"{path}: {folder} is not a folder")
