"""The `sudoku-batch` command, embedded: outputs, summary, report, usage errors and broker errors."""

from __future__ import annotations

import csv
import json
import logging
import os
import stat
import subprocess
import time

import pytest

from client.cli import main
from client.config import mask_url
from client.notice import NoWorkerNotice, StoppedNotice
from tests.conftest import SAMPLE, check_records, cli_command, run_cli

LINES = SAMPLE.read_text().splitlines()


@pytest.fixture
def corpus(tmp_path):
    """A small corpus with a comment, a blank line and two invalid lines (lines 3 and 6)."""
    path = tmp_path / "corpus.txt"
    body = [LINES[0], "# comment", "not a puzzle", LINES[1], "", "1" * 81] + LINES[2:120]
    path.write_text("\n".join(body) + "\n")
    puzzles = [LINES[0], "not a puzzle", LINES[1], "1" * 81] + LINES[2:120]
    return path, puzzles


def test_solve_writes_one_ordered_verified_record_per_puzzle_and_a_summary(corpus, tmp_path):
    path, puzzles = corpus
    out = tmp_path / "out.jsonl"
    proc = run_cli("solve", str(path), "-o", str(out), "--ordered", "--workers", "2")
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    check_records(records, puzzles)
    assert [(r["line"], r["status"]) for r in records[:4]] == [
        (1, "solved"),
        (3, "invalid"),
        (4, "solved"),
        (6, "invalid"),
    ]
    assert records[3]["error"] == "row 1 has 9 1s" and {r["input"] for r in records} == {str(path)}
    assert "122 puzzles" in proc.stderr and "solved 120, invalid 2" in proc.stderr
    assert f"{path}:6: invalid: row 1 has 9 1s" in proc.stderr and "p50" in proc.stderr


