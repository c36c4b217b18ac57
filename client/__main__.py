"""`sudoku-batch` (and `python -m client`): the process's entry point, which handles interrupts at once.

The command's imports take up to a second; the interrupt handlers (`client.interrupts.starting`) are in place
before them, so a signal then ends the command as later ones do: one line, exit 128 + the signal."""

from __future__ import annotations

import sys

from client.interrupts import starting


def command() -> int:
    """Run `sudoku-batch` with the arguments of the process; return its exit code."""
    with starting():  # until the command runs (`client.cli.main` installs its own handlers then)
        from client.cli import main

        return main()


if __name__ == "__main__":
    sys.exit(command())
