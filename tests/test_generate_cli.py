"""`sudoku-batch generate`: valid, unique, symmetric puzzles as asked, the seed reproducing them anywhere.

Uniqueness is confirmed by `exact_cover` (dancing links), not by the dig kernel that made
the puzzles; validity by the independent verifier. Most runs call `main` in-process
(no interpreter start-up per run); the broker test uses real redis-server and workers.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time

import numpy as np
import pytest

from client.cli import main, parser
from client.job import Job
from solvers.exact import EXACT_SOLVERS
from solvers.generate.generator import orbits
from solvers.kernel.outcome import DONE
from solvers.model.parse import parse_puzzle
from solvers.model.puzzle import Box
from solvers.model.verify import verify_batch
from tests.conftest import cli_command, job_keys_now

CHECKER = EXACT_SOLVERS["exact_cover"]


def run(tmp_path, capsys, *args: str, name: str = "out") -> tuple[str, dict[str, str]]:
    """Run `generate` in-process into `name`.txt/.sol/.meta; it must succeed; return (stderr, file texts)."""
    files = {k: tmp_path / f"{name}.{k}" for k in ("txt", "sol", "meta")}
    argv = ["generate", *args, "-o", str(files["txt"]), "--solutions", str(files["sol"])]
    code = main([*argv, "--meta", str(files["meta"])])
    err = capsys.readouterr().err
    assert code == 0, err
    return err, {k: p.read_text() for k, p in files.items()}


def grids(text: str, box: Box) -> np.ndarray:
    """The grids of a puzzle or solution file, one per line, as uint8[K, N*N]."""
    return np.stack([parse_puzzle(line, box).givens for line in text.splitlines()])


def check_valid(files: dict[str, str], box: Box, count: int) -> tuple[np.ndarray, np.ndarray, list[dict]]:
    """N puzzles, each a subset of its line-aligned solution, which is a valid grid; meta aligned too."""
    puzzles, solutions = grids(files["txt"], box), grids(files["sol"], box)
    meta = [json.loads(line) for line in files["meta"].splitlines()]
    assert len(puzzles) == len(solutions) == len(meta) == count
    assert verify_batch(puzzles, solutions, box.rows, box.cols).all()
    assert [m["clues"] for m in meta] == (puzzles > 0).sum(axis=1).tolist()
    assert {m["level"] for m in meta} <= {"easy", "medium", "hard", "expert"}
    return puzzles, solutions, meta


def check_unique(puzzles: np.ndarray, solutions: np.ndarray, box: Box) -> None:
    """The other exact solver finds exactly one solution: the one written for the puzzle."""
    out = CHECKER.solve_batch(puzzles, box, limit=2, keep=1, max_nodes=5_000_000)
    assert out.status.tolist() == [DONE] * len(puzzles)
    assert out.counts.tolist() == [1] * len(puzzles)
    assert (out.solutions[:, 0] == solutions).all()


def test_generate_writes_n_valid_unique_puzzles_with_aligned_solutions_and_meta(tmp_path, capsys):
    err, files = run(tmp_path, capsys, "--count", "60", "--unique", "--seed", "1", "--chunk-size", "25")
    box = Box(3, 3)
    puzzles, solutions, meta = check_valid(files, box, 60)
    check_unique(puzzles, solutions, box)
    assert all(m["unique"] and m["reached"] for m in meta)
    assert "generated 60 of 60 puzzles" in err and "seed 1" in err and "levels: easy" in err


def test_a_finished_run_whose_job_cannot_be_purged_logs_why_in_one_line_and_succeeds(
    tmp_path, capsys, caplog, monkeypatch
):
    def away(self, stop=True):
        raise ConnectionError("store away")

    monkeypatch.setattr(Job, "purge", away)
    with caplog.at_level(logging.WARNING, "client.generate"):
        _, files = run(tmp_path, capsys, "--count", "3", "--seed", "1")
    lines = [r.getMessage() for r in caplog.records if r.name == "client.generate"]
    assert len(files["txt"].splitlines()) == 3
    assert len(lines) == 1 and "not purged" in lines[0] and "store away" in lines[0], lines


def test_the_same_seed_reproduces_the_files_byte_for_byte_and_another_seed_differs(tmp_path, capsys):
    args = ("--box", "2x3", "--count", "40", "--unique", "--chunk-size", "16")
    _, first = run(tmp_path, capsys, *args, "--seed", "7", name="a")
    _, again = run(tmp_path, capsys, *args, "--seed", "7", name="b")
    _, other = run(tmp_path, capsys, *args, "--seed", "8", name="c")
    assert first == again
    assert first["txt"] != other["txt"]
    assert set(first["txt"].splitlines()).isdisjoint(other["txt"].splitlines())


def test_without_a_seed_the_random_seed_is_printed_and_replays_the_run(tmp_path, capsys):
    err, first = run(tmp_path, capsys, "--count", "5", "--unique", name="a")
    seed = err.split()[1]
    assert err.startswith(f"seed {seed} (pass --seed {seed} to replay")
    _, again = run(tmp_path, capsys, "--count", "5", "--unique", "--seed", seed, name="b")
    assert first == again


def test_two_local_processes_write_the_same_files_as_one(tmp_path, capsys):
    args = ("--count", "120", "--unique", "--seed", "3", "--chunk-size", "20", "--symmetry", "mirror")
    err, two = run(tmp_path, capsys, *args, "--workers", "2", name="two")
    assert "with 2 local processes" in err
    _, one = run(tmp_path, capsys, *args, "--workers", "1", name="one")
    assert two == one


@pytest.mark.parametrize(
    ("shape", "count"),
    [
        ((2, 2), 20),
        ((2, 3), 20),
        ((3, 2), 10),
        ((3, 4), 5),
        ((4, 3), 5),
        ((4, 4), 2),
        ((2, 5), 5),
    ],
    ids=lambda v: f"{v[0]}x{v[1]}" if isinstance(v, tuple) else str(v),
)
def test_unique_puzzles_of_squares_and_rectangles_have_one_solution_by_another_solver(
    tmp_path, capsys, shape, count
):
    box = Box(*shape)
    _, files = run(
        tmp_path, capsys, "--box", f"{shape[0]}x{shape[1]}", "--count", str(count), "--unique", "--seed", "4"
    )
    puzzles, solutions, _ = check_valid(files, box, count)
    check_unique(puzzles, solutions, box)


@pytest.mark.parametrize(("shape", "clues"), [((5, 5), 350), ((6, 6), 1000)], ids=["5x5", "6x6"])
def test_the_large_boxes_give_unique_puzzles_with_the_requested_clue_count(tmp_path, capsys, shape, clues):
    """Dug only part-way (near-minimal 25x25 puzzles can take exact_cover millions of nodes to check)."""
    box = Box(*shape)
    _, files = run(
        tmp_path,
        capsys,
        "--box",
        f"{shape[0]}x{shape[1]}",
        "--count",
        "1",
        "--unique",
        "--clues",
        str(clues),
        "--seed",
        "5",
    )
    puzzles, solutions, meta = check_valid(files, box, 1)
    check_unique(puzzles, solutions, box)
    assert (puzzles > 0).sum(axis=1).tolist() == [clues] and meta[0]["reached"]


@pytest.mark.parametrize("symmetry", ["rotational", "mirror"])
@pytest.mark.parametrize("shape", [(3, 3), (2, 3), (3, 4)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_symmetric_puzzles_keep_their_symmetry_and_stay_unique(tmp_path, capsys, shape, symmetry):
    box = Box(*shape)
    _, files = run(
        tmp_path,
        capsys,
        "--box",
        f"{shape[0]}x{shape[1]}",
        "--count",
        "8",
        "--unique",
        "--symmetry",
        symmetry,
        "--seed",
        "6",
    )
    puzzles, solutions, _ = check_valid(files, box, 8)
    check_unique(puzzles, solutions, box)
    table = orbits(box, symmetry)
    pairs = table[table[:, 1] >= 0]
    filled = puzzles > 0
    assert (filled[:, pairs[:, 0]] == filled[:, pairs[:, 1]]).all()


def test_a_reachable_clue_target_is_met_exactly_with_unique_puzzles(tmp_path, capsys):
    box = Box(3, 3)
    err, files = run(tmp_path, capsys, "--count", "10", "--unique", "--clues", "28", "--seed", "2")
    puzzles, solutions, meta = check_valid(files, box, 10)
    check_unique(puzzles, solutions, box)
    assert (puzzles > 0).sum(axis=1).tolist() == [28] * 10 and all(m["reached"] for m in meta)
    assert "missed" not in err


def test_an_unreachable_clue_target_is_reported_and_flagged_in_the_meta(tmp_path, capsys):
    box = Box(3, 3)
    err, files = run(
        tmp_path, capsys, "--count", "4", "--unique", "--clues", "18", "--attempts", "2", "--seed", "2"
    )
    puzzles, solutions, meta = check_valid(files, box, 4)
    check_unique(puzzles, solutions, box)  # the closest candidates are still unique puzzles
    missed = sum(not m["reached"] for m in meta)
    assert missed > 0 and f"{missed} missed the target of 18 clues after 2 attempts each" in err


def test_minimal_puzzles_are_flagged_minimal_and_unique(tmp_path, capsys):
    box = Box(2, 3)
    _, files = run(tmp_path, capsys, "--box", "2x3", "--count", "10", "--min-clues", "--seed", "9")
    puzzles, solutions, meta = check_valid(files, box, 10)
    check_unique(puzzles, solutions, box)
    assert all(m["minimal"] and m["unique"] for m in meta)


def test_the_difficulty_filter_keeps_only_the_levels_asked(tmp_path, capsys):
    _, files = run(tmp_path, capsys, "--count", "10", "--unique", "--difficulty", "easy", "--seed", "3")
    _, _, meta = check_valid(files, Box(3, 3), 10)
    assert {m["level"] for m in meta} == {"easy"}


def test_fewer_puzzles_than_asked_exit_1_with_one_error_line_even_quiet(tmp_path, capsys):
    out = tmp_path / "none.txt"
    args = [
        "generate",
        "--count",
        "3",
        "--difficulty",
        "expert",
        "--attempts",
        "1",
        "--seed",
        "3",
        "-o",
        str(out),
    ]
    assert main(args) == 1  # no 9x9 expert among three candidates: not a success
    err = capsys.readouterr().err
    assert "generated 0 of 3 puzzles (3x3 boxes" in err
    assert err.endswith(
        "sudoku-batch: error: generated 0 of 3 puzzles: too few candidates of level expert within 1 attempt "
        "per puzzle (raise --attempts, add levels)\n"
    ), err
    assert main([*args, "-q"]) == 1 and capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--count", "3", "--clues", "30", "--min-clues"], "--clues and --min-clues exclude each other"),
        (["--count", "3", "--holes", "0.6", "--clues", "30"], "--holes excludes --clues and --min-clues"),
        (["--count", "3", "--holes", "1.5"], "--holes must be a fraction from 0 to 1, not 1.5"),
        (["--count", "3", "--holes", "nan"], "--holes must be a fraction from 0 to 1, not nan"),
        (["--count", "3", "--box", "3y3"], "box '3y3': write it as RxC"),
        (["--count", "3", "--box", "1x1"], "box 1x1"),
        (["--count", "3", "--unique", "--clues", "5"], "a unique 9x9 puzzle needs at least 8"),
        (["--box", "2x2", "--count", "3", "--unique", "--symmetry", "rotational", "--clues", "7"], "is even"),
        (["--count", "3", "--symmetry", "diagonal"], "symmetry 'diagonal'"),
        (["--count", "3", "--difficulty", "hardest"], "difficulty 'hardest'"),
        (
            ["--box", "2x2", "--count", "3", "--difficulty", "expert"],
            "no unique 4x4 puzzle is expert, each is easy",
        ),
        (
            ["--box", "2x2", "--count", "3", "--clues", "6", "--difficulty", "expert"],
            "each is easy, medium or hard",
        ),
        (["--count", "3", "--full", "--difficulty", "hard,expert"], "no 9x9 full grid is hard or expert"),
        (["--count", "0"], "--count must be at least 1"),
        (["--count", "3", "--workers", "0"], "--workers must be at least 1"),
        (["--count", "3", "--broker", "http://host"], "expected redis://"),
    ],
)
def test_usage_errors_exit_2_with_one_line_and_write_nothing(tmp_path, capsys, args, message):
    out = tmp_path / "out.txt"
    assert main(["generate", *args, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("sudoku-batch: error: ") and message in err, err
    assert not out.exists()


def test_an_unreachable_broker_is_one_masked_line_and_exit_1_within_5_s(tmp_path):
    start = time.monotonic()
    proc = subprocess.run(
        [*cli_command(), "generate", "--count", "3", "--broker", "redis://:secret@127.0.0.1:1/0"],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=tmp_path,
    )
    assert time.monotonic() - start < 5
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == (
        "sudoku-batch: error: cannot reach broker redis://:****@127.0.0.1:1/0: Connection refused\n"
    )
    assert os.listdir(tmp_path) == []


def test_the_client_sends_the_task_name_the_worker_registers():
    from pipeline.contract.generate import GenerateTask
    from worker.tasks import generate_chunk_task

    assert generate_chunk_task.name == GenerateTask.NAME


@pytest.mark.timeout(60)
def test_the_worker_task_stores_the_chunk_a_local_process_makes_and_redelivery_is_read_once(fake_redis):
    """The generate job on fakeredis: chunks answered late, reversed and twice come out in plan order."""
    from client.collector import chunk_order, stream_chunks
    from client.config import ClientSettings
    from client.generate import build_request
    from client.plan import JobSpec
    from client.producer import Producer
    from client.redis_store import RedisJobStore
    from client.transport import Transport
    from pipeline.contract.generate import GenerateOptions, GenerateResult, GenerateTask, generate_result
    from worker.tasks import handle

    argv = ["generate", "--box", "2x3", "--count", "50", "--unique", "--seed", "11", "--chunk-size", "8"]
    req = build_request(parser().parse_args(argv))
    job = "ab" * 16
    store = RedisJobStore(fake_redis, ClientSettings())
    store.create(job, {"kind": "generate", "state": "producing", "created": str(time.time())})
    options = GenerateOptions.model_validate(req.options.to_dict())
    tasks = [
        GenerateTask(job=job, chunk=i, box="2x3", count=n, seed=seed, options=options)
        for i, n, seed in req.plan
    ]
    unanswered: list[GenerateTask] = []

    class LateWorker(Transport):
        """Every second chunk, answer the waiting ones newest first, each twice."""

        def send(self, task: GenerateTask) -> None:
            unanswered.append(task)
            if task.chunk % 2 or task.chunk == len(req.plan) - 1:
                for waiting in reversed(unanswered):
                    message = waiting.model_dump(mode="json")
                    assert (
                        handle(message, fake_redis, GenerateTask)
                        == handle(message, fake_redis, GenerateTask)
                        == len(waiting)
                    )
                unanswered.clear()

    Producer(JobSpec(job, []), store, LateWorker(), store.settings).run_plan(tasks)
    stream = stream_chunks(store, job, result_ttl=0, poll=0.001, decode=GenerateResult.decode)
    through = list(chunk_order(stream))
    local = [generate_result(t) for t in tasks]  # what a local process makes of each task
    assert len(req.plan) == 7 and store.arrived_count(job) == 14
    for made, local_made in zip(through, local, strict=True):
        assert [made.puzzles, made.solutions, made.meta] == [
            local_made.puzzles,
            local_made.solutions,
            local_made.meta,
        ]


def test_the_worker_drops_chunks_of_a_purged_job_and_answers_a_bad_request_with_an_error(fake_redis):
    from pipeline.contract.generate import GenerateTask
    from pipeline.contract.keys import JobKeys
    from worker.tasks import handle

    job = "cd" * 16
    payload = {"job": job, "chunk": 0, "box": "3x3", "count": 2, "seed": 1, "options": {"unique": True}}
    assert handle(payload, fake_redis, GenerateTask) == 0 and fake_redis.keys("*") == []
    keys = JobKeys(job)
    fake_redis.hset(keys.meta, "total", 2)
    assert handle({**payload, "options": {"bogus": 1}}, fake_redis, GenerateTask) == 0
    body = json.loads(fake_redis.get(keys.result(0)))
    assert body["n"] == 0 and "bad generate request" in body["error"]
    assert handle(payload, fake_redis, GenerateTask) == 2
    assert json.loads(fake_redis.get(keys.result(0)))["error"] is None


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_generate_through_the_broker_fans_out_and_writes_the_same_files_as_local_generation(
    workers, tmp_path
):
    args = [
        "generate",
        "--box",
        "2x3",
        "--count",
        "300",
        "--unique",
        "--symmetry",
        "rotational",
        "--seed",
        "21",
        "--chunk-size",
        "20",
    ]
    outputs = {}
    before = job_keys_now(workers)
    for mode, extra in (("broker", ["--broker", workers]), ("local", ["--workers", "2"])):
        files = [tmp_path / f"{mode}.{k}" for k in ("txt", "sol", "meta")]
        proc = subprocess.run(
            [
                *cli_command(),
                *args,
                *extra,
                "-o",
                str(files[0]),
                "--solutions",
                str(files[1]),
                "--meta",
                str(files[2]),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert "generated 300 of 300 puzzles" in proc.stderr
        outputs[mode] = [f.read_bytes() for f in files]
    assert outputs["broker"] == outputs["local"]
    assert len(outputs["broker"][0].splitlines()) == 300
    assert job_keys_now(workers) - before == set()  # a finished run cleans up


def test_holes_blank_that_fraction_of_random_full_grids_reproducibly_per_seed(tmp_path, capsys):
    box = Box(6, 6)
    args = ("--box", "6x6", "--count", "3", "--holes", "0.6", "--seed", "7")
    err, files = run(tmp_path, capsys, *args)
    _, again = run(tmp_path, capsys, *args, name="again")
    _, other = run(tmp_path, capsys, *args[:-1], "8", name="other")
    puzzles, _, meta = check_valid(files, box, 3)
    assert ((puzzles == 0).sum(axis=1) == round(0.6 * 1296)).all() and all(m["reached"] for m in meta)
    assert files == again and not set(files["txt"].splitlines()) & set(other["txt"].splitlines())
    assert "holes 0.6 (518 clues)" in err and "not unique or not proven unique" in err


def test_a_generate_message_carries_holes_only_when_asked_and_refuses_a_fraction_outside_0_to_1():
    from pipeline.contract.generate import GenerateOptions, GenerateTask

    job = {"job": "0123abcd", "chunk": 0, "count": 2, "seed": 7}
    asked = GenerateTask(**job, box="6x6", options=GenerateOptions(holes=0.6))
    again = GenerateTask.model_validate_json(asked.model_dump_json())
    assert again == asked and again.options.options().holes == 0.6
    plain = GenerateTask(**job, box="3x3")
    assert "holes" not in json.loads(plain.model_dump_json())["options"]  # older workers take it
    for bad in (1.5, -0.1, float("nan")):
        with pytest.raises(ValueError, match="holes"):
            GenerateOptions(holes=bad)


def test_generate_makes_unique_puzzles_by_default_and_full_grids_only_when_asked(tmp_path, capsys):
    box = Box(3, 3)
    err, files = run(tmp_path, capsys, "--count", "3", "--seed", "5", name="default")
    puzzles, solutions, meta = check_valid(files, box, 3)
    check_unique(puzzles, solutions, box)
    assert (puzzles == 0).any(axis=1).all() and all(m["unique"] for m in meta)
    assert "3x3 boxes, unique)" in err
    _, named = run(tmp_path, capsys, "--count", "3", "--seed", "5", "--unique", name="named")
    assert named["txt"] == files["txt"]  # old scripts that named the mode get the same puzzles
    err, full = run(tmp_path, capsys, "--count", "3", "--seed", "5", "--full", name="full")
    grids_, solutions, _ = check_valid(full, box, 3)
    assert (grids_ == solutions).all() and "full grids" in err


@pytest.mark.parametrize("mode", [["--unique"], ["--clues", "30"], ["--holes", "0.5"], ["--min-clues"]])
def test_full_grids_exclude_every_digging_mode(mode, tmp_path, capsys):
    assert main(["generate", "--count", "3", "--full", *mode, "-o", str(tmp_path / "o.txt")]) == 2
    assert "--full writes full grids: it excludes" in capsys.readouterr().err
