"""sudoku-batch's solving library: puzzle model, parsing, verifier, cost and solvers.

No Celery and no Redis here: the library runs on its own, in a notebook or a worker.
`solve` and `solve_many` are imported lazily so that reading and checking puzzles
(the producer's job) never pays for loading the compiled solvers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from solvers.model.cost import grid_cost
from solvers.model.entries import Entry, read_entries
from solvers.model.parse import parse_puzzle
from solvers.model.puzzle import ALPHABET, Box, Puzzle, PuzzleError
from solvers.model.result import Results, SolveResult, Status
from solvers.model.verify import is_solution, verify_batch

if TYPE_CHECKING:
    from solvers.api import solve, solve_many

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
    """Load the solving API on first use of `solve` or `solve_many`."""
    if name in ("solve", "solve_many"):
        from solvers import api

        return getattr(api, name)
    raise AttributeError(f"module 'solvers' has no attribute {name!r}")
