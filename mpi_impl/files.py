"""The files mpi_impl writes and reads, safe against what a hostile user can plant.

Writing (checkpoints, --json, --trace, mpi_impl.bench --json), :func:`write_new`: the
contents go to a fresh temporary name in the target's folder, created with
``O_CREAT | O_EXCL | O_NOFOLLOW`` (a file or link already at that name is an error, never
followed), flushed and fsync'd, then renamed onto the final name with os.replace, which
replaces a link planted there rather than writing through it.  A reader sees the old file
or the whole new one; an error or Ctrl-C on the way removes the temporary file and leaves
no partial output.

Reading, :func:`open_regular`: the file is opened without blocking and refused unless it is
a regular file (a FIFO would block the reader forever, a device would never end, a folder
is not a file), in one line naming it.

Before any work, :func:`output_problem` says why an output path could not be written at the
end (a folder, a missing folder, a folder where files cannot be created: /proc, a read-only
file system), by creating and removing a probe file where the output will go.
:func:`printable` escapes control characters (newlines, escape sequences, bidirectional
overrides) in a name before it is printed.
"""
from __future__ import annotations

import os
import secrets
import stat
import unicodedata
from pathlib import Path

#: unicode categories escaped by printable(): controls, format (bidi overrides), separators
UNPRINTABLE = ("Cc", "Cf", "Zl", "Zp")


class FileRefused(Exception):
    """A file that cannot be read or written as asked; str() is one line naming it."""


def printable(text) -> str:
    """str(text) with every control or format character escaped (\\n, \\x1b, \\u202e)."""
    return "".join(ascii(c)[1:-1] if unicodedata.category(c) in UNPRINTABLE else c
                   for c in str(text))


def _kind(mode) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path):
    """Open `path` for reading in binary, refusing (FileRefused) anything but a regular file
    without ever blocking on it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise FileRefused(f"{printable(path)}: cannot open it ({error.strerror})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise FileRefused(f"{printable(path)}: {_kind(mode)}, not a regular file")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def temporary_name(final: Path) -> Path:
    """A fresh name beside `final` for its contents while they are written."""
    return final.with_name(f"{final.name}.{secrets.token_hex(8)}.tmp")


def write_new(path, write, *, binary=False, temporary=None):
    """Write a file atomically: write(f) fills a new temporary file (``temporary``, default
    :func:`temporary_name`), which replaces `path` once complete (os.replace: a link at
    `path` is replaced, never followed).  Returns path as a Path."""
    final = Path(path)
    temporary = Path(temporary) if temporary else temporary_name(final)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(temporary, flags, 0o644)
    try:
        with os.fdopen(fd, "wb" if binary else "w") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, final)
    except BaseException:                        # an error, or Ctrl-C: no partial output
        temporary.unlink(missing_ok=True)
        raise
    return final


def _existing_folder(path: Path) -> Path:
    """The nearest folder that exists at or above `path`."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def can_create_in(folder: Path) -> str | None:
    """None if a file can be created in `folder` (tried: a probe file created and removed),
    else why not, in a few words."""
    probe = temporary_name(folder / ".mpi_impl-probe")
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError as error:
        return error.strerror or type(error).__name__
    os.close(fd)
    probe.unlink(missing_ok=True)
    return None


def output_problem(option: str, value: str, folder: bool = False, probe: bool = True) -> str | None:
    """Why output `value` of `option` could not be written (one line), or None.  A file
    (folder=False) must not be a folder and its folder must exist; a folder (folder=True)
    must not be a file, and is created at the end if missing.  With `probe`, a file must
    also be creatable where it goes (tried)."""
    if "\x00" in value:
        return f"{option} {printable(value)!r} contains a NUL byte; no file can have that name"
    path = Path(value)
    if folder:
        if path.exists() and not path.is_dir():
            return f"{option} {printable(value)} is a file; give a directory"
        where = _existing_folder(path.absolute())
    else:
        if path.is_dir():
            return f"{option}: {value!r} is a directory; give a file name"
        where = path.absolute().parent
        if not where.is_dir():
            return f"{option}: no directory to write {value!r} into"
    why = can_create_in(where) if probe else None
    if why:
        return f"{option}: cannot create files in {printable(where)} to write {value!r} ({why})"
    return None


def same_file(a: str, b: str) -> bool:
    """Whether outputs a and b are the same name in the same folder (folders resolved;
    not a link at the name itself, which write_new replaces instead of following)."""
    where = lambda p: (os.path.realpath(Path(p).absolute().parent), Path(p).name)
    return where(a) == where(b)
