"""Puzzles the page offers: the samples list, and random puzzles from the generator."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import client
from solvers.generate.difficulty import LEVEL_NAMES
from solvers.generate.generator import Options, format_grid, generate_chunk
from solvers.model.puzzle import Box

SAMPLES = Path(__file__).with_name("samples.txt")
CLASSICS = Path(client.__file__).with_name("samples") / "sample.txt"
CLASSIC_LINES = (  # (line of client/samples/sample.txt, name): see its ATTRIBUTION.md
    (1, "9x9 easy (Project Euler #96)"),
    (51, "9x9 hard (Norvig's top95)"),
    (146, "9x9 hardest (Norvig's hardest)"),
    (157, "9x9 diabolical (sudoku-exchange bank)"),
)
BOXES = ("2x2", "2x3", "2x4", "3x3", "3x4", "4x4", "5x5", "6x6", "7x7", "8x8")  # the grids: 4x4 to 64x64
RANDOM_BOXES = BOXES[:-1]  # a unique 64x64 puzzle takes 40-60 s of CPU to make: `sudoku-batch generate`


@dataclass(frozen=True)
class Sample:
    """A named puzzle with its box."""

    name: str
    box: str
    puzzle: str


@cache
def samples() -> tuple[Sample, ...]:
    """The sample puzzles, small grids first."""
    out = []
    lines = CLASSICS.read_text(encoding="utf-8").splitlines()
    classics = [Sample(name, "3x3", lines[at - 1].strip()) for at, name in CLASSIC_LINES]
    for row in SAMPLES.read_text(encoding="utf-8").splitlines():
        if row.strip() and not row.startswith("#"):
            name, box, puzzle = row.split("\t")
            out.append(Sample(name, box, puzzle))
    small = [s for s in out if Box.parse(s.box).n < 9]
    return (*small, *classics, *[s for s in out if s not in small])


def check_random(box: str, level: str | None) -> None:
    """ValueError (one line) for a box or level the page does not offer, or a level no unique puzzle of `box`
    has: refused before any candidate is made (`Options.check`, as `generate --difficulty` is)."""
    if box not in RANDOM_BOXES:
        why = " (a unique 64x64 takes a minute: `sudoku-batch generate --box 8x8`)" * (box in BOXES)
        raise ValueError(f"box {box[:20]!r}: choose one of {', '.join(RANDOM_BOXES)}{why}")
    if level is not None and level not in LEVEL_NAMES:
        raise ValueError(f"level {level[:20]!r}: choose one of {', '.join(LEVEL_NAMES)}")
    Options(unique=True, difficulty={level} if level else None).check(Box.parse(box))


def random_puzzle(box: str, level: str | None, seed: int) -> dict[str, object] | None:
    """A unique puzzle for `box` (of `level` when given) from `seed`, in a puzzle process; None when none of
    the candidates tried (bounded: more for small grids) had the level. The seed goes back as decimal text:
    a JSON number past 2^53 reaches a browser rounded, and the rounded seed is another puzzle."""
    shape = Box.parse(box)
    attempts = 50 if shape.n <= 12 else 10 if shape.n <= 25 else 1  # one 49x49 candidate: ~4 s
    levels = {level} if level else None
    found = generate_chunk(shape, 1, seed, unique=True, difficulty=levels, attempts=attempts)
    if not found:
        return None
    g = found[0]
    puzzle = format_grid(g.puzzle, shape)
    return {"puzzle": puzzle, "box": box, "level": g.level, "clues": g.clues, "seed": str(seed)}
