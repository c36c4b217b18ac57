"""Where an output file goes: replaced atomically when it is a regular file, written through when it is not.

A regular file (or a new path) is written under a temporary name beside it, renamed into place at the end: a
crash leaves no half file under the final name. Anything else (a FIFO, /dev/null, /dev/stdout) is written
straight through: renaming over it would replace the device or pipe with a regular file. Symbolic links are
followed. Temporary names `.<name>.<pid>.<random>.part` are held under an exclusive `flock` while written: a
later run removes those of writers that died, never those of a writer still at work.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import stat
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

PART_SUFFIX = ".part"
FLUSH_S = 1.0  # writers flush at least this often: whoever reads the output sees results as they come
FIFO_NOTICE_S = 3.0  # a FIFO with no reader this long: the command says what it waits for


class ReaderGone(Exception):
    """Whoever read the output (a pipe: stdout under `| head`, or a FIFO) closed it: the command
    ends quietly, as Unix tools do (exit 141, 128 + SIGPIPE)."""


class Target:
    """One output path opened for writing bytes: `stream`, then `close(keep)` renames or discards."""

    def __init__(
        self,
        path: str | Path,
        say: Callable[[str], None] | None = None,
        resume: str | None = None,
        length: int = 0,
    ) -> None:
        """`say`: where a line goes while a FIFO waits for its reader (default: stderr). `resume`: the part
        (or final file) an earlier writer left, taken over and cut to its durable `length`, to go on there."""
        self.path = Path(path)
        self.part: str | None = None  # the temporary file `close` renames (None: written straight through)
        self.final: str | None = None  # the path the part becomes
        try:
            st: os.stat_result | None = os.stat(self.path)  # follows symlinks (and /dev/stdout's)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(f"{self.path}: is a directory")
        if st is not None and stat.S_ISFIFO(st.st_mode):
            self.stream: IO[bytes] = open_fifo(self.path, say or _to_stderr)
            return
        if st is not None and not stat.S_ISREG(st.st_mode):
            self.stream = open(self.path, "wb", buffering=1 << 20)  # noqa: SIM115 - kept open
            return
        self.final = os.path.realpath(self.path)  # a symlink's target is what gets replaced
        folder, name = os.path.split(self.final)
        fd, self.part = tempfile.mkstemp(prefix=f".{name}.{os.getpid()}.", suffix=PART_SUFFIX, dir=folder)
        fcntl.flock(fd, fcntl.LOCK_EX)  # held until closed: this part is in use
        if resume is not None:  # taken over before the stale parts go: it is one of them
            os.close(fd)
            os.replace(resume, self.part)
            fd = os.open(self.part, os.O_RDWR)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.ftruncate(fd, length)
            os.lseek(fd, length, os.SEEK_SET)
        remove_stale_parts(folder, name)
        if resume is None:
            umask = os.umask(0o022)  # read by setting it and putting it back: there is no getter
            os.umask(umask)
            os.fchmod(fd, 0o666 & ~umask if st is None else stat.S_IMODE(st.st_mode))
        self.stream = os.fdopen(fd, "wb", buffering=1 << 20)

    def durable(self) -> int:
        """Flush and fsync; the bytes written so far (all of them on disk now)."""
        self.stream.flush()
        if self.part is not None:
            os.fsync(self.stream.fileno())
        return self.stream.tell() if self.part is not None else 0

    def close(self, keep: bool) -> None:
        """Flush and close; a temporary file is renamed into place when `keep`, else removed."""
        try:
            self.stream.flush()
        finally:
            self.stream.close()
            if self.part is not None:
                tmp, self.part = self.part, None
                if keep:
                    os.replace(tmp, self.final)  # type: ignore[arg-type]
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(tmp)


def open_fifo(path: Path, say: Callable[[str], None]) -> IO[bytes]:
    """Open a FIFO for writing once a reader has it open; after FIFO_NOTICE_S without one, `say` so
    (once): a plain open would block without a word until a reader comes, maybe for ever."""
    started = time.monotonic()
    said = False
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO at once while no one reads it
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
            if not said and time.monotonic() - started >= FIFO_NOTICE_S:
                say(f"waiting for a reader of {path} (a FIFO): nothing is written until one opens it")
                said = True
            time.sleep(0.05)
            continue
        os.set_blocking(fd, True)  # from here a full pipe makes the writer wait for its reader
        return os.fdopen(fd, "wb", buffering=1 << 20)


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def check_target(path: str | Path) -> None:
    """Raise ValueError (one line) when `path` cannot take an output: a directory, or in no folder."""
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{path}: is a directory")
    folder = Path(os.path.realpath(p)).parent
    if not folder.is_dir():
        raise ValueError(f"{path}: no folder {folder} to write it in")


def remove_stale_parts(folder: str, name: str) -> int:
    """Remove the `.part` files of `name` in `folder` left by writers that died; return how many."""
    pattern = re.compile(rf"^\.{re.escape(name)}\.(\d+)\.[^.]+{re.escape(PART_SUFFIX)}$")
    removed = 0
    try:
        entries = os.listdir(folder or ".")
    except OSError:
        return 0
    for entry in entries:
        m = pattern.match(entry)
        if m is None or alive(int(m.group(1))):
            continue
        path = os.path.join(folder, entry)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a live writer holds it: not stale
            os.unlink(path)
            removed += 1
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


def alive(pid: int) -> bool:
    """True when a process `pid` exists (ours or another user's)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
