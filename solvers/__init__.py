"""sudoku-batch's solving library: puzzle model, parsing, verifier, cost and solvers.

No Celery and no Redis here: the library runs on its own, in a notebook or a worker.
Every public name is imported on first use: importing a plain submodule (`solvers.fields`, read
by the pipeline's contract and so by every `sudoku-batch` command) loads no numba, and reading and
checking puzzles (the producer's job) never pays for loading the compiled solvers.
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
    from solvers.model.result import Results, SolveResult, Status
    from solvers.model.verify import is_solution, verify_batch

_MODULES = {  # public name -> the module defining it, imported on first use of the name
    "solve": "solvers.api",
    "solve_many": "solvers.api",
    "grid_cost": "solvers.model.cost",
    "Entry": "solvers.model.entries",
    "read_entries": "solvers.model.entries",
    "parse_puzzle": "solvers.model.parse",
    "ALPHABET": "solvers.model.puzzle",
    "Box": "solvers.model.puzzle",
    "Puzzle": "solvers.model.puzzle",
    "PuzzleError": "solvers.model.puzzle",
    "Results": "solvers.model.result",
    "SolveResult": "solvers.model.result",
    "Status": "solvers.model.result",
    "is_solution": "solvers.model.verify",
    "verify_batch": "solvers.model.verify",
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