def test_one_puzzle_on_stdin_is_answered_on_stdout():
    proc = run_cli("solve", "-", "-q", stdin=LINES[5] + "\n")
    assert proc.returncode == 0 and proc.stderr == ""
    (record,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert record["status"] == "solved" and record["input"] == "-" and record["line"] == 1


def test_csv_output_has_the_same_fields_and_rows(corpus, tmp_path):
    path, puzzles = corpus
    out = tmp_path / "out.csv"
    assert run_cli("solve", str(path), "-o", str(out), "--format", "csv", "--ordered", "-q").returncode == 0
    rows = list(csv.DictReader(out.open()))
    assert [r["puzzle"] for r in rows] == puzzles
    assert rows[0]["status"] == "solved" and json.loads(rows[0]["counters"])["propagation"]["nodes"] >= 1
    assert rows[1]["solution"] == "" and "do not make a square grid" in rows[1]["error"]


def test_the_html_report_is_self_contained_with_tables_and_plots(corpus, tmp_path):
    path, _ = corpus
    report = tmp_path / "report.html"
    args = ("--report", str(report), "--time-limit", "5", "--portfolio", "race", "-q")
    proc = run_cli("solve", str(path), "-o", str(tmp_path / "o.jsonl"), *args)
    assert proc.returncode == 0, proc.stderr
    page = report.read_text()
    header = page.split("<h2>")[0]  # what it is about: inputs, options, when, version, cores
    for fact in (str(path), "time limit 5 s a puzzle, portfolio race", "sudoku-batch ", " cores", "written"):
        assert fact in header, fact
    assert (
        page.count("<svg") == 3 and "<script" not in page
    )  # time histogram, cactus plot, wins and "http" not in page.split("<body>")[1]
    for heading in (
        "Counts by status",
        "Solve time",
        "Cactus plot",
        "Wins per solver",
        "Invalid and failed lines",
    ):
        assert heading in page
    assert "row 1 has 9 1s" in page


@pytest.mark.parametrize(
    "args, message",
    [
        (["solve", "no-such-file.txt"], "no such file"),
        (["solve", str(SAMPLE), "--box", "3by3"], "RxC"),
        (["solve", str(SAMPLE), "--time-limit", "-1"], "time-limit"),
        (["submit", str(SAMPLE)], "needs a broker"),
        (["collect", "abc"], "needs a broker"),
        (["solve", str(SAMPLE), "--broker", "http://host"], "redis://"),
    ],
)
def test_usage_errors_exit_2_with_one_line(args, message, capsys, monkeypatch):
    monkeypatch.delenv("SUDOKU_BATCH_BROKER", raising=False)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_an_unknown_command_is_a_usage_error():
    proc = run_cli("frobnicate")
    assert proc.returncode == 2 and "invalid choice" in proc.stderr and "Traceback" not in proc.stderr


def test_an_unreachable_broker_is_one_line_naming_the_masked_url_within_5_seconds():
    start = time.monotonic()
    proc = run_cli("solve", str(SAMPLE), "--broker", "redis://:hunter2@127.0.0.1:1/0", timeout=30)
    assert time.monotonic() - start < 5
    assert proc.returncode == 1
    assert proc.stderr == (
        "sudoku-batch: error: cannot reach broker redis://:****@127.0.0.1:1/0: Connection refused\n"
    )
    assert "hunter2" not in proc.stderr + proc.stdout


def stderr_prints(source: str) -> list[tuple[int, str]]:
    """(line, opening text) of each `print(..., file=sys.stderr)` and `sys.stderr.write(...)` of `source`."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        to_stderr = any(k.arg == "file" and ast.unparse(k.value) == "sys.stderr" for k in node.keywords)
        if ast.unparse(node.func) == "sys.stderr.write" or (ast.unparse(node.func) == "print" and to_stderr):
            first = node.args[0]
            if isinstance(first, ast.JoinedStr) and first.values:
                first = first.values[0]
            found.append((node.lineno, first.value if isinstance(first, ast.Constant) else ""))
    return found


def test_no_command_prints_an_error_line_but_through_the_one_prefix_argparse_uses():
    from tests.conftest import REPO

    sources = [*sorted((REPO / "client").glob("*.py")), *sorted((REPO / "web").glob("*.py"))]
    printed = [(path.name, line, text) for path in sources for line, text in stderr_prints(path.read_text())]
    bare = [f"{name}:{line}: {text!r}" for name, line, text in printed if "error" in text.lower()]
    assert bare == []  # say_error(message) prints "sudoku-batch: error: message"


@pytest.mark.parametrize(
    "args",
    [
        ["solve", str(SAMPLE), "--broker", "redis://127.0.0.1:1/0"],  # the broker: exit 1
        ["health", "--broker", "redis://127.0.0.1:1/0"],
        ["collect", "ab" * 8, "--broker", "redis://127.0.0.1:1/0"],
        ["status", "not-a-job"],  # usage: exit 2
        ["solve", "--frobnicate", str(SAMPLE)],  # argparse's own
        ["generate", "--box", "2x2", "--count", "2", "--difficulty", "hard"],
        [
            "generate",
            "--count",
            "2",
            "--difficulty",
            "expert",
            "--attempts",
            "1",
            "--seed",
            "3",
            "-q",
        ],  # 0 of 2
    ],
)
def test_every_error_line_of_every_command_starts_with_the_one_prefix(args, tmp_path):
    proc = run_cli(*args, timeout=60)
    errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
    assert proc.returncode in (1, 2) and errors, proc.stderr
    assert all(line.startswith("sudoku-batch: error: ") for line in errors), proc.stderr


PLURALS = [
    (0, "puzzle", None),
    (1, "puzzle", None),
    (2, "chunk message", None),
    (1234, "record", None),
    (1, "live worker process", "live worker processes"),
    (3, "live worker process", "live worker processes"),
]


def test_a_count_of_one_takes_the_singular_on_the_command_line_and_the_page():
    import shutil

    from client import numbers
    from tests.conftest import REPO

    written = [numbers.plural(n, noun, nouns) for n, noun, nouns in PLURALS]
    assert written == [
        "0 puzzles",
        "1 puzzle",
        "2 chunk messages",
        "1,234 records",
        "1 live worker process",
        "3 live worker processes",
    ]
    one = run_cli("solve", "-", stdin=LINES[0] + "\n")
    assert one.returncode == 0 and one.stderr.startswith("1 puzzle in "), one.stderr
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the page's plural is not compared")
    run = "vm.runInThisContext(fs.readFileSync(process.argv[1], 'utf8'));"
    run += "process.stdout.write(JSON.stringify(JSON.parse(process.argv[2]).map((a) => plural(...a))));"
    page = subprocess.run(
        [
            "node",
            "-e",
            f"const vm = require('vm'), fs = require('fs'); {run}",
            str(REPO / "web" / "static" / "common.js"),
            json.dumps(PLURALS),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert page.returncode == 0 and json.loads(page.stdout) == written, page.stderr


def test_column_names_a_csv_inputs_puzzle_column_and_a_first_line_without_it_is_a_usage_error(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text(f"id,Solution,Grid\n1,x,{LINES[0]}\n")  # no column of the default names
    ok = run_cli("solve", str(path), "--column", "grid", "-q")
    record = json.loads(ok.stdout)
    assert ok.returncode == 0 and (record["line"], record["puzzle"], record["status"]) == (
        2,
        LINES[0],
        "solved",
    )
    bad = run_cli("solve", str(path), "--column", "quizzes")
    assert bad.returncode == 2 and bad.stdout == "", bad.stderr
    said = f"{path}: its first line names no column 'quizzes' (it reads 'id,Solution,Grid')"
    assert bad.stderr == f"sudoku-batch: error: {said}\n"


def test_passwords_are_masked_in_every_url_form():
    assert mask_url("redis://:pw@h:6379/0") == "redis://:****@h:6379/0"
    assert mask_url("rediss://user:pw@h/1") == "rediss://user:****@h/1"
    assert mask_url("redis://pw@h") == "redis://****@h"
    assert mask_url("redis://h:6379/0") == "redis://h:6379/0"


def test_the_results_file_gets_the_usual_permissions_not_the_temporary_files(tmp_path):
    out = tmp_path / "results.jsonl"
    puzzle = "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79\n"
    (tmp_path / "one.txt").write_text(puzzle)
    old = os.umask(0o022)
    try:
        proc = run_cli("solve", str(tmp_path / "one.txt"), "-o", str(out), "-q")
    finally:
        os.umask(old)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o644


def test_a_file_of_6x6_puzzles_without_box_gives_one_solved_record_per_puzzle(tmp_path):
    from solvers.model.puzzle import ALPHABET, Box
    from tests.grids import blank, pattern_grid

    puzzles = [
        "".join("." if v == 0 else ALPHABET[v - 1] for v in blank(pattern_grid(Box(2, 3)), 0.4, k))
        for k in range(5)
    ]
    path = tmp_path / "six.txt"
    path.write_text("\n".join(puzzles) + "\n")
    proc = run_cli("solve", str(path), "--ordered", "-q")
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(r["line"], r["status"]) for r in records] == [(k + 1, "solved") for k in range(5)]


def test_a_directory_or_a_pipe_given_as_input_is_named_as_such_not_as_missing(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("SUDOKU_BATCH_BROKER", raising=False)
    assert main(["solve", str(tmp_path)]) == 2
    assert capsys.readouterr().err.endswith(f": error: {tmp_path}: is a directory, not a file of puzzles\n")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert main(["solve", str(fifo)]) == 2
    assert "not a regular file (pipe it to `-` instead)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "closed", "message"),
    [
        (["solve", "-"], 0, "stdin is closed: there is nothing to read for `-`"),
        (["solve", str(SAMPLE)], 1, "stdout is closed: give the output file with -o FILE"),
        (["generate", "--box", "2x2", "--count", "1"], 1, "stdout is closed: give the output file"),
        (["submit", str(SAMPLE), "--broker", "redis://127.0.0.1:1/0"], 1, "stdout is closed: there is"),
    ],
)
def test_a_closed_stdin_or_stdout_is_a_one_line_usage_error(args, closed, message):
    close = lambda: os.close(closed)  # noqa: E731 - in the child, before it runs the command
    cmd = [*cli_command(), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, preexec_fn=close)
    assert proc.returncode == 2 and proc.stderr.startswith(f"sudoku-batch: error: {message}"), proc.stderr
    assert len(proc.stderr.splitlines()) == 1


@pytest.mark.parametrize("kind", [NoWorkerNotice, StoppedNotice])
def test_a_notice_whose_broker_does_not_answer_says_nothing_and_logs_why_in_one_line(kind, caplog):
    def away():
        raise ConnectionError("broker away")

    said: list[str] = []
    notice = (
        NoWorkerNotice(away, said.append, after=0)
        if kind is NoWorkerNotice
        else StoppedNotice(away, said.append)
    )
    with caplog.at_level(logging.DEBUG, "client.notice"):
        assert not notice.check()
    lines = [r.getMessage() for r in caplog.records if r.name == "client.notice"]
    assert not said and len(lines) == 1 and "broker away" in lines[0], lines
