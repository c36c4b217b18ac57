"""Puzzle generation: random full grids and unique (or minimal) puzzles of any box shape.

    box = Box(3, 3)
    for g in generate(box, 1000, seed=7, unique=True, symmetry="rotational"):
        print(format_grid(g.puzzle, box), format_meta(g))

Batched at every step (one kernel call per step for a whole batch): random full grids (`fill`); digging
(`unique`: removals in random order, each kept only when the solution stays unique, down to `clues` or to a
minimal puzzle; see `dig`), or random removal without a uniqueness claim down to `clues` or to round(F *
cells) blank cells with `holes` F (the "quasigroup with holes" family: at 36x36 hardest near F = 0.55-0.65,
the benchmark family of large grids); rating (`difficulty`), where `difficulty` keeps only the levels asked.

Targets a candidate may miss (a clue count, proven minimality, a level) are tried on at most `attempts`
candidates per requested puzzle; then the closest candidates are returned flagged (`reached`/`minimal` False),
or fewer puzzles when no level matches. A target that can be proven impossible raises ValueError at once.

Determinism: a chunk's output depends only on (box, count, seed, options); `generate` cuts a run into chunks
whose seeds come from `chunk_seed(seed, index)`, so the local run, the process pool and a Celery fan-out give
the same puzzles.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from solvers.generate.difficulty import (
    LEVEL_NAMES,
    RATE_BUDGET,
    Rating,
    level_of,
    parse_levels,
    possible_levels,
    rate_batch,
)
from solvers.generate.dig import dig
from solvers.generate.fill import random_grids
from solvers.model.puzzle import COMPACT, Box

DIG_BUDGET = 256  # search nodes per uniqueness check; past it the given is kept (still unique)
MINIMAL_BUDGET = 10_000_000  # second look at the undecided givens when `minimal` is asked
MAX_BATCH = 4096  # candidates per kernel call (bounds memory, keeps chunks responsive)
SYMMETRIES = ("none", "rotational", "mirror")


def orbits(box: Box, symmetry: str = "none") -> np.ndarray:
    """Cells removed together under `symmetry` -> int32[K, 2] (second -1 for a lone cell).

    `rotational` pairs (r, c) with (N-1-r, N-1-c), `mirror` pairs (r, c) with (r, N-1-c). Both map rows,
    columns and boxes onto rows, columns and boxes for every box shape, rectangles included (box column
    boundaries sit at multiples of C, symmetric about the middle), so a symmetric dig of a valid grid stays a
    sound puzzle. Diagonal symmetry would not (it swaps box rows and columns), so it is not offered."""
    if symmetry not in SYMMETRIES:
        raise ValueError(f"symmetry {symmetry!r}: choose one of {', '.join(SYMMETRIES)}")
    n = box.n
    cells = np.arange(box.cells)
    if symmetry == "none":
        image = cells
    elif symmetry == "rotational":
        image = box.cells - 1 - cells
    else:
        image = (cells // n) * n + (n - 1 - cells % n)
    first = cells[cells <= image]
    second = np.where(image[first] == first, -1, image[first])
    return np.stack([first, second], axis=1).astype(np.int32)


@dataclass(frozen=True)
class Options:
    """What to generate; JSON-ready (`to_dict`, rebuilt by `Options(**d)`) for a Celery payload."""

    unique: bool = False  # dig to a unique puzzle (each removal proven to keep one solution)
    clues: int | None = None  # stop digging at this many givens (None: dig through)
    holes: float | None = None  # or blank this fraction of the cells (clues = cells - round(F * cells))
    minimal: bool = False  # insist on proven minimal puzzles (implies unique, no `clues`)
    symmetry: str = "none"  # none | rotational (180 degrees) | mirror (left-right)
    difficulty: frozenset[str] | None = None  # keep only these levels (None: all)
    attempts: int = 100  # candidates per requested puzzle before a target is given up
    dig_budget: int = DIG_BUDGET
    minimal_budget: int = MINIMAL_BUDGET
    rate_budget: int = RATE_BUDGET

    def __post_init__(self) -> None:
        object.__setattr__(self, "difficulty", parse_levels(self.difficulty))
        if self.minimal:
            object.__setattr__(self, "unique", True)
        if self.symmetry not in SYMMETRIES:
            raise ValueError(f"symmetry {self.symmetry!r}: choose one of {', '.join(SYMMETRIES)}")
        if self.minimal and self.clues is not None:
            raise ValueError("ask for a clue count or for minimal puzzles, not both")
        if self.holes is not None and (self.clues is not None or self.minimal):
            raise ValueError("ask for holes or for a clue count or minimal puzzles, not two of them")
        if self.holes is not None and not 0.0 <= self.holes <= 1.0:
            raise ValueError(f"holes {self.holes}: a fraction of the cells, from 0 to 1")
        if self.attempts < 1:
            raise ValueError("attempts must be at least 1")

    @property
    def full_grids(self) -> bool:
        """True when the request is for full grids (nothing to dig)."""
        return not self.unique and self.clues is None and self.holes is None

    def clue_target(self, box: Box) -> int | None:
        """The givens asked for on this box shape: `clues`, or the cells `holes` leaves (None: no target)."""
        if self.holes is not None:
            return box.cells - round(self.holes * box.cells)
        return self.clues

    def check(self, box: Box) -> None:
        """Raise ValueError for a clue target or a difficulty filter this box shape provably cannot meet."""
        self._check_levels(box)
        k = self.clue_target(box)
        if k is None:
            return
        if not 0 <= k <= box.cells:
            raise ValueError(f"{k} clues: a {box} box grid has {box.cells} cells")
        if self.unique and k < box.n - 1:
            raise ValueError(
                f"{k} clues: a unique {box.n}x{box.n} puzzle needs at least {box.n - 1} "
                "(two values missing from the givens could be swapped)"
            )
        if (box.cells - k) % 2 and (orbits(box, self.symmetry)[:, 1] >= 0).all():  # only pairs of givens
            raise ValueError(
                f"{k} clues: with {self.symmetry} symmetry givens go in pairs, so the count is even"
            )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (levels as a sorted list); `holes` only when asked, so workers that predate it
        still take every other request."""
        d = asdict(self)
        d["difficulty"] = sorted(self.difficulty) if self.difficulty else None
        if d["holes"] is None:
            del d["holes"]
        return d

    def _check_levels(self, box: Box) -> None:
        """ValueError (one line) when no puzzle of this kind on `box` has a level the filter keeps."""
        possible = possible_levels(box, self.unique, self.full_grids)
        if self.difficulty is None or self.difficulty & possible:
            return
        kind = f"{box.n}x{box.n} full grid" if self.full_grids else f"{box.n}x{box.n} puzzle"
        kind = f"unique {kind}" if self.unique else kind
        asked, can = (
            _either([n for n in LEVEL_NAMES if n in levels]) for levels in (self.difficulty, possible)
        )
        raise ValueError(f"difficulty {asked}: no {kind} is {asked}, each is {can}")


