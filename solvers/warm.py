"""Compiling the solvers ahead of time, and telling a user when a first run compiles them.

numba compiles a kernel the first time it meets it on a machine and caches the machine
code (next to the modules, or under NUMBA_CACHE_DIR); later processes load it in a
fraction of a second. A cold cache costs ~7 s before the first answer and ~45 s for
every kernel, which looks like a hang unless someone says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

COMPILE_NOTICE = (  # after "compiling <part> "; every notice holds it
    "for this machine (each kernel once: up to a minute; `sudoku-batch warm` compiles them all ahead)"
)
FAMILIES = (  # module prefix -> what a user knows it as; anything else is "the solvers"
    ("solvers.fill", "the puzzle generator"),
    ("solvers.dig", "the puzzle generator"),
    ("solvers.difficulty", "the puzzle generator"),
    ("solvers.generator", "the puzzle generator"),
    ("pipeline.render", "the output writers"),
)
_listener: list[Any] = []  # the one numba listener of this process, made on first use


def warm_all() -> None:
    """Compile (or load from the cache) the exact, stochastic and generator kernels."""
    import numpy as np

    from solvers.api import solve_many
    from solvers.exact import EXACT_SOLVERS
    from solvers.exact.propagation import root_candidates
    from solvers.generator import generate_chunk
    from solvers.parse import parse_puzzle
    from solvers.portfolio import warm_up
    from solvers.puzzle import Box

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
    """The notice of a compile starting with a kernel of `module`: which part compiles, and that each kernel
    compiles once per machine (a command needing other kernels later says so again, naming them)."""
    return f"compiling {family(module)} {COMPILE_NOTICE}"


def on_first_compile(announce: Callable[[str], None]) -> None:
    """Call `announce(notice)` once, when numba next starts compiling a kernel in this process: a cache miss.

    numba fires its `numba:compile` event only when no cached machine code fits, so a warm
    cache never calls it. The notice names the compiling kernel's part (`compile_notice`).
    A process forked afterwards inherits whether it was called.
    """
    from numba.core import event

    if not _listener:

        class FirstCompile(event.Listener):
            """Runs the armed callback at the start of a compile, then disarms."""

            announce: Callable[[str], None] | None = None

            def on_start(self, ev: event.Event) -> None:
                callback, self.announce = self.announce, None
                if callback is not None:
                    dispatcher = (ev.data or {}).get("dispatcher")
                    callback(compile_notice(getattr(getattr(dispatcher, "py_func", None), "__module__", "")))

            def on_end(self, ev: event.Event) -> None:
                """Nothing to do when the compile ends."""

        _listener.append(FirstCompile())
        event.register("numba:compile", _listener[0])
    _listener[0].announce = announce


def cache_dir() -> str:
    """Where this machine's compiled solvers are cached (NUMBA_CACHE_DIR, or next to the modules)."""
    from solvers.clock import monotonic_ns

    return str(monotonic_ns._cache._cache_path)  # type: ignore[attr-defined]
