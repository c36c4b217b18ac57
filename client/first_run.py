"""What a first run on a machine needs: `--version`, the notice that solvers are being compiled,
and `sudoku-batch warm`, which compiles them ahead of time (`pipeline.engine.solve.warm_all`)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

COMPILING_COMMANDS = ("solve", "submit", "collect", "generate")  # they may run or load compiled kernels


class VersionAction(argparse.Action):
    """`--version`: print the installed version and exit (looked up only when asked)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"sudoku-batch {package_version()}")
        parser.exit()


def package_version() -> str:
    """The installed distribution's version (`unknown` when run from a source tree never installed)."""
    from importlib import metadata

    try:
        return metadata.version("sudoku-batch")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def announce_compiling(command: str, quiet: bool) -> None:
    """Say on stderr, once per command (its local processes included), when `command` starts compiling
    solvers (a cold cache), unless quiet; either way time the compiles (the summary leaves them out)."""
    if command in COMPILING_COMMANDS:
        from solvers.warm import on_first_compile

        say = lambda notice: print(f"sudoku-batch: {notice}", file=sys.stderr, flush=True)  # noqa: E731
        on_first_compile(None if quiet else say)


def run_warm() -> int:
    """Compile (or load) every solver kernel now; say which it was, how long it took and where they live."""
    from pipeline.engine.solve import warm_all
    from solvers.warm import cache_dir, on_first_compile

    compiled: list[bool] = []

    def announce(_: str) -> None:
        compiled.append(True)
        print("compiling solvers for this machine (up to a minute)...", file=sys.stderr, flush=True)

    on_first_compile(announce)
    start = time.perf_counter()
    warm_all()
    took = time.perf_counter() - start
    what = "compiled for this machine in" if compiled else "already compiled for this machine: loaded in"
    print(f"solvers {what} {took:.1f} s (cache: {cache_dir()})")
    return 0
