"""The generate task message: one chunk of puzzles to make, checked with bounds before anything runs.

What a client sends a worker (`sudoku_batch.generate_chunk`, JSON kwargs `{"task": ...}`)
and what the worker accepts: the same model on both sides, as `ChunkTask` is for solving.
Every number is bounded so a hand-made message cannot make a worker allocate without
limit: puzzles per chunk as for a solve chunk (`MAX_CHUNK_PUZZLES`, and their cells as
`MAX_TASK_CHARS`), and candidates per chunk (`count x attempts`, each may be kept).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from solvers.chunk import JOB_ID_PATTERN, MAX_CHUNK_PUZZLES, MAX_TASK_CHARS
from solvers.difficulty import LEVEL_NAMES, RATE_BUDGET
from solvers.generator import DIG_BUDGET, MINIMAL_BUDGET, Options
from solvers.puzzle import MAX_SIDE, Box

GENERATE_TASK_NAME = "sudoku_batch.generate_chunk"
MAX_ATTEMPTS = 10_000  # candidates per requested puzzle
MAX_CANDIDATES = 1 << 20  # count x attempts of one chunk: every candidate may be held until the end
BUDGET_FACTOR = 10  # search budgets may be raised this far above their defaults


class GenerateOptions(BaseModel):
    """`solvers.generator.Options` as a message carries it (`Options.to_dict`), every field bounded."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    unique: bool = False
    clues: int | None = Field(default=None, ge=0, le=MAX_SIDE**2)
    minimal: bool = False
    symmetry: Literal["none", "rotational", "mirror"] = "none"
    difficulty: list[str] | None = Field(default=None, max_length=len(LEVEL_NAMES))
    attempts: int = Field(default=100, ge=1, le=MAX_ATTEMPTS)
    dig_budget: int = Field(default=DIG_BUDGET, ge=1, le=BUDGET_FACTOR * DIG_BUDGET)
    minimal_budget: int = Field(default=MINIMAL_BUDGET, ge=1, le=BUDGET_FACTOR * MINIMAL_BUDGET)
    rate_budget: int = Field(default=RATE_BUDGET, ge=1, le=BUDGET_FACTOR * RATE_BUDGET)

    @field_validator("difficulty")
    @classmethod
    def _known_levels(cls, levels: list[str] | None) -> list[str] | None:
        """Refuse a level the rater does not know (a typo would filter everything out)."""
        for level in levels or []:
            if level not in LEVEL_NAMES:
                raise ValueError(f"difficulty {level[:20]!r}: choose from {', '.join(LEVEL_NAMES)}")
        return levels

    def options(self) -> Options:
        """The generator's options (ValueError for combinations it refuses)."""
        return Options.from_dict(self.model_dump())


class GenerateTask(BaseModel):
    """One generate message: make `count` puzzles of `box` from `seed` with `options`, as chunk `chunk`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    job: str = Field(pattern=JOB_ID_PATTERN)
    chunk: int = Field(ge=0, lt=2**53)
    box: str = Field(max_length=16)
    count: int = Field(ge=1, le=MAX_CHUNK_PUZZLES)
    seed: int = Field(ge=0, lt=2**63)
    options: GenerateOptions = GenerateOptions()

    @model_validator(mode="after")
    def _bounded(self) -> GenerateTask:
        """Refuse a box that is no box, and chunks whose cells or candidates exceed the bounds."""
        box = self.shape()
        if self.count * box.cells > MAX_TASK_CHARS:
            raise ValueError(
                f"{self.count} puzzles of {box.cells} cells: at most {MAX_TASK_CHARS:,} cells a chunk"
            )
        if self.count * self.options.attempts > MAX_CANDIDATES:
            candidates = self.count * self.options.attempts
            raise ValueError(f"{candidates:,} candidates (count x attempts): at most {MAX_CANDIDATES:,}")
        return self

    def shape(self) -> Box:
        """The box shape (ValueError for a text that is not one)."""
        return Box.parse(self.box)


def max_chunk_size(box: Box, attempts: int) -> int:
    """The most puzzles one generate chunk of `box` with `attempts` may ask for (what workers accept)."""
    return max(1, min(MAX_CHUNK_PUZZLES, MAX_TASK_CHARS // box.cells, MAX_CANDIDATES // attempts))