def _either(names: list[str]) -> str:
    """`a`, `a or b`, `a, b or c`."""
    return " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


@dataclass(frozen=True)
class Generated:
    """One generated puzzle with its solution and metadata."""

    puzzle: np.ndarray  # uint8[N*N], 0 = empty
    solution: np.ndarray  # uint8[N*N]: the grid it was dug from
    clues: int
    unique: bool  # proven unique (by the dig, or by the rating search)
    minimal: bool  # proven: no given (orbit of givens, under symmetry) can be removed
    reached: bool  # the requested clue count was met (True without a target)
    rating: Rating = field(repr=False)

    @property
    def level(self) -> str:
        """The difficulty level name."""
        return self.rating.level

    def meta(self) -> dict[str, Any]:
        """The metadata as a JSON-ready dict (one `--meta` line)."""
        own = {k: getattr(self, k) for k in ("clues", "unique", "minimal", "reached")}
        rated = {k: getattr(self.rating, k) for k in ("level", "singles", "guesses", "nodes")}
        return {**own, **rated, "rated": self.rating.complete}


def chunk_seed(seed: int, index: int) -> int:
    """The seed of chunk `index` of a run seeded `seed`: stable across processes and versions (SeedSequence
    hashing, never Python's `hash()`), distinct per chunk."""
    state = np.random.SeedSequence([int(seed) & (2**64 - 1), int(index)]).generate_state(1, dtype=np.uint64)
    return int(state[0]) >> 1  # 63 bits: a plain integer in any JSON payload


def default_chunk_size(box: Box, options: Options | None = None) -> int:
    """Puzzles per chunk: about a tenth to a second of one core's work at every size, so a fan-out has many
    chunks but task overhead stays small (full grids are far cheaper)."""
    n = box.n
    size = 500 if n <= 9 else 50 if n <= 12 else 10 if n <= 16 else 2 if n <= 25 else 1
    return size * 20 if options is not None and options.full_grids and n <= 16 else size


def plan_chunks(count: int, seed: int, chunk_size: int) -> list[tuple[int, int, int]]:
    """Cut a run into (index, count, seed) chunks; the same plan everywhere gives the same output."""
    if count < 0 or chunk_size < 1:
        raise ValueError("count must be >= 0 and chunk_size >= 1")
    return [
        (i, min(chunk_size, count - start), chunk_seed(seed, i))
        for i, start in enumerate(range(0, count, chunk_size))
    ]


def _random_removal(box: Box, grids: np.ndarray, table: np.ndarray, order: np.ndarray, k: int) -> np.ndarray:
    """Remove orbits in `order` while the count stays >= k (no uniqueness check)."""
    puzzles = grids.copy()
    sizes = np.where(table[:, 1] >= 0, 2, 1)
    for i in range(grids.shape[0]):
        left = box.cells
        for o in order[i]:
            if left - sizes[o] >= k:
                puzzles[i, table[o, : sizes[o]]] = 0
                left -= sizes[o]
                if left == k:
                    break
    return puzzles


