"""The exact solvers: importing this package fills `EXACT_SOLVERS` with every one of them.

`propagation` is the default (`DEFAULT_EXACT`); `backtracking`, `digitwise` and
`exact_cover` are the alternatives, raced or compared against it.
"""

from solvers.exact import backtracking, digitwise, exact_cover, propagation
from solvers.exact.base import DEFAULT_EXACT, EXACT_SOLVERS, ExactBatch, ExactOutcome, KernelSolver, register

__all__ = [
    "DEFAULT_EXACT",
    "EXACT_SOLVERS",
    "ExactBatch",
    "ExactOutcome",
    "KernelSolver",
    "backtracking",
    "digitwise",
    "exact_cover",
    "propagation",
    "register",
]
