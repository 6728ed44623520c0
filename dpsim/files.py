"""The files dpsim and course read and write, and the names they print.

Reading: only a regular file is read (a folder, a FIFO or a device is refused without
blocking: the file is opened non-blocking and checked after opening), and never more than a
stated size. Writing: an output path is checked before any work (its folder exists and takes
a new file, its name fits the file system, it is not a folder, a device or a link), two outputs
of one command never share a path, and the file is written under a temporary name in the same
folder (created new, never through a link) and renamed over the target only when complete: an
error or Ctrl-C leaves the old file, or none, and no partial one. Every name printed in a
message goes through `printable` first: control characters (newlines, bidi overrides) escaped.
"""
import contextlib
import os
import secrets
import stat
from pathlib import Path

from .errors import ScenarioError

FIGURES = (".png", ".pdf", ".svg")     # the formats every --plot writes (matplotlib picks it by suffix)
SHOWN_CHARS = 120                      # a name longer than this is shortened in messages


def printable(text, limit=None) -> str:
    """`text` safe for one line of a terminal: every character that is not printable (newline,
    tab, escape, the bidi controls U+202A-U+202E and U+2066-U+2069, ...) written as its Python
    escape, and, with `limit`, cut to that many characters."""
    text = str(text)
    if limit and len(text) > limit:
        text = text[:limit] + f"... ({len(text):,} characters)"
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


def shown(path) -> str:
    """A path as a message shows it: quoted, escaped, shortened."""
    return "'" + printable(path, SHOWN_CHARS) + "'"


# ------------------------------------------------------------------ reading

def read_regular(path, what: str, max_bytes: int) -> bytes:
    """The bytes of the regular file at `path`, at most `max_bytes` of them; ScenarioError
    (one line naming `what` and the path) for anything else, before reading a byte."""
    if "\x00" in str(path):
        raise ScenarioError("", f"{what} {shown(path)}: contains a NUL byte; no file can have that name")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise ScenarioError("", f"cannot read {what} {shown(path)}: {e.strerror or e}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ScenarioError("", f"{what} {shown(path)} is not a regular file (a folder, FIFO or device)")
        if info.st_size > max_bytes:
            raise ScenarioError("", f"{what} {shown(path)} is {info.st_size:,} bytes, over the limit of "
                                    f"{max_bytes:,}")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise ScenarioError("", f"cannot read {what} {shown(path)}: {e.strerror or e}") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:                        # grew while we read it
        raise ScenarioError("", f"{what} {shown(path)} is over the limit of {max_bytes:,} bytes")
    return data


# ------------------------------------------------------------------ writing

def temporary_name(path: Path) -> Path:
    """A fresh hidden name beside `path`, short enough for any name `path` itself may have."""
    return path.with_name(f".{path.name[:200]}.{secrets.token_hex(4)}.tmp")


def create_new(path: Path):
    """Open a new file for writing: fails if anything (a file, a planted link) has the name."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    return os.open(path, flags, 0o666)


def check_output_path(path, flag: str, suffixes=None):
    """Before any work: a file can be written at `path` as given. Its folder exists and takes a
    new file, the name fits the file system, and `path` is not a folder, a link or a device;
    for figures, the extension names a format we write. Nothing is left behind."""
    if "\x00" in str(path):
        raise ScenarioError(flag, f"{shown(path)} contains a NUL byte; no file can have that name")
    p = Path(path)
    try:
        folder = p.absolute().parent
        name_max = os.pathconf(folder, "PC_NAME_MAX") if folder.is_dir() else 255
    except OSError:
        name_max = 255
    if len(os.fsencode(p.name)) > name_max:
        raise ScenarioError(flag, f"{shown(path)}: a file name of {len(os.fsencode(p.name))} bytes, over the "
                                  f"file system's limit of {name_max}")
    try:
        folder = folder.resolve()
        kind = p.lstat().st_mode if p.is_symlink() or p.exists() else None
    except OSError as e:
        raise ScenarioError(flag, f"cannot write {shown(path)}: {e.strerror or e}") from None
    if kind is not None and stat.S_ISDIR(kind):
        raise ScenarioError(flag, f"{shown(path)} is a directory; give a file name")
    if kind is not None and stat.S_ISLNK(kind):
        raise ScenarioError(flag, f"{shown(path)} is a symbolic link; give the path of a file")
    if kind is not None and not stat.S_ISREG(kind):
        raise ScenarioError(flag, f"{shown(path)} is not a regular file (a FIFO or a device); give a file name")
    if not folder.is_dir():
        raise ScenarioError(flag, f"no directory to write {shown(path)} into")
    if suffixes and p.suffix.lower() not in suffixes:
        raise ScenarioError(flag, f"{shown(path)}: give a file name ending in {', '.join(suffixes)}")
    trial = temporary_name(folder / p.name)
    try:
        os.close(create_new(trial))
    except OSError as e:
        raise ScenarioError(flag, f"cannot create {shown(path)}: {e.strerror or e}") from None
    os.unlink(trial)


def check_distinct(outputs: dict):
    """{flag: path} of one command's outputs (None: not asked): no two name the same file."""
    seen = {}
    for flag, path in outputs.items():
        if path is None or "\x00" in str(path):          # a NUL byte is refused where the path is read
            continue
        where = os.path.realpath(path)
        if where in seen:
            raise ScenarioError(flag, f"{shown(path)} is also {seen[where]}'s file; give each output its own name")
        seen[where] = flag


@contextlib.contextmanager
def writing(path, mode="w", flag="output"):
    """`with writing(path) as f:` writes a temporary file beside `path` and renames it to
    `path` when the block ends without an exception; otherwise the temporary file goes."""
    path = Path(path)
    temp = temporary_name(path)
    try:
        fd = create_new(temp)
    except OSError as e:
        raise ScenarioError(flag, f"cannot create {shown(path)}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8", "newline": ""})) as f:
            yield f
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def write_text(path, text: str, flag="output"):
    with writing(path, "w", flag) as f:
        f.write(text)
