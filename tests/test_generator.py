"""The generator makes valid grids and unique puzzles of every box shape, as asked, reproducibly.

Uniqueness is confirmed by `exact_cover` (dancing links), which shares no search code
with the dig kernel that produced the puzzles; validity by the independent verifier.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from solvers.exact import EXACT_SOLVERS
from solvers.generate.difficulty import (
    LEVEL_NAMES,
    level_of,
    parse_levels,
    possible_levels,
    rate_batch,
)
from solvers.generate.dig import dig
from solvers.generate.fill import random_grids
from solvers.generate.generator import (
    Options,
    chunk_seed,
    format_grid,
    format_meta,
    generate,
    generate_chunk,
    orbits,
    plan_chunks,
    random_seed,
    render_lines,
)
from solvers.kernel.outcome import DONE
from solvers.model.parse import parse_puzzle
from solvers.model.puzzle import Box, Puzzle
from solvers.model.verify import is_solution, verify_batch
from tests.grids import pattern_grid

CHECKER = EXACT_SOLVERS["exact_cover"]
SQUARES = [(2, 2), (3, 3), (4, 4), (5, 5), (6, 6)]
RECTANGLES = [
    (2, 3),
    (3, 2),
    (2, 4),
    (4, 2),
    (2, 5),
    (5, 2),
    (3, 4),
    (4, 3),
    (3, 5),
    (5, 3),
    (4, 5),
    (5, 4),
    (5, 6),
    (6, 5),
]


def stack(items, attr="puzzle"):
    return np.stack([getattr(g, attr) for g in items])


def assert_valid(box, items):
    """Every solution is a valid full grid and every puzzle is a subset of its solution."""
    puzzles, solutions = stack(items), stack(items, "solution")
    assert verify_batch(puzzles, solutions, box.rows, box.cols).all()
    assert is_solution(Puzzle(box, puzzles[0]), solutions[0])  # the plain-Python verifier too
    assert [g.clues for g in items] == (puzzles > 0).sum(axis=1).tolist()


def assert_unique(box, items):
    """The other exact solver finds exactly one solution, the one the puzzle was dug from."""
    out = CHECKER.solve_batch(stack(items), box, limit=2, keep=1, max_nodes=5_000_000)
    assert out.status.tolist() == [DONE] * len(items)
    assert out.counts.tolist() == [1] * len(items)
    assert (out.solutions[:, 0] == stack(items, "solution")).all()


def assert_symmetric(box, items, symmetry):
    table = orbits(box, symmetry)
    pairs = table[table[:, 1] >= 0]
    filled = stack(items) > 0
    assert (filled[:, pairs[:, 0]] == filled[:, pairs[:, 1]]).all()


def symmetric_digs(box, count, seed, symmetry):
    """`count` unique digs of `symmetry`, checked valid, unique and symmetric."""
    items = list(generate(box, count, seed=seed, unique=True, symmetry=symmetry))
    assert_valid(box, items)
    assert_unique(box, items)
    assert_symmetric(box, items, symmetry)
    return items


@pytest.mark.parametrize("shape", SQUARES + RECTANGLES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_full_grids_of_every_box_shape_are_valid_and_distinct(shape):
    box = Box(*shape)
    items = list(generate(box, 4, seed=11))
    assert_valid(box, items)
    assert all(g.clues == box.cells and g.unique and g.reached for g in items)
    assert len({g.puzzle.tobytes() for g in items}) == 4


def test_full_grids_spread_over_the_whole_space_not_a_few_patterns():
    seen = {g.puzzle.tobytes() for g in generate(Box(2, 2), 3000, seed=10)}
    assert len(seen) == 288  # every valid 4x4 grid, both essentially different classes
    assert len({g.puzzle.tobytes() for g in generate(Box(3, 3), 3000, seed=10)}) == 3000


@pytest.mark.parametrize(
    "shape", [s for s in SQUARES + RECTANGLES if s[0] * s[1] <= 16], ids=lambda s: f"{s[0]}x{s[1]}"
)
def test_dug_puzzles_up_to_16x16_are_unique_minimal_and_checked_by_another_solver(shape):
    box = Box(*shape)
    items = list(generate(box, 3, seed=12, minimal=True))
    assert_valid(box, items)
    assert_unique(box, items)
    assert all(g.unique and g.minimal and g.reached for g in items)


@pytest.mark.parametrize(
    ("shape", "symmetry"),
    [
        ((4, 5), "rotational"),
        ((5, 4), "mirror"),
        ((5, 5), "rotational"),
        ((5, 6), "rotational"),
        ((6, 5), "mirror"),
        ((6, 6), "rotational"),
    ],
    ids=lambda v: v if isinstance(v, str) else f"{v[0]}x{v[1]}",
)
def test_dug_puzzles_of_the_large_shapes_are_unique_and_symmetric(shape, symmetry):
    box = Box(*shape)
    assert symmetric_digs(box, 1, 13, symmetry)[0].clues < box.cells * 3 // 4


@pytest.mark.parametrize("symmetry", ["rotational", "mirror"])
@pytest.mark.parametrize(
    "shape", [(3, 3), (2, 3), (3, 4), (4, 3), (5, 3), (2, 5)], ids=lambda s: f"{s[0]}x{s[1]}"
)
def test_symmetric_digs_keep_their_symmetry_and_stay_unique(shape, symmetry):
    symmetric_digs(Box(*shape), 4, 14, symmetry)


def test_minimal_puzzles_lose_uniqueness_when_any_single_given_is_removed():
    box = Box(3, 3)
    for g in generate(box, 3, seed=15, minimal=True):
        cells = np.flatnonzero(g.puzzle)
        trials = np.repeat(g.puzzle[None], len(cells), axis=0)
        trials[np.arange(len(cells)), cells] = 0
        assert (CHECKER.solve_batch(trials, box, limit=2).counts == 2).all()


def test_minimal_symmetric_puzzles_lose_uniqueness_when_any_orbit_is_removed():
    box = Box(3, 3)
    table = orbits(box, "rotational")
    for g in generate(box, 3, seed=16, minimal=True, symmetry="rotational"):
        kept = table[g.puzzle[table[:, 0]] > 0]
        trials = np.repeat(g.puzzle[None], len(kept), axis=0)
        for i, (a, b) in enumerate(kept):
            trials[i, a] = 0
            trials[i, max(a, b)] = 0
        assert (CHECKER.solve_batch(trials, box, limit=2).counts == 2).all()


@pytest.mark.parametrize(
    ("symmetry", "clues"), [("none", 30), ("none", 45), ("rotational", 31), ("mirror", 36)]
)
def test_a_reachable_clue_target_is_met_exactly(symmetry, clues):
    box = Box(3, 3)
    items = list(generate(box, 6, seed=17, unique=True, clues=clues, symmetry=symmetry))
    assert [g.clues for g in items] == [clues] * 6
    assert all(g.reached and not g.minimal for g in items)
    assert_unique(box, items)
    assert_symmetric(box, items, symmetry)


def test_an_unreachable_clue_target_is_reported_after_bounded_attempts():
    box = Box(3, 3)
    t0 = time.process_time()
    items = list(generate(box, 3, seed=18, unique=True, clues=17, attempts=5))
    assert time.process_time() - t0 < 5
    assert len(items) == 3
    assert all(not g.reached and g.clues > 17 and g.minimal for g in items)
    assert_unique(box, items)


@pytest.mark.parametrize(
    ("shape", "kwargs", "reason"),
    [
        ((3, 3), {"unique": True, "clues": 7}, "at least 8"),
        ((3, 3), {"clues": 82}, "81 cells"),
        ((2, 2), {"unique": True, "clues": 5, "symmetry": "mirror"}, "pairs"),
        ((3, 3), {"minimal": True, "clues": 25}, "not both"),
        ((3, 3), {"symmetry": "diagonal"}, "symmetry"),
        ((3, 3), {"difficulty": "fiendish"}, "difficulty"),
    ],
)
def test_provably_impossible_requests_raise_at_once_with_the_reason(shape, kwargs, reason):
    with pytest.raises(ValueError, match=reason):
        generate(Box(*shape), 1, seed=1, **kwargs)  # at the call, before any work


def test_random_removal_without_uniqueness_hits_the_count_and_reports_uniqueness_honestly():
    box = Box(3, 3)
    items = list(generate(box, 20, seed=19, clues=24))
    assert_valid(box, items)
    assert all(g.clues == 24 and g.reached for g in items)
    counts = CHECKER.solve_batch(stack(items), box, limit=2).counts
    assert [g.unique for g in items] == (counts == 1).tolist()
    assert not all(g.unique for g in items)  # 24 random givens rarely pin a grid


def test_the_same_seed_gives_the_same_puzzles_and_another_seed_others():
    box = Box(3, 3)
    runs = [render_lines(list(generate(box, 30, seed=s, unique=True, chunk_size=7)), box) for s in (5, 5, 6)]
    assert runs[0] == runs[1]
    assert not set(runs[0][0]) & set(runs[2][0])


def test_generate_is_the_concatenation_of_its_chunks_so_fan_out_gives_the_same_output():
    box = Box(2, 3)
    opts = {"unique": True, "symmetry": "mirror"}
    whole = [format_grid(g.puzzle, box) for g in generate(box, 10, seed=21, chunk_size=4, **opts)]
    chunks = plan_chunks(10, 21, 4)
    assert [c[1] for c in chunks] == [4, 4, 2]
    assert [c[2] for c in chunks] == [chunk_seed(21, i) for i in range(3)]
    parts = [
        format_grid(g.puzzle, box) for _, n, s in chunks for g in generate_chunk(box, n, s, Options(**opts))
    ]
    assert whole == parts


def test_local_worker_processes_give_the_same_output_as_one_process():
    from client.batch import BatchClient
    from pipeline.contract.generate import GenerateOptions

    box = Box(2, 2)
    one = [format_grid(g.puzzle, box) for g in generate(box, 6, seed=22, unique=True, chunk_size=2)]
    with BatchClient(workers=2) as client:  # the chunks go to two local processes
        job = client.generate(box, plan_chunks(6, 22, 2), GenerateOptions(unique=True), {})
        two = [line for chunk in job.generated() for line in chunk.puzzles]
    assert one == two


@pytest.mark.parametrize(("shape", "budget"), [((3, 3), 2), ((3, 4), 8)], ids=["9x9", "12x12"])
def test_a_dig_batch_gives_each_grid_the_puzzle_it_would_get_alone(shape, budget):
    box = Box(*shape)
    rng = np.random.default_rng(27)
    grids = random_grids(box, 6, rng)
    table = orbits(box, "none")
    order = rng.permuted(np.tile(np.arange(len(table), dtype=np.int32), (6, 1)), axis=1)
    together = dig(box, grids, table, order, 0, budget, 10**6)
    alone = [dig(box, grids[i : i + 1], table, order[i : i + 1], 0, budget, 10**6) for i in range(6)]
    for k in range(3):
        assert (together[k] == np.concatenate([a[k] for a in alone])).all()
    assert together[1].all()  # the second look with the larger budget decided everything


def test_chunk_seeds_are_stable_distinct_and_json_safe():
    seeds = [chunk_seed(7, i) for i in range(100)]
    assert len(set(seeds)) == 100
    assert all(0 <= s < 2**63 for s in seeds)
    assert chunk_seed(7, 3) == seeds[3] != chunk_seed(8, 3)
    assert 0 <= random_seed() < 2**63 and random_seed() != random_seed()


def test_the_difficulty_filter_keeps_only_the_requested_levels():
    box = Box(3, 3)
    hard = list(generate(box, 10, seed=23, minimal=True, difficulty="hard,expert"))
    assert len(hard) == 10 and {g.level for g in hard} <= {"hard", "expert"}
    assert all(g.rating.guesses >= 3 and not g.rating.singles for g in hard)
    easy = list(generate(box, 10, seed=23, unique=True, difficulty=["easy"]))
    assert all(g.level == "easy" and g.rating.singles and g.rating.guesses == 0 for g in easy)
    # singles alone solve it, so the default solver (which propagates more) needs no guess either
    assert (EXACT_SOLVERS["propagation"].solve_batch(stack(easy), box).guesses == 0).all()


def test_an_unmet_difficulty_filter_returns_fewer_puzzles_after_bounded_attempts():
    items = list(generate(Box(3, 3), 5, seed=24, unique=True, difficulty="expert", attempts=1))
    assert items == []  # 5 candidates, none expert


@pytest.mark.parametrize(
    ("box", "options", "message"),
    [
        (Box(3, 3), {"difficulty": "expert"}, "difficulty expert: no 9x9 full grid is expert, each is easy"),
        (Box(2, 2), {"unique": True, "difficulty": "medium,hard"}, "no unique 4x4 puzzle is medium or hard"),
        (
            Box(2, 2),
            {"clues": 5, "difficulty": "expert"},
            "no 4x4 puzzle is expert, each is easy, medium or hard",
        ),
    ],
)
def test_a_difficulty_filter_no_puzzle_of_the_box_can_meet_is_refused_before_any_candidate(
    box, options, message
):
    with pytest.raises(ValueError, match=message):
        generate(box, 3, seed=1, **options)


@pytest.mark.slow
def test_the_levels_a_4x4_puzzle_can_have_are_those_every_4x4_puzzle_has():
    """Every puzzle of the 12 grids whose first row is 1234 (all 4x4 puzzles up to relabelling) rated."""
    import itertools

    box = Box(2, 2)
    rows = [r for r in itertools.product(itertools.permutations(range(1, 5)), repeat=3)]
    grids = [np.array([(1, 2, 3, 4), *r], dtype=np.uint8).ravel() for r in rows]
    grids = [g for g in grids if is_solution(Puzzle(box, g, "compact"), g)]
    assert len(grids) == 12  # 288 grids / 24 labellings
    cells = ((np.arange(1 << 16)[:, None] >> np.arange(16)) & 1).astype(bool)
    seen: dict[bool, set[str]] = {True: set(), False: set()}
    for g in grids:
        for r in rate_batch(box, np.where(cells, g, 0).astype(np.uint8)):
            assert r.complete
            seen[r.solutions == 1].add(r.level)
            seen[False].add(r.level)  # without --unique a puzzle may happen to be unique
    assert all(possible_levels(box, unique) == frozenset(seen[unique]) for unique in (True, False))


def test_levels_are_ordered_by_guesses_and_parse_from_text():
    assert [level_of(g) for g in (0, 1, 2, 3, 9, 10, 10**6)] == [
        "easy",
        "medium",
        "medium",
        "hard",
        "hard",
        "expert",
        "expert",
    ]
    assert parse_levels(" Hard, expert ") == frozenset({"hard", "expert"})
    assert parse_levels("") is None and parse_levels(None) is None
    assert LEVEL_NAMES == ("easy", "medium", "hard", "expert")


def test_rating_does_not_depend_on_how_values_are_labelled():
    box = Box(3, 3)
    g = next(iter(generate(box, 1, seed=25, minimal=True, difficulty="expert", attempts=1000)))
    relabel = np.concatenate([[0], np.random.default_rng(1).permutation(9) + 1]).astype(np.uint8)
    a, b = rate_batch(box, np.stack([g.puzzle, relabel[g.puzzle]]).astype(np.uint8))
    assert (a.guesses, a.nodes, a.level) == (b.guesses, b.nodes, b.level)


@pytest.mark.parametrize("shape", [(3, 3), (4, 4), (2, 3), (5, 6), (8, 8)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_lines_are_in_the_corpus_format_and_parse_back(shape):
    box = Box(*shape)
    grid = pattern_grid(box)
    puzzle = grid.copy()
    puzzle[::3] = 0
    line = format_grid(puzzle, box)
    assert ("," in line) == (box.n > 61)
    assert "\n" not in line
    assert (parse_puzzle(line, box).givens == puzzle).all()


def test_meta_lines_are_json_with_the_difficulty_and_options_survive_a_json_round_trip():
    box = Box(3, 3)
    g = next(iter(generate(box, 1, seed=26, unique=True)))
    meta = json.loads(format_meta(g))
    assert set(meta) >= {"clues", "unique", "minimal", "reached", "level", "singles", "guesses", "nodes"}
    assert meta["clues"] == g.clues and meta["level"] in LEVEL_NAMES
    opts = Options(unique=True, clues=30, symmetry="mirror", difficulty="hard")
    assert Options(**json.loads(json.dumps(opts.to_dict()))) == opts


@pytest.mark.parametrize(("shape", "holes"), [((3, 3), 0.6), ((2, 3), 0.0), ((3, 4), 1.0), ((6, 6), 0.55)])
def test_holes_blank_that_fraction_of_a_valid_full_grid_and_the_seed_reproduces_them(shape, holes):
    box = Box(*shape)
    runs = [list(generate(box, 3, seed=s, holes=holes)) for s in (40, 40, 41)]
    assert_valid(box, runs[0])
    blanks = round(holes * box.cells)
    for g in runs[0]:
        assert int((g.puzzle == 0).sum()) == blanks and g.clues == box.cells - blanks and g.reached
        assert np.all((g.puzzle == 0) | (g.puzzle == g.solution))  # every given is the grid's own value
    assert [g.puzzle.tobytes() for g in runs[0]] == [g.puzzle.tobytes() for g in runs[1]]
    if 0 < holes < 1:
        assert [g.puzzle.tobytes() for g in runs[0]] != [g.puzzle.tobytes() for g in runs[2]]


def test_holes_with_unique_dig_to_the_same_target_and_conflicting_targets_are_refused():
    box = Box(3, 3)
    items = list(generate(box, 4, seed=42, holes=0.6, unique=True))
    assert_valid(box, items)
    assert all(g.unique and (g.clues == 32) == g.reached for g in items)
    for kwargs in ({"clues": 30}, {"minimal": True}):
        with pytest.raises(ValueError, match="holes or for a clue count"):
            generate(box, 1, seed=1, holes=0.5, **kwargs)
    with pytest.raises(ValueError, match="a fraction of the cells"):
        generate(box, 1, seed=1, holes=1.5)
    assert "holes" not in Options().to_dict()  # workers that predate holes still take other requests
    assert Options(**Options(holes=0.5).to_dict()).holes == 0.5
