"""Interrupts of the command line: SIGINT, SIGTERM and SIGHUP end a command the same way, promptly.

Installed only by the entry point (`starting`) and `client.cli.main` (`handled`), never by library code: the
first signal raises `Interrupted` in the main thread (deferred past a `held()` record write), so the command
stops, keeps what it wrote and exits 128 + the signal; a second one exits at once."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """The command was interrupted by a signal; it exits 128 + the signal's number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.exit_code = 128 + signum  # the shell's convention for a command ended by a signal


class _State:
    """What the handler needs between signals: held blocks open, a signal waiting, one raised."""

    held = 0
    pending: int | None = None
    raised = False


def _on_signal(signum: int, frame: object) -> None:
    if _State.raised:  # the second signal: the user insists, or the wind-down hangs
        os._exit(128 + signum)
    if _State.held:
        _State.pending = signum
        return
    _State.raised = True
    raise Interrupted(signum)


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """Turn SIGINT, SIGTERM and SIGHUP into `Interrupted` while the block runs (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _State.held, _State.pending, _State.raised = 0, None, False
    with _installed(_on_signal):
        yield


@contextlib.contextmanager
def _installed(handler: Callable[[int, object], None]) -> Iterator[None]:
    """`handler` for SIGNALS while the block runs; the handlers before it again after."""
    before = {sig: signal.getsignal(sig) for sig in SIGNALS}
    for sig in SIGNALS:
        signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, before_handler in before.items():
            signal.signal(sig, before_handler)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Defer an interrupt until the block ends (a record write is never cut in half)."""
    _State.held += 1
    try:
        yield
    finally:
        _State.held -= 1
        if not _State.held and _State.pending is not None and not _State.raised:
            signum, _State.pending = _State.pending, None
            _State.raised = True
            raise Interrupted(signum)


def interrupting() -> bool:
    """True once a signal was raised as `Interrupted` (the command is winding down)."""
    return _State.raised


def exit_code(exc: KeyboardInterrupt) -> int:
    """The exit code of a command ended by `exc` (a plain KeyboardInterrupt is SIGINT's)."""
    return exc.exit_code if isinstance(exc, Interrupted) else 128 + signal.SIGINT


def interrupted_line(code: int) -> str:
    """The one line of a command an interrupt ended, exit `code` (128 + the signal)."""
    return f"sudoku-batch: interrupted ({signal.Signals(code - 128).name}), exit {code}"


def say_interrupted(exc: KeyboardInterrupt) -> int:
    """Print the one line of a command an interrupt ended; return its exit code (128 + the signal)."""
    code = exit_code(exc)
    print(interrupted_line(code), file=sys.stderr, flush=True)
    return code


def _end_now(signum: int, frame: object) -> None:
    os.write(2, (interrupted_line(128 + signum) + "\n").encode())
    os._exit(128 + signum)


def starting() -> contextlib.AbstractContextManager[None]:
    """While a command loads: SIGINT, SIGTERM and SIGHUP end the process at once, in one line, exit 128 + the
    signal (nothing is started yet; an exception raised inside an import can be turned into another: pydantic
    made one a SchemaError traceback). `handled` takes over once the command runs."""
    return _installed(_end_now)
