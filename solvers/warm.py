"""Compiling the solvers ahead of time, and telling a user when a first run compiles them: numba compiles a
kernel once per machine and caches it, and a cold cache (~7 s before a first answer, ~45 s for every
kernel) looks like a hang unless someone says so.
"""

from __future__ import annotations

import mmap
import struct
import time
from collections.abc import Callable
from typing import Any

COMPILE_NOTICE = (  # after "compiling <part> "; every notice holds it
    "for this machine (each kernel once: up to a minute; `sudoku-batch warm` compiles them all ahead)"
)
FAMILIES = (  # module prefix -> what a user knows it as; anything else is "the solvers"
    ("solvers.generate.", "the puzzle generator"),
    ("pipeline.engine.render", "the output writers"),
)
_listener: list[Any] = []  # the one record of compiles (`_Compiles`) of this process, made on first use


def warm_all() -> None:
    """Compile (or load from the cache) the exact, stochastic and generator kernels."""
    import numpy as np

    from solvers.api import solve_many
    from solvers.exact import EXACT_SOLVERS
    from solvers.exact.propagation import root_candidates
    from solvers.generate.generator import generate_chunk
    from solvers.model.parse import parse_puzzle
    from solvers.model.puzzle import Box
    from solvers.race.portfolio import warm_up

    parse_puzzle("." * 81)  # one puzzle's parse (a race helper, the web page, a line the batch refused)
    solve_many(["." * 16, "." * 81, "." * 256], time_limit=1.0)  # the default solver: generic, 9x9, 16x16
    for solver in EXACT_SOLVERS.values():
        solver.solve_batch(np.zeros((1, 16), dtype=np.uint8), Box(2, 2), limit=2, keep=1, max_nodes=1000)
    warm_up()  # the stochastic members of the portfolios
    root_candidates(Box(2, 2), np.zeros(16, dtype=np.uint8))  # the SAT members' root propagation
    generate_chunk(Box(3, 3), 2, 1, unique=True)


def family(module: str) -> str:
    """The part of sudoku-batch a kernel of `module` belongs to, as the compile notice names it."""
    return next((name for prefix, name in FAMILIES if module.startswith(prefix)), "the solvers")


def compile_notice(module: str) -> str:
    """The notice of a compile starting with a kernel of `module`: which part compiles, once per machine."""
    return f"compiling {family(module)} {COMPILE_NOTICE}"


class _Compiles:
    """What every process of one command shares about numba's compiles, in shared memory made before any fork:
    whether the notice was said (once for all), how many compiles run and since when, and seconds compiled."""

    LAYOUT = struct.Struct("<qqdd")  # said, running, since (monotonic s), seconds compiled before

    def __init__(self) -> None:
        import multiprocessing

        self.lock = multiprocessing.get_context("fork").Lock()
        self.memory = mmap.mmap(-1, self.LAYOUT.size)  # MAP_SHARED: a forked process writes the same bytes
        self.announce: Callable[[str], None] | None = None  # this process's; a fork inherits it

    def start(self, module: str) -> None:
        """A compile starts (numba nests them: a kernel's callees compile inside it)."""
        with self.lock:
            said, running, since, seconds = self.LAYOUT.unpack_from(self.memory)
            say = self.announce is not None and not said
            since = since if running else time.monotonic()
            self.LAYOUT.pack_into(self.memory, 0, said or say, running + 1, since, seconds)
        if say:
            self.announce(compile_notice(module))  # type: ignore[misc]

    def end(self) -> None:
        """A compile ends: when none runs any more, its span is added to the seconds compiled."""
        with self.lock:
            said, running, since, seconds = self.LAYOUT.unpack_from(self.memory)
            running = max(running - 1, 0)
            seconds += time.monotonic() - since if not running else 0.0
            self.LAYOUT.pack_into(self.memory, 0, said, running, since, seconds)

    def arm(self, announce: Callable[[str], None] | None) -> None:
        """Say the notice at the next compile (of this process or one forked after this)."""
        self.announce = announce
        with self.lock:
            _, running, since, seconds = self.LAYOUT.unpack_from(self.memory)
            self.LAYOUT.pack_into(self.memory, 0, False, running, since, seconds)

    def seconds(self) -> float:
        """Seconds during which some process of the command compiled, up to now."""
        with self.lock:
            _, running, since, seconds = self.LAYOUT.unpack_from(self.memory)
        return seconds + (time.monotonic() - since if running else 0.0)


def on_first_compile(announce: Callable[[str], None] | None) -> None:
    """Call `announce(notice)` once, when numba next compiles a kernel (a cache miss: numba fires
    `numba:compile` only then) in this process or one it forks afterwards; None: say nothing. Either way
    the compiles are timed from now on (`compile_seconds`)."""
    from numba.core import event

    if not _listener:
        compiles = _Compiles()

        class Compiles(event.Listener):
            """Hands numba's compile events to the shared record."""

            def on_start(self, ev: event.Event) -> None:
                dispatcher = (ev.data or {}).get("dispatcher")
                compiles.start(getattr(getattr(dispatcher, "py_func", None), "__module__", ""))

            def on_end(self, ev: event.Event) -> None:
                compiles.end()

        _listener.append(compiles)
        event.register("numba:compile", Compiles())
    _listener[0].arm(announce)


def compile_seconds() -> float:
    """Seconds during which this process, or one it forked, compiled kernels since `on_first_compile` was
    first called (0 before): what a summary takes out of a job's time."""
    return _listener[0].seconds() if _listener else 0.0


def cache_dir() -> str:
    """Where this machine's compiled solvers are cached (NUMBA_CACHE_DIR, or next to the modules)."""
    from solvers.kernel.clock import monotonic_ns

    return str(monotonic_ns._cache._cache_path)  # type: ignore[attr-defined]
