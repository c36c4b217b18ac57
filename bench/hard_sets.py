"""The hard benchmark sets of the race (issue 16): frisch 25x25 and random grids with holes.

A `holes` set is `sudoku-batch generate --box RxC --holes F --count K --seed S_k` for the
k-th fraction F it lists, S_k = S + 10000 k (the same puzzles: `solvers.generate.generator.generate`
with the CLI's defaults): one seed for every fraction would blank nested hole patterns of
the same K full grids (24 36x36 puzzles from 3 grids, their times correlated, so a set
measured 3 samples, not 24), written once under bench/out/instances/ (a 64x64 full grid takes 8-25 s to
fill, so the sets are not made again for every run). The training sets, from which
`bench/portfolio.py learn` derives the race's shares, use other seeds than the evidence
sets; frisch has no second set of its kind, so its 18 puzzles serve both (said so in
docs/decisions.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPORA = Path(os.environ.get("SUDOKU_CORPORA", ROOT.parent / "shared" / "corpora"))
INSTANCES = ROOT / "bench" / "out" / "instances"
SEED_STRIDE = 10_000  # the k-th fraction of a set takes seed + SEED_STRIDE * k (training seeds are apart)


@dataclass(frozen=True)
class HoleSet:
    """Grids of side rows*cols with a fraction `holes` blanked, `count` per fraction, the k-th
    fraction from seed `seed + SEED_STRIDE * k` (other full grids for every fraction)."""

    box: str
    holes: tuple[float, ...]
    count: int
    seed: int
    time_limit: float

    def lines(self) -> list[str]:
        """Return the set's puzzle lines (made once, then read from bench/out/instances)."""
        from solvers.generate.generator import format_grid, generate
        from solvers.model.puzzle import Box

        box = Box.parse(self.box)
        out: list[str] = []
        for k, f in enumerate(self.holes):
            seed = self.seed + SEED_STRIDE * k
            path = INSTANCES / f"{self.box}_holes{f:.2f}_seed{seed}_count{self.count}.txt"
            if not path.exists():
                made = [format_grid(g.puzzle, box) for g in generate(box, self.count, seed, holes=f)]
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(".tmp")
                tmp.write_text("\n".join(made) + "\n")
                tmp.replace(path)
            out += path.read_text().split()
        return out


@dataclass(frozen=True)
class CorpusSet:
    """Lines of a corpus file: every `step`-th, at most `count` (0: all)."""

    path: str
    time_limit: float
    count: int = 0
    step: int = 1

    def lines(self) -> list[str]:
        """Return the set's puzzle lines."""
        with open(CORPORA / self.path) as f:
            out = [ln.strip() for ln in f if ln.strip()][:: self.step]
        return out[: self.count] if self.count else out


Q36 = tuple(round(0.55 + 0.01 * k, 2) for k in range(8))  # 0.55 .. 0.62
SETS: dict[str, CorpusSet | HoleSet] = {
    "frisch": CorpusSet("25x25/gecode_frisch_25x25.txt", 60.0),
    "acs25": CorpusSet("25x25/sudoku_acs_general_25x25.txt", 60.0, 200, 10),
    "q36": HoleSet("6x6", Q36, 3, 36, 20.0),  # 24 grids
    "q49": HoleSet("7x7", (0.6,), 10, 49, 30.0),
    "q64": HoleSet("8x8", (0.75,), 10, 64, 60.0),
}
TRAINING: dict[str, CorpusSet | HoleSet] = {
    "frisch": SETS["frisch"],
    "q36": HoleSet("6x6", Q36, 3, 1036, 20.0),  # 24 grids
    "q49": HoleSet("7x7", (0.6, 0.6), 6, 1049, 30.0),  # 12 grids, seeds 1049 and 11049: on the first 6
    "q64": HoleSet("8x8", (0.75,), 6, 1064, 60.0),  # sat and sat-rows came within 5% of each other
}
