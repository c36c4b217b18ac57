"""The default exact solver `propagation`: correct solutions and counts on real and
generated puzzles of every box shape, and the contract's limits (time, deadline, nodes,
stop flag, seeds), for both of its kernels (the 9x9 band kernel and the generic one).

Tests reading the shared corpora skip when those files are missing.
"""

from __future__ import annotations

import functools
import re
import threading
import time
from pathlib import Path

import numba
import numpy as np
import pytest

from solvers.exact import propagation, propagation9
from solvers.exact.base import EXACT_SOLVERS, KernelSolver
from solvers.exact.propagation import generic_kernel, tables
from solvers.exact.propagation16 import build_nconf16, build_perm16, kernel16
from solvers.kernel.outcome import BUDGET, DONE, LIMIT, STOPPED, TIMEOUT
from solvers.model.parse import parse_compact_batch, parse_puzzle
from solvers.model.puzzle import Box, Puzzle
from solvers.model.verify import is_solution, verify_batch
from tests.conftest import corpus_file
from tests.grids import blank, pattern_grid

SOLVER = EXACT_SOLVERS["propagation"]
GENERIC = KernelSolver("generic", generic_kernel, tables)  # the generic kernel, also for 9x9
PERM16, NCONF16 = build_perm16(), build_nconf16()
# the 16x16 band kernel alone, without the hand-off to the generic kernel
BAND16 = KernelSolver("band16", lambda *t_and_args: kernel16(PERM16, NCONF16, *t_and_args[5:]), tables)
SIXTEEN = Box(4, 4)
NINE = Box(3, 3)
# A 9x9 puzzle with a unique solution that needs guessing ("AI Escargot").
ESCARGOT = "1....7.9..3..2...8..96..5....53..9...1..8...26....4...3......1..4......7..7...3.."
# Consistent givens (no unit repeats a value) and yet no solution: r1c9 can only be 9,
# and column 9 already has a 9.
DEAD_END = "12345678." + "." * 35 + "9" + "." * 36
CONFORMANCE = Path(__file__).parent / "data" / "conformance.txt"


def corpus(name: str) -> Path:
    return corpus_file(name)


def read(name: str, box: Box = NINE) -> tuple[list[str], np.ndarray]:
    lines = [ln.strip() for ln in corpus(name).read_text().splitlines() if ln.strip()]
    givens, ok = parse_compact_batch(lines, box)
    assert ok.all()
    return lines, givens


def one(text: str, box: Box = NINE) -> np.ndarray:
    return parse_puzzle(text, box).givens[None, :]


@pytest.mark.parametrize("solver", [SOLVER, GENERIC], ids=["band", "generic"])
def test_it_solves_every_puzzle_of_norvig_top95_with_a_verified_grid(solver: KernelSolver) -> None:
    lines, givens = read("9x9/norvig_top95.txt")
    out = solver.solve_batch(givens, NINE)
    assert (out.status == LIMIT).all() and (out.counts == 1).all()
    for g, grid in zip(givens, out.solutions[:, 0], strict=True):
        assert is_solution(Puzzle(NINE, g), grid)


@pytest.mark.parametrize("solver", [SOLVER, GENERIC], ids=["band", "generic"])
@pytest.mark.parametrize("limit", [1, 2, 20, 1000])
def test_it_counts_tdokus_test_puzzles_up_to_the_limit(solver: KernelSolver, limit: int) -> None:
    _, givens = read("9x9/tdoku_test_puzzles.txt")
    rows = corpus("9x9/tdoku_test_puzzles.expected.tsv").read_text().splitlines()[1:]
    expected = np.array([int(r.split("\t")[0]) for r in rows])
    keep = min(limit, 5)
    out = solver.solve_batch(givens, NINE, limit=limit, keep=keep)
    assert (out.counts == np.minimum(expected, limit)).all()
    assert (out.status == np.where(expected >= limit, LIMIT, DONE)).all()
    for i in range(len(givens)):
        kept = out.solutions[i, : min(int(out.counts[i]), keep)]
        assert verify_batch(np.repeat(givens[i : i + 1], len(kept), 0), kept, 3, 3).all()
        assert len({k.tobytes() for k in kept}) == len(kept)


