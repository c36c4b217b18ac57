"""sudoku-batch's solving library: puzzle model, parsing, verifier, cost and solvers (no Celery, no Redis).

Every public name is imported on first use: importing a plain submodule (`solvers.fields`, read by every
`sudoku-batch` command) loads no numba, and checking puzzles never pays for loading the compiled solvers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from solvers.api import solve, solve_many
    from solvers.model.cost import grid_cost
    from solvers.model.entries import Entry, read_entries
    from solvers.model.parse import parse_puzzle
    from solvers.model.puzzle import ALPHABET, Box, Puzzle, PuzzleError
    from solvers.model.result import Results, SolveResult
    from solvers.model.status import Status
    from solvers.model.verify import is_solution, verify_batch

_MODULES = {  # public name -> the module defining it, imported on first use of the name
    name: module
    for module, names in {
        "solvers.api": ("solve", "solve_many"),
        "solvers.model.cost": ("grid_cost",),
        "solvers.model.entries": ("Entry", "read_entries"),
        "solvers.model.parse": ("parse_puzzle",),
        "solvers.model.puzzle": ("ALPHABET", "Box", "Puzzle", "PuzzleError"),
        "solvers.model.result": ("Results", "SolveResult"),
        "solvers.model.status": ("Status",),
        "solvers.model.verify": ("is_solution", "verify_batch"),
    }.items()
    for name in names
}
__all__ = [
    "ALPHABET",
    "Box",
    "Entry",
    "Puzzle",
    "PuzzleError",
    "Results",
    "SolveResult",
    "Status",
    "grid_cost",
    "is_solution",
    "parse_puzzle",
    "read_entries",
    "solve",
    "solve_many",
    "verify_batch",
]


def __getattr__(name: str) -> Any:
    """Load a public name's module on its first use: `solvers.fields` alone loads no numba."""
    if name in _MODULES:
        return getattr(importlib.import_module(_MODULES[name]), name)
    raise AttributeError(f"module 'solvers' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names too, loaded or not (for `dir()` and completion)."""
    return sorted({*globals(), *__all__})
