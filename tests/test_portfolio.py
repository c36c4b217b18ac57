"""The racing portfolio: fast path, interleaving, stop rules, deadline and replay."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from solvers.api import solve_many
from solvers.exact import EXACT_SOLVERS
from solvers.exact.propagation import RESTART_UNIT
from solvers.kernel.clock import monotonic_ns
from solvers.kernel.outcome import BUDGET, DONE
from solvers.model.cost import grid_cost
from solvers.model.parse import parse_puzzle
from solvers.model.verify import is_solution
from solvers.race.members import FOUND, ExactMember, StochasticMember, luby
from solvers.race.portfolio import PRESETS, SAT_MEMBERS, MemberSpec, PortfolioSpec, parse_portfolio, race
from solvers.shares import learned_shares
from solvers.stochastic import STOCHASTIC_SOLVERS

DEMO = "..62...8...897......481.5......6...2.7.....3.6...5......2.471....3.284...5...12.."
HARD = "4.....8.5.3..........7......2.....6.....8.4......1.......6.3.7.5..2.....1.4......"
NO_SOLUTION = ".2....7..4....9.3.6..723.4...83.........1....9....4.6..94....5.5.....6.3.....5..."  # tdoku
# Alain Frisch's first minimal 25x25 puzzle (gecode examples): no member solves it in a second.
FRISCH = (
    "...G...9..4.....6F..L8...CEIN.HDM.OF.1L..A..9PJ.4......A...L..JBN.2.D.1...HP49...JB23.AD..7E..C5F..."
    "A1H....F.N5....I.BL...26.....7..C.6...H4B..1....I5.F.P...I..B..7.5.L...9....L6A...5OF.8P...K.NE..734"
    "B2.E..L...1J.5....O7.K.APO.5.CB1.P....3EM....2L.H.2..MJ.A...9.3.7......P.8C.....CF.DPG62N.E...OH.M.J"
    ".DL..OM..IE.B8..NH...3..K.CO1F.B.N.AH..P.78.JE...DE..6.....H......4M.KIB9..N.J..6......C..1.5.G..H.."
    "...75LG...6..1..CI..4.E..9K..6.....HGN.O2P.4.......OA..IP849...2.K3...7GN....G....N...P.D9....A...C1"
    "J...M.NAFE.4..23.7....8L......J.H9CD1LP..GO....4ME48NK..5.M......JL.......9.I.OG....835.A.DH..P....."
    "35......L.J..E....8IG.67B"
)
STOCHASTIC = ("annealing", "evolution", "progressive")
# The race with its own weights, not the learned shares (there the stochastic members' 0.2% shares
# first run after ~1.5 s of the others' work): every member takes part within a second.
OWN_WEIGHTS = PortfolioSpec(name="race, own weights", members=PRESETS["race"].members)
# ... and the stochastic members weighing 20 (not 1): they first run within ~0.3 s of work (evolution
# after its start-up's worth, charged up front), not ~0.85 s (evolution: ~5 s),
# so a 1.5 s deadline sees every member run even on a loaded machine (at load 5 the race got 0.67 s CPU);
# no endgame (its own test below): every member's turn comes within the limit, not within 90% of it.
EARLY_STOCHASTIC = PortfolioSpec(
    name="race, stochastic early",
    members=tuple(
        m.model_copy(update={"weight": 20.0}) if m.solver in STOCHASTIC else m for m in OWN_WEIGHTS.members
    ),
    endgame=0.0,
)


def grid_of(text: str) -> np.ndarray:
    """Decode a compact solution line into a grid."""
    alphabet = "123456789ABCDEFGHIJKLMNOP"
    return np.array([alphabet.index(ch) + 1 for ch in text], dtype=np.uint8)


@pytest.fixture(scope="module", autouse=True)
def compiled() -> None:
    """Load every kernel once (numba's cache or a compile) so timings measure solving."""
    race(parse_puzzle(FRISCH), "race", time_limit=0.05)
    race(parse_puzzle(HARD), "race", time_limit=0.05)


def test_the_luby_sequence_starts_as_published():
    assert [luby(i) for i in range(1, 16)] == [1, 1, 2, 1, 1, 2, 4, 1, 1, 2, 1, 1, 2, 4, 8]


def test_presets_and_comma_lists_become_portfolios_and_unknown_names_are_named():
    assert [m.solver for m in PRESETS["race"].members] == [
        "propagation",
        "sat",
        "sat-rows",
        "sat-plain",
        "sat-plain-fewest",
        "sat-plain-false",
        "sat-rows-false",
        *STOCHASTIC,
    ]
    assert [m.solver for m in PRESETS["fast"].members] == ["propagation"]
    assert {m.solver for m in PRESETS["exact"].members} == set(EXACT_SOLVERS)
    assert [m.solver for m in parse_portfolio("propagation, annealing").members] == [
        "propagation",
        "annealing",
    ]
    with pytest.raises(ValueError, match="'anneal'.*annealing"):
        parse_portfolio("propagation,anneal")
    with pytest.raises(ValueError, match="'nope'"):
        solve_many([DEMO], portfolio="nope")


def test_the_fast_path_solves_easy_puzzles_with_exactly_the_plain_solvers_work():
    lines = [DEMO, HARD, NO_SOLUTION] * 3
    fast = solve_many(lines, portfolio="fast")
    raced = solve_many(lines, portfolio="race", time_limit=5)
    assert [r.status for r in raced] == [r.status for r in fast] == ["solved", "solved", "unsolvable"] * 3
    assert [r.solution for r in raced] == [r.solution for r in fast]
    assert [r.nodes for r in raced] == [r.nodes for r in fast]
    assert all(list(r.counters) == ["propagation"] for r in raced)


def test_members_progress_in_turn_and_the_deadline_yields_the_best_grid_at_its_true_cost():
    puzzle = parse_puzzle(FRISCH)
    trace: list[tuple[str, str, int]] = []
    t0 = monotonic_ns()
    r = race(puzzle, EARLY_STOCHASTIC, time_limit=1.5, seed=1, trace=trace)
    late_ms = (monotonic_ns() - t0) / 1e6 - 1500
    assert late_ms < 100  # the deadline is honoured within 100 ms
    assert r.status == "approximate" and r.solver in STOCHASTIC
    assert r.cost == grid_cost(puzzle, grid_of(r.solution)) == r.counters[r.solver]["best_cost"] > 0
    assert r.cost == min(c["best_cost"] for c in r.counters.values() if c["best_cost"] is not None)
    order = [name for name, _, _ in trace]
    assert set(order) == {"propagation", "sat", *SAT_MEMBERS, *STOCHASTIC}
    assert order.index("annealing") < len(order) - order[::-1].index("sat") - 1  # interleaved
    for c in r.counters.values():
        assert c["time_ms"] > 0 and c["work"] > 0  # a SAT member may be loading: no decision yet


@pytest.mark.parametrize("portfolio", ["stochastic", "exact", "propagation,annealing"])
def test_every_portfolio_stops_at_its_deadline_within_100_ms(portfolio):
    t0 = time.process_time()  # the work done, not wall time (a loaded machine stretches wall time)
    r = race(parse_puzzle(FRISCH), portfolio, time_limit=0.3, seed=2)
    assert time.process_time() - t0 < 0.4
    assert r.status in ("approximate", "timeout")
    assert (r.status == "timeout") == (portfolio == "exact")  # exact solvers hold no full grid


def test_the_first_verified_solution_wins_and_no_loser_runs_after_it():
    trace: list[tuple[str, str, int]] = []
    r = race(parse_puzzle(DEMO), "annealing,evolution,progressive", time_limit=20, seed=1, trace=trace)
    returned = monotonic_ns()
    assert r.status == "solved" and is_solution(parse_puzzle(DEMO), grid_of(r.solution))
    winner, outcome, won_at = trace[-1]
    assert (winner, outcome) == (r.solver, FOUND)
    assert sum(1 for name, out, _ in trace if out == FOUND) == 1
    assert (returned - won_at) / 1e6 < 50
    assert r.counters[r.solver]["time_to_solution_ms"] > 0


def test_a_stop_raised_by_another_thread_ends_the_race_within_50_ms():
    stop = np.zeros(1, dtype=np.int64)
    box: dict[str, object] = {}

    trace: list[tuple[str, str, int]] = []

    def run() -> None:
        box["result"] = race(parse_puzzle(FRISCH), EARLY_STOCHASTIC, time_limit=30, stop=stop, trace=trace)
        box["ended"] = monotonic_ns()

    thread = threading.Thread(target=run)
    thread.start()
    waited = time.monotonic() + 20  # with these weights the stochastic members first run after ~0.3 s of
    while not {name for name, _, _ in trace} >= set(STOCHASTIC) and time.monotonic() < waited:  # work:
        time.sleep(0.02)  # wait for their grids (a wall-clock sleep gave a loaded machine too little CPU)
    raised = monotonic_ns()
    stop[0] = 1
    thread.join(5)
    assert not thread.is_alive()
    assert (box["ended"] - raised) / 1e6 < 50  # type: ignore[operator]
    assert box["result"].status == "approximate"  # type: ignore[attr-defined]


def test_an_exact_proof_of_no_solution_ends_the_race_as_unsolvable():
    spec = PortfolioSpec(name="t", members=PRESETS["race"].members, fast_nodes=1)  # no fast-path win
    trace: list[tuple[str, str, int]] = []
    r = race(parse_puzzle(NO_SOLUTION), spec, time_limit=20, seed=4, trace=trace)
    assert r.status == "unsolvable" and r.solver == "propagation" and r.solution is None
    assert [name for name, _, _ in trace].count("propagation") >= 2  # the race was on after the fast path
    assert r.elapsed < 5


def test_the_exact_member_doubles_its_complete_run_and_restarts_on_luby_budgets():
    member = ExactMember(  # a kernel that cannot resume: the doubling stream
        EXACT_SOLVERS["backtracking"],
        parse_puzzle(FRISCH),
        np.random.SeedSequence(0),
        first_budget=64,
        restart_base=16,
    )
    stop = np.zeros(1, dtype=np.int64)
    for _ in range(12):
        member.step(0, stop)
    complete = [budget for stream, budget, _ in member.calls if stream == "complete"]
    random = [budget for stream, budget, _ in member.calls if stream == "random"]
    assert complete == [64 * 2**k for k in range(len(complete))]
    assert random == [16 * luby(i) for i in range(1, len(random) + 1)]
    assert member.counters()["restarts"] == 11 and member.counters()["nodes"] == sum(
        n for *_, n in member.calls
    )


def test_a_resumed_search_runs_one_luby_restart_per_call_and_keeps_its_weights():
    solver, puzzle = EXACT_SOLVERS["propagation"], parse_puzzle(FRISCH)
    carry = solver.new_carry(puzzle.box)
    nodes = []
    for k in range(1, 6):
        out = solver.solve_batch(puzzle.givens[None, :], puzzle.box, carry=carry)
        assert out.status[0] == BUDGET and out.counts[0] == 0 and carry[0] == k
        nodes.append(int(out.nodes[0]))
    assert nodes == [RESTART_UNIT * luby(k) + 1 for k in range(1, 6)]  # each run's nodes and its root
    assert carry[2] == sum(nodes) and carry[3:].min() >= 1 and carry[3:].max() > 1  # weights learned


def test_a_resumed_search_solves_a_solvable_puzzle_and_proves_an_unsolvable_one():
    solver = EXACT_SOLVERS["propagation"]
    easy = parse_puzzle("1.3434.22.4.4.2.")
    none = parse_puzzle(".23..1..4.......")  # consistent givens; the top left cell has no value left
    out = solver.solve_batch(easy.givens[None, :], easy.box, carry=solver.new_carry(easy.box))
    assert out.counts[0] == 1 and is_solution(easy, out.solutions[0, 0])
    out = solver.solve_batch(none.givens[None, :], none.box, carry=solver.new_carry(none.box))
    assert out.counts[0] == 0 and out.status[0] == DONE


def test_a_carry_is_refused_for_the_9x9_band_kernel_and_for_batches():
    solver, hard, frisch = EXACT_SOLVERS["propagation"], parse_puzzle(HARD), parse_puzzle(FRISCH)
    with pytest.raises(ValueError, match="no carry"):
        solver.solve_batch(hard.givens[None, :], hard.box, carry=np.zeros(30, dtype=np.int64))
    with pytest.raises(ValueError, match="one puzzle"):
        two = np.stack([frisch.givens, frisch.givens])
        solver.solve_batch(two, frisch.box, carry=solver.new_carry(frisch.box))


def test_the_exact_member_resumes_one_search_where_its_kernel_can():
    member = ExactMember(EXACT_SOLVERS["propagation"], parse_puzzle(FRISCH), np.random.SeedSequence(0))
    stop = np.zeros(1, dtype=np.int64)
    for _ in range(6):
        member.step(0, stop)
    assert [stream for stream, *_ in member.calls] == ["complete"] * 6  # no separate random stream
    assert [n for *_, n in member.calls] == [RESTART_UNIT * luby(k) + 1 for k in range(1, 7)]
    assert len(member.carries) == 1 and member.carries[0][0] == 6


def test_an_exact_member_with_three_searches_gives_each_the_next_run_by_fewest_nodes():
    def member() -> ExactMember:
        return ExactMember(
            EXACT_SOLVERS["propagation"], parse_puzzle(FRISCH), np.random.SeedSequence(5), searches=3
        )

    stop = np.zeros(1, dtype=np.int64)
    one, again = member(), member()
    for _ in range(9):
        one.step(0, stop)
        again.step(0, stop)
    assert [int(c[0]) for c in one.carries] == [3, 3, 3]  # Luby runs 1-3 of each, in turn
    assert one.search_seeds[0] == 0 and len(set(one.search_seeds)) == 3  # the fixed order, two seeds
    assert len({c[3:].tobytes() for c in one.carries}) == 3  # three searches learned apart, not copies
    assert one.calls == again.calls and one.search_seeds == again.search_seeds  # replayable


def test_an_exact_member_with_several_searches_solves_and_proves_like_one():
    easy, none = parse_puzzle("1.3434.22.4.4.2."), parse_puzzle(".23..1..4.......")
    stop = np.zeros(1, dtype=np.int64)
    solver = EXACT_SOLVERS["propagation"]
    member = ExactMember(solver, easy, np.random.SeedSequence(0), searches=4)
    assert member.step(0, stop) == FOUND and is_solution(easy, member.best_grid)
    member = ExactMember(solver, none, np.random.SeedSequence(0), searches=4)
    member.step(0, stop)
    assert member.status == "unsolvable"


@pytest.mark.parametrize("portfolio", ["annealing,progressive", "race"])
def test_the_same_seed_replays_the_same_winner_and_grid(portfolio):
    spec = parse_portfolio(portfolio)
    spec = PortfolioSpec(name=spec.name, members=spec.members, fast_nodes=4)  # make them race
    runs = [race(parse_puzzle(HARD), spec, time_limit=30, seed=1) for _ in range(2)]
    assert runs[0].status == runs[1].status == "solved"
    assert (runs[0].solver, runs[0].solution) == (runs[1].solver, runs[1].solution)
    work = [
        {k: (c.get("nodes"), c.get("iterations"), c["restarts"]) for k, c in r.counters.items()} for r in runs
    ]
    assert work[0] == work[1]


def test_solve_many_races_only_the_puzzles_the_fast_path_leaves():
    frisch, demo = solve_many([FRISCH, DEMO], portfolio="race", time_limit=1.0)
    assert demo.status == "solved" and list(demo.counters) == ["propagation"]
    # from 25x25 the stochastic members' learned 0.2% shares first run after ~0.75 s of SAT work: maybe
    # an approximate grid by 1 s, never a solution
    learned = learned_shares(25) or {}
    assert frisch.status in ("timeout", "approximate") and set(frisch.counters) == {"propagation", *learned}
    assert frisch.counters["propagation"]["nodes"] >= PRESETS["race"].fast_budget(25)
    assert frisch.elapsed < 1.1


def test_member_specs_are_checked_as_data():
    with pytest.raises(ValueError):
        MemberSpec(solver="annealing", weight=0)
    spec = parse_portfolio("annealing,annealing")
    r = race(parse_puzzle(DEMO), spec, time_limit=10, seed=0)
    assert set(r.counters) == {"annealing", "annealing#2"}


def test_the_race_gives_the_exact_member_half_the_work_below_25x25_and_its_learned_shares_from_25x25():
    from solvers.race.portfolio import _build

    spec = PRESETS["race"]
    members = {m.name: m.weight for m in _build(spec, parse_puzzle(DEMO), seed=1)}
    assert members["propagation"] / sum(members.values()) == pytest.approx(0.5)
    assert set(members) == {"propagation", *STOCHASTIC}
    learned = learned_shares(25)
    assert learned is not None
    members = {m.name: m.weight for m in _build(spec, parse_puzzle(FRISCH), seed=1)}
    assert {k: w for k, w in members.items() if w > 0} == learned
    assert "propagation" in members  # it runs the fast path whatever its share


def test_a_stochastic_members_start_up_is_charged_before_its_first_slice_and_counted_once():
    from solvers.stochastic.evolution import start_work

    puzzle = parse_puzzle(FRISCH)
    solver = STOCHASTIC_SOLVERS["evolution"]
    params = solver.make_params({"propagate": True})
    member = StochasticMember(solver, puzzle, np.random.SeedSequence(3), params, weight=0.002)
    prepaid = start_work(puzzle, params) / solver.slice_work
    assert member.vtime == prepaid > 1  # a tiny share waits that long for its first slice
    member.step(0, np.zeros(1, dtype=np.int64))
    assert prepaid + 1 <= member.vtime <= prepaid + 1.5  # then one slice more, the start-up not again
    annealing = STOCHASTIC_SOLVERS["annealing"]
    assert StochasticMember(annealing, puzzle, np.random.SeedSequence(3), annealing.make_params()).vtime == 0


MANY = "........5........1..2.319..4....3....1..89.63.....4........7.......12............"  # 17 givens


@pytest.mark.parametrize("portfolio", [*PRESETS, "sat-rows,annealing", "backtracking"])
def test_another_seed_finds_another_solution_of_a_puzzle_with_many_with_every_portfolio(portfolio):
    puzzle = parse_puzzle(MANY)
    grids = [solve_many([MANY], portfolio=portfolio, time_limit=10, seed=s)[0] for s in (11, 12, 13, 14)]
    assert all(r.status == "solved" and is_solution(puzzle, grid_of(r.solution)) for r in grids)
    assert len({r.solution for r in grids}) == 4


def test_a_race_that_runs_out_of_time_leaves_the_last_tenth_of_it_to_the_stochastic_members():
    trace: list[tuple[str, str, int]] = []
    r = race(parse_puzzle(FRISCH), "race", time_limit=1.0, seed=3, trace=trace)
    last_complete = max(at for name, _, at in trace if name not in STOCHASTIC)
    alone_ms = (trace[-1][2] - last_complete) / 1e6  # before: the SAT member ran up to the deadline
    assert alone_ms > 50, alone_ms  # its last 100 ms less a slice begun before (load stretched one to 27 ms)
    assert r.status == "approximate" and r.solver in STOCHASTIC and r.cost > 0
    assert sum(r.counters[name]["time_ms"] for name in STOCHASTIC) > 20


def test_no_member_says_running_once_the_race_is_over_and_each_names_its_share():
    ended = race(parse_puzzle(FRISCH), "race", time_limit=0.3, seed=1).counters
    assert {c["status"] for c in ended.values()} <= {"fast path only", "timeout"}
    assert ended["propagation"]["status"] == "fast path only" and ended["propagation"]["share"] == 0
    assert sum(c["share"] for c in ended.values()) == pytest.approx(1.0, abs=1e-3)
    spec = PortfolioSpec(name="t", members=OWN_WEIGHTS.members, fast_nodes=1)  # the members race
    won = race(parse_puzzle(HARD), spec, time_limit=20, seed=1)
    assert won.status == "solved" and won.counters[won.solver]["status"] == "solved"
    assert {c["status"] for name, c in won.counters.items() if name != won.solver} == {"lost"}


def test_a_puzzle_raced_by_one_exact_solver_that_cannot_resume_costs_the_plain_paths_nodes():
    """Issue 31: with escalation on, a puzzle the fast path leaves is searched alone (`racing`), by a race of
    its one exact member. A kernel that cannot resume searched again from scratch at each doubled budget:
    up to 3x the plain path's nodes (`--portfolio backtracking`: 2x the workers' CPU). Alone in its race,
    the member searches once, as the plain path does, past the fast path's budget."""
    from contextlib import nullcontext

    from solvers.kernel.stop import new_flag

    plain = solve_many([HARD], solver="backtracking")[0]
    raced = solve_many([HARD], portfolio="backtracking", racing=lambda _: nullcontext(new_flag()))[0]
    assert plain.status == raced.status == "solved" and raced.solution == plain.solution
    budget = PRESETS["fast"].fast_budget(9)
    assert plain.nodes > 4 * budget  # left by the fast path, and searched well past it
    assert raced.nodes <= plain.nodes + budget  # the fast path's nodes, then the plain path's search