def test_the_band_kernel_and_the_generic_kernel_agree_on_counts_and_unique_solutions() -> None:
    grid = pattern_grid(NINE)
    givens = np.stack([blank(grid, f, s) for f in (0.55, 0.6, 0.65) for s in range(8)] + [one(ESCARGOT)[0]])
    band = SOLVER.solve_batch(givens, NINE, limit=200, keep=1)
    generic = GENERIC.solve_batch(givens, NINE, limit=200, keep=1)
    assert (band.counts == generic.counts).all() and (band.status == generic.status).all()
    unique = band.counts == 1
    assert (band.solutions[unique] == generic.solutions[unique]).all()


@pytest.mark.parametrize("solver", [SOLVER, GENERIC], ids=["band", "generic"])
def test_consistent_givens_without_a_solution_come_back_done_with_zero(solver: KernelSolver) -> None:
    out = solver.solve_batch(one(DEAD_END), NINE, limit=2)
    assert out.status[0] == DONE and out.counts[0] == 0


@pytest.mark.parametrize("solver", [SOLVER, GENERIC], ids=["band", "generic"])
def test_tdokus_unsolvable_test_puzzles_are_proven_unsolvable_by_search(solver: KernelSolver) -> None:
    _, givens = read("9x9/tdoku_test_puzzles.txt")
    rows = corpus("9x9/tdoku_test_puzzles.expected.tsv").read_text().splitlines()[1:]
    dead = givens[[int(r.split("\t")[0]) == 0 for r in rows]]
    out = solver.solve_batch(dead, NINE, limit=1)
    assert len(dead) == 10 and (out.status == DONE).all() and (out.counts == 0).all()


