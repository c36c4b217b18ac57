"""Stochastic solvers: `progressive`, `evolution` and `annealing`, each a compiled kernel advanced in bounded
slices (see `base.StochasticRun`), listed in `STOCHASTIC_SOLVERS`."""

from solvers.stochastic import annealing, evolution, progressive  # noqa: F401 - each registers its solver
from solvers.stochastic.base import STOCHASTIC_SOLVERS

__all__ = ["STOCHASTIC_SOLVERS"]