def _candidates(box: Box, b: int, rng: np.random.Generator, opts: Options) -> list[Generated]:
    """Make and rate b candidates (one batch through each kernel)."""
    grids = random_grids(box, b, rng)
    table = orbits(box, opts.symmetry)
    goal = opts.clue_target(box)
    target = goal if goal is not None else 0
    minimal = np.zeros(b, dtype=bool)
    if opts.full_grids:  # nothing to solve: singles (none needed) fill it, no search
        puzzles = grids.copy()
        ratings = [Rating(level_of(0), 0, 1, True, 1, True)] * b
    else:
        order = rng.permuted(np.tile(np.arange(len(table), dtype=np.int32), (b, 1)), axis=1)
        if opts.unique:
            retry = opts.minimal_budget if opts.minimal else 0
            puzzles, minimal, _, _ = dig(box, grids, table, order, target, opts.dig_budget, retry)
        else:
            puzzles = _random_removal(box, grids, table, order, target)
        ratings = rate_batch(box, puzzles, opts.rate_budget)
    clues = (puzzles > 0).sum(axis=1)
    out = []
    for i in range(b):
        r = ratings[i]
        unique = bool(opts.unique or opts.full_grids or (r.complete and r.solutions == 1))
        reached = goal is None or int(clues[i]) == goal
        out.append(Generated(puzzles[i], grids[i], int(clues[i]), unique, bool(minimal[i]), reached, r))
    return out


def generate_chunk(
    box: Box, count: int, seed: int, options: Options | None = None, **kw: Any
) -> list[Generated]:
    """Generate `count` puzzles; the output depends only on the arguments.

    Options come as an `Options` or as its fields (keywords). Bounded: at most `count * attempts` candidates
    are made (one batch when no target can be missed)."""
    opts = replace(options, **kw) if options is not None else Options(**kw)
    opts.check(box)
    rng = np.random.default_rng(np.random.SeedSequence(int(seed) & (2**64 - 1)))
    selective = opts.clue_target(box) is not None or opts.minimal or opts.difficulty is not None
    limit = count * (opts.attempts if selective else 1)
    good: list[Generated] = []
    near: list[Generated] = []  # right level, target missed: handed out flagged if need be
    made = 0
    while len(good) < count and made < limit:
        need = count - len(good)
        if made:  # later rounds: enough candidates for the hit rate seen so far, plus a margin
            hit = max(len(good) / made, 1 / opts.attempts)
            need = max(need, int(need / hit * 1.25) + 1)
        b = min(limit - made, MAX_BATCH, need)
        for g in _candidates(box, b, rng, opts):
            if opts.difficulty is not None and g.level not in opts.difficulty:
                continue
            (good if g.reached and (g.minimal or not opts.minimal) and len(good) < count else near).append(g)
        made += b
    if len(good) < count and near:
        k = opts.clue_target(box) or 0
        near.sort(key=lambda g: (abs(g.clues - k), not g.minimal))  # stable: ties keep making order
        good.extend(near[: count - len(good)])
    return good


def random_seed() -> int:
    """A fresh 63-bit seed from the OS, for a run without `--seed` (print it to replay the run)."""
    return int(np.random.SeedSequence().generate_state(1, dtype=np.uint64)[0]) >> 1


def generate(
    box: Box, count: int, seed: int, *, chunk_size: int | None = None, **options: Any
) -> Iterator[Generated]:
    """Yield `count` puzzles (fewer if a difficulty filter could not be met), chunk by chunk, in this process.

    The options are `Options` fields; they are checked before this returns (ValueError), not at the first
    puzzle. The same seed, options and chunk size give the same puzzles however the chunks are run: many
    processes are `BatchClient.generate`'s (the same plan, in order)."""
    opts = Options(**options)
    opts.check(box)
    plan = plan_chunks(count, seed, chunk_size or default_chunk_size(box, opts))
    return (g for _, size, s in plan for g in generate_chunk(box, size, s, opts))


def format_grid(grid: np.ndarray, box: Box) -> str:
    """One grid on one line in the corpus format: compact symbols with `.` for empty cells while N <= 61, else
    comma-separated integers with 0 for empty cells."""
    return COMPACT.render(np.asarray(grid, dtype=np.uint8), box)


def format_meta(g: Generated) -> str:
    """One JSON line of metadata (the `--meta` file, line-aligned with the puzzles)."""
    return json.dumps(g.meta(), separators=(",", ":"))


def render_lines(items: list[Generated], box: Box) -> tuple[list[str], list[str], list[str]]:
    """(puzzle lines, solution lines, meta lines) of a chunk, line-aligned: what a worker task returns and
    what the writer appends to the output, `--solutions` and `--meta`."""
    return (
        [format_grid(g.puzzle, box) for g in items],
        [format_grid(g.solution, box) for g in items],
        [format_meta(g) for g in items],
    )