@pytest.mark.parametrize("box", [Box(2, 3), Box(3, 4), Box(4, 4)], ids=str)
def test_unsolvable_puzzles_of_other_shapes_come_back_done_with_zero(box: Box) -> None:
    n = box.n
    givens = np.zeros((1, box.cells), dtype=np.uint8)
    givens[0, : n - 1] = np.arange(1, n)  # row 1 holds 1..N-1: its last cell must be N ...
    givens[0, (n // 2) * n + n - 1] = n  # ... but column N already has N, in another box
    out = SOLVER.solve_batch(givens, box, limit=2)
    assert out.status[0] == DONE and out.counts[0] == 0


def test_a_hard_25x25_puzzle_returns_timeout_within_half_a_second_under_a_0_2_s_limit() -> None:
    with corpus("25x25/gecode_frisch_25x25.txt").open() as f:
        givens = one(f.readline().strip(), Box(5, 5))
    SOLVER.solve_batch(givens, Box(5, 5), max_nodes=1)  # compile or load outside the timing
    t0 = time.process_time()  # the work done, not wall time (a loaded machine stretches wall time)
    out = SOLVER.solve_batch(givens, Box(5, 5), time_limit=0.2)
    assert out.status[0] == TIMEOUT and time.process_time() - t0 < 0.5
    assert 0.2e9 <= out.ns[0] < 0.5e9 and out.nodes[0] > 1


@pytest.mark.parametrize("box", [NINE, Box(4, 4)], ids=str)
def test_a_passed_batch_deadline_times_out_every_puzzle_without_searching(box: Box) -> None:
    out = SOLVER.solve_batch(np.zeros((3, box.cells), np.uint8), box, deadline_ns=time.monotonic_ns() - 1)
    assert (out.status == TIMEOUT).all() and (out.nodes == 0).all() and (out.counts == 0).all()


@pytest.mark.parametrize(("box", "limit"), [(NINE, 2**62), (Box(3, 4), 2**62)], ids=["9x9", "12x12"])
def test_counting_every_solution_of_an_empty_grid_stops_at_the_time_limit(box: Box, limit: int) -> None:
    t0 = time.process_time()
    out = SOLVER.solve_batch(np.zeros((1, box.cells), np.uint8), box, limit=limit, keep=1, time_limit=0.2)
    assert out.status[0] == TIMEOUT and out.counts[0] > 0 and time.process_time() - t0 < 0.5


@pytest.mark.parametrize("solver", [SOLVER, GENERIC], ids=["band", "generic"])
def test_a_node_budget_ends_the_search_with_budget(solver: KernelSolver) -> None:
    full = solver.solve_batch(one(ESCARGOT), NINE, limit=2)
    assert full.status[0] == DONE and full.counts[0] == 1 and full.nodes[0] > 3
    out = solver.solve_batch(one(ESCARGOT), NINE, limit=2, max_nodes=3)
    assert out.status[0] == BUDGET and out.nodes[0] == 3


@pytest.mark.parametrize("box", [NINE, Box(3, 4)], ids=str)
def test_a_stop_flag_raised_before_or_during_the_batch_ends_it_with_stopped(box: Box) -> None:
    givens = np.zeros((4, box.cells), np.uint8)
    out = SOLVER.solve_batch(givens, box, stop=np.ones(1, np.int64))
    assert (out.status == STOPPED).all() and (out.nodes == 0).all()
    stop = np.zeros(1, np.int64)
    threading.Timer(0.1, stop.__setitem__, (0, 1)).start()
    t0 = time.process_time()
    out = SOLVER.solve_batch(givens, box, limit=2**62, stop=stop)  # counting never ends alone
    assert (out.status == STOPPED).all() and time.process_time() - t0 < 1.0


@pytest.mark.parametrize("box", [NINE, Box(4, 4), Box(5, 5)], ids=str)
def test_seeded_branching_finds_valid_solutions_and_repeats_itself_for_a_seed(box: Box) -> None:
    fraction = 0.7 if box.n < 25 else 0.4
    grids = [blank(pattern_grid(box), fraction, s) for s in range(3)]
    givens = np.stack([*grids, np.zeros(box.cells, np.uint8)])
    found = set()
    for seed in (1, 2, 3, 99):
        a = SOLVER.solve_batch(givens, box, seed=seed)
        b = SOLVER.solve_batch(givens, box, seed=seed)
        assert (a.solutions == b.solutions).all() and (a.nodes == b.nodes).all()
        assert verify_batch(givens, a.solutions[:, 0], box.rows, box.cols).all()
        found.add(a.solutions[-1, 0].tobytes())
    assert len(found) > 1  # an empty grid: different seeds, different solutions


SIDES = [(2, 2), (2, 3), (3, 2), (2, 4), (3, 4), (4, 3), (4, 4), (5, 5), (4, 6), (6, 6)]
SHAPES = [Box(r, c) for r, c in SIDES]


@pytest.mark.parametrize("box", SHAPES, ids=str)
def test_it_solves_and_counts_generated_puzzles_of_every_box_shape(box: Box) -> None:
    grid = pattern_grid(box)
    fractions = (0.3, 0.5) if box.n < 36 else (0.2, 0.3)  # half-empty 36x36 grids are hard
    givens = np.stack([blank(grid, f, s) for f in fractions for s in range(2)] + [grid])
    out = SOLVER.solve_batch(givens, box, limit=2, keep=2, time_limit=5.0)
    assert (out.counts >= 1).all() and (out.status != TIMEOUT).all()
    for i in range(len(givens)):
        kept = out.solutions[i, : int(out.counts[i])]
        assert verify_batch(np.repeat(givens[i : i + 1], len(kept), 0), kept, box.rows, box.cols).all()
    assert out.counts[-1] == 1 and out.status[-1] == DONE  # a full grid is its own only solution


@pytest.mark.parametrize("box", [Box(7, 7), Box(8, 8)], ids=str)
def test_it_solves_grids_up_to_64x64(box: Box) -> None:
    givens = blank(pattern_grid(box), 0.3, 7)[None, :]
    out = SOLVER.solve_batch(givens, box, time_limit=10.0)
    assert out.status[0] == LIMIT
    assert is_solution(Puzzle(box, givens[0]), out.solutions[0, 0])


def test_the_search_stack_grows_past_its_first_capacity() -> None:
    box = Box(4, 4)
    out = SOLVER.solve_batch(np.zeros((1, box.cells), np.uint8), box, limit=3, keep=3)
    assert out.status[0] == LIMIT and out.guesses[0] > 16
    assert verify_batch(np.zeros((3, box.cells), np.uint8), out.solutions[0], 4, 4).all()


def test_counters_report_nodes_guesses_and_time_per_puzzle() -> None:
    out = SOLVER.solve_batch(np.stack([one(ESCARGOT)[0], pattern_grid(NINE)]), NINE)
    assert out.guesses[0] > 0 and out.nodes[0] >= out.guesses[0] + 1 and (out.ns > 0).all()
    assert out.nodes[1] == 1 and out.guesses[1] == 0


# Singles and locked candidates leave this 17-clue puzzle open; the triads (a minirow holds
# exactly three digits) solve it without a guess (line 64 of Royle's 17-clue list).
TRIAD_ROOT = ".................1....23.4......4.5...1....2..67.........1....75....8...9.....8.6"


def test_the_band_kernel_solves_a_puzzle_at_the_root_that_singles_and_locked_candidates_leave_open() -> None:
    out = SOLVER.solve_batch(one(TRIAD_ROOT), NINE, max_nodes=1)  # the root's propagation only
    assert out.status[0] == LIMIT and out.counts[0] == 1 and out.guesses[0] == 0
    assert is_solution(parse_puzzle(TRIAD_ROOT, NINE), out.solutions[0, 0])


def test_the_band_kernel_guesses_about_a_third_of_what_cell_branching_did_on_the_conformance_puzzles() -> (
    None
):
    rows = [ln.split("\t") for ln in CONFORMANCE.read_text().splitlines() if ln and not ln.startswith("#")]
    unique = [r[1] for r in rows if r[0] == "3x3" and r[2] == "1"]
    givens, ok = parse_compact_batch(unique, NINE)
    out = SOLVER.solve_batch(givens, NINE)
    assert ok.all() and (out.counts == 1).all()
    # branching on the configurations of a digit in a band, with triads: 527 guesses; singles,
    # locked candidates and branching on a cell with the fewest candidates took 1496
    assert out.guesses.sum() <= 700


def conformance_puzzles(box: str) -> list[str]:
    rows = [ln.split("\t") for ln in CONFORMANCE.read_text().splitlines() if ln and not ln.startswith("#")]
    return [r[1] for r in rows if r[0] == box]


def sixteen_by_sixteen_puzzles() -> np.ndarray:
    """The conformance file's 16x16 puzzles and generated ones from a third to all of the cells blank."""
    givens, ok = parse_compact_batch(conformance_puzzles("4x4"), SIXTEEN)
    grid = pattern_grid(SIXTEEN)
    made = [blank(grid, f, s) for f in (0.35, 0.5, 0.65, 0.8, 1.0) for s in range(3)]
    assert ok.all()
    return np.concatenate([givens, np.stack(made)])


def test_the_16x16_band_kernel_counts_what_the_generic_kernel_counts() -> None:
    givens = sixteen_by_sixteen_puzzles()
    band = BAND16.solve_batch(givens, SIXTEEN, limit=3, keep=3, time_limit=5.0)
    generic = GENERIC.solve_batch(givens, SIXTEEN, limit=3, keep=3, time_limit=5.0)
    assert (band.status != TIMEOUT).all() and (band.counts == generic.counts).all()
    for i in range(len(givens)):
        kept = band.solutions[i, : int(band.counts[i])]
        assert verify_batch(np.repeat(givens[i : i + 1], len(kept), 0), kept, 4, 4).all()
        assert len({g.tobytes() for g in kept}) == len(kept)  # distinct solutions


def test_a_16x16_puzzle_the_band_kernel_leaves_open_is_finished_by_the_generic_kernel(monkeypatch) -> None:
    givens = sixteen_by_sixteen_puzzles()
    alone = BAND16.solve_batch(givens, SIXTEEN, limit=2, keep=2)
    monkeypatch.setattr(propagation, "HANDOFF_NODES", 3)
    out = SOLVER.solve_batch(givens, SIXTEEN, limit=2, keep=2)
    handed = alone.nodes > 3
    assert handed.sum() >= 3 and (out.counts == alone.counts).all()
    assert (out.nodes[handed] > 3).all() and (out.nodes[~handed] == alone.nodes[~handed]).all()
    for i in np.flatnonzero(handed):
        kept = out.solutions[i, : int(out.counts[i])]
        assert verify_batch(np.repeat(givens[i : i + 1], len(kept), 0), kept, 4, 4).all()
    stop = np.ones(1, dtype=np.int64)
    assert (SOLVER.solve_batch(givens, SIXTEEN, stop=stop).status == STOPPED).all()


def test_a_16x16_node_budget_below_the_hand_off_is_the_callers() -> None:
    givens = sixteen_by_sixteen_puzzles()
    out = SOLVER.solve_batch(givens, SIXTEEN, limit=2, max_nodes=2)
    assert (out.nodes <= 2).all() and (out.status == BUDGET).any()


@functools.cache
def band_kernel_blocks(box: Box) -> tuple[list[str], ...]:
    """The basic blocks (lines of LLVM IR) of the band kernel for `box`, compiled afresh: numba keeps no IR
    for cached code, and a kernel's speed per node depends on what its compile inlined and counted."""
    kernel = kernel16 if box == SIXTEEN else propagation9.kernel9
    (BAND16 if box == SIXTEEN else SOLVER).solve_batch(one(ESCARGOT) if box == NINE else blank_sixteen(), box)
    signature = kernel.signatures[0]
    fresh = numba.njit(nogil=True)(kernel.py_func)
    fresh.compile(signature)
    lines = fresh.inspect_llvm(signature).splitlines()
    start = next(
        k for k, ln in enumerate(lines) if ln.startswith("define") and callee(ln) == f"kernel{box.n}"
    )
    blocks: list[list[str]] = [[]]
    for ln in lines[start + 1 : lines.index("}", start)]:
        if re.match(r"^[\w.]+:", ln):
            blocks.append([])
        blocks[-1].append(ln)
    return tuple(b for b in blocks if b)


def callee(line: str) -> str:
    """The project function a line of LLVM IR defines or calls (the last part of its mangled name), or ''."""
    found = re.search(r"@_ZN7solvers(\d+\w+)", line)
    name, rest = "", found.group(1) if found else ""
    while (part := re.match(r"(\d+)", rest)) is not None:
        size = int(part.group(1))
        name, rest = rest[len(part.group(1)) : len(part.group(1)) + size], rest[len(part.group(1)) + size :]
    return name


def blank_sixteen() -> np.ndarray:
    return blank(pattern_grid(SIXTEEN), 0.5, 0)[None, :]


@pytest.mark.slow
@pytest.mark.parametrize("box", [NINE, SIXTEEN], ids=str)
def test_the_band_kernels_count_array_references_only_on_entry_not_per_node(box: Box) -> None:
    blocks = band_kernel_blocks(box)
    inside = [ln.strip() for b in blocks[1:] for ln in b if "@NRT_incref(" in ln]
    assert inside == []


@pytest.mark.slow
def test_the_16x16_band_kernel_calls_no_helper_but_the_stack_update_the_row_expansion_and_pick_mask() -> None:
    called = {callee(ln) for b in band_kernel_blocks(SIXTEEN) for ln in b if " call " in ln} - {""}
    assert called <= {"_stack_update", "_expand", "pick_mask"}, called


@pytest.mark.parametrize("box", [NINE, Box(2, 3), Box(4, 4)], ids=str)
def test_clashing_or_out_of_range_givens_come_back_done_with_zero(box: Box) -> None:
    clash = np.zeros(box.cells, np.uint8)
    clash[0] = clash[1] = 1  # the parser refuses these; the kernel must not trust it
    wild = np.zeros(box.cells, np.uint8)
    wild[5] = box.n + 1
    out = SOLVER.solve_batch(np.stack([clash, wild]), box, limit=2)
    assert (out.status == DONE).all() and (out.counts == 0).all()


def _supported(doms: list[int], n: int) -> tuple[list[int], bool]:
    """Brute force over every permutation: per variable, the values some assignment of
    distinct values within the domains gives it; and whether any assignment exists."""
    from itertools import permutations

    keep = [0] * len(doms)
    found = False
    for perm in permutations(range(n), len(doms)):
        if all(doms[j] >> v & 1 for j, v in enumerate(perm)):
            found = True
            for j, v in enumerate(perm):
                keep[j] |= 1 << v
    return keep, found


def test_gac_keeps_exactly_the_values_some_perfect_matching_uses() -> None:
    from solvers.exact.propagation_rules import _gac

    rng = np.random.default_rng(4)
    wi = np.empty((4, 64), np.int64)
    wv = np.empty((4, 64), np.uint64)
    checked = {"pruned": 0, "dead": 0}
    for _ in range(400):
        p = int(rng.integers(3, 7))
        doms = [int(rng.integers(1, 1 << p)) | (1 << int(rng.integers(p))) for _ in range(p)]
        doms = [d if d & (d - 1) else d | (1 << ((d.bit_length()) % p)) for d in doms]
        wv[0, :p] = np.array(doms, np.uint64)
        k = _gac(p, p, wi, wv)
        keep, found = _supported(doms, p)
        if not found:
            assert k == -1
            checked["dead"] += 1
            continue
        assert k >= 0
        for j in range(p):
            assert int(wv[3, j]) == doms[j] & ~keep[j] if k else doms[j] == keep[j]
        checked["pruned"] += k > 0
    assert checked["pruned"] > 20 and checked["dead"] > 20  # both outcomes were exercised


def test_fish_removes_a_value_from_exactly_the_places_no_row_to_column_matching_uses() -> None:
    from solvers.exact.propagation_rules import _fish

    n = 6  # the rule is about rows and columns only: any side works, 6 keeps brute force small
    rng = np.random.default_rng(9)
    wi = np.empty((4, 64), np.int64)
    wv = np.empty((4, 64), np.uint64)
    elim = np.zeros(n * n, np.uint64)
    ecell = np.empty(n * n, np.int32)
    pruned = 0
    for _ in range(300):
        v = int(rng.integers(n))
        cand = np.full(n * n, (1 << n) - 1, np.uint64)
        doms = []
        for row in range(n):  # at least two places of v in every row
            d = int(rng.integers(0, 1 << n)) | (1 << int(rng.integers(n)))
            d |= 1 << ((d.bit_length()) % n) if not d & (d - 1) else 0
            d = d if d & (d - 1) else d | 1 | 2
            doms.append(d)
            for col in range(n):
                if not d >> col & 1:
                    cand[row * n + col] &= ~np.uint64(1 << v)
        keep, found = _supported(doms, n)
        ne = _fish(v, n, cand, elim, ecell, 0, wi, wv)
        if not found:
            assert ne == -1
            continue
        removed = {int(ecell[k]) for k in range(ne)}
        for x in removed:
            assert int(elim[x]) == 1 << v
            elim[x] = 0
        expect = {
            row * n + col
            for row in range(n)
            for col in range(n)
            if doms[row] >> col & 1 and not keep[row] >> col & 1
        }
        assert removed == expect
        pruned += bool(expect)
    assert pruned > 20


def test_an_x_wing_leaves_the_other_rows_of_its_two_columns() -> None:
    from solvers.exact.propagation_rules import _fish

    n = 25
    v = 4
    vb = np.uint64(1 << v)
    cand = np.full(n * n, (1 << n) - 1, np.uint64)
    for row in (2, 11):  # value 5 (bit 4) only in columns 3 and 17 of rows 2 and 11
        for col in range(n):
            if col not in (3, 17):
                cand[row * n + col] &= ~vb
    elim = np.zeros(n * n, np.uint64)
    ecell = np.empty(n * n, np.int32)
    ne = _fish(v, n, cand, elim, ecell, 0, np.empty((4, 64), np.int64), np.empty((4, 64), np.uint64))
    assert sorted(int(x) for x in ecell[:ne]) == sorted(
        row * n + col for row in range(n) for col in (3, 17) if row not in (2, 11)
    )
    assert all(int(elim[x]) == 1 << v for x in ecell[:ne])


def test_25x25_puzzles_keep_every_solution_under_all_different_and_fish_pruning() -> None:
    # every 10th acs 25x25 puzzle from the 126th: unique ones (one solution, proven by
    # the search) and ones with several; an over-eager pruning rule loses solutions
    box = Box(5, 5)
    _, givens = read("25x25/sudoku_acs_general_25x25.txt", box)
    sample = givens[::10][125:165]
    out = SOLVER.solve_batch(sample, box, limit=2, keep=2)
    assert (out.status != TIMEOUT).all() and (out.counts >= 1).all()
    assert 10 <= (out.counts == 1).sum() < len(sample)  # the sample has both kinds
    for i in range(len(sample)):
        grids = [out.solutions[i, k] for k in range(out.counts[i])]
        assert all(is_solution(Puzzle(box, sample[i]), g) for g in grids)
        assert len({g.tobytes() for g in grids}) == len(grids)
