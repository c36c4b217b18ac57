"""Stochastic solvers: `progressive`, `evolution` and `annealing`, each a compiled kernel
advanced in bounded slices (see `base.StochasticRun`), listed in `STOCHASTIC_SOLVERS`."""

from solvers.stochastic.annealing import ANNEALING, AnnealingParams, AnnealingRun
from solvers.stochastic.base import (
    BUDGET,
    EXHAUSTED,
    SOLVED,
    STOCHASTIC_SOLVERS,
    STOPPED,
    TIMEOUT,
    Params,
    StochasticRun,
    StochasticSolver,
    run_result,
)
from solvers.stochastic.evolution import EVOLUTION, EvolutionParams, EvolutionRun
from solvers.stochastic.progressive import PROGRESSIVE, ProgressiveParams, ProgressiveRun

__all__ = [
    "ANNEALING",
    "BUDGET",
    "EVOLUTION",
    "EXHAUSTED",
    "PROGRESSIVE",
    "SOLVED",
    "STOCHASTIC_SOLVERS",
    "STOPPED",
    "TIMEOUT",
    "AnnealingParams",
    "AnnealingRun",
    "EvolutionParams",
    "EvolutionRun",
    "Params",
    "ProgressiveParams",
    "ProgressiveRun",
    "StochasticRun",
    "StochasticSolver",
    "run_result",
]
