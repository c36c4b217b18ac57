"""The README's examples are what the program does: its invalid-line record and summary, its solvers."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, SAMPLE, cli_command

README = (REPO / "README.md").read_text()
EXAMPLE = "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79"


def test_the_readme_invalid_line_example_is_the_record_and_the_summary_line_a_user_gets(tmp_path):
    record = re.search(r'`"line": (\d+), "status": "invalid", "error": "([^"]+)"`', README)
    summary = re.search(r"`(corpus\.txt:(\d+): invalid: ([^`]+))`", README)
    assert record and summary, "the README shows the invalid record and its summary line"
    line, error = int(record.group(1)), record.group(2)
    assert (int(summary.group(2)), summary.group(3)) == (line, error)
    assert error == "row 3 has two 5s"
    clash = EXAMPLE[:18] + "598....65" + EXAMPLE[27:]  # row 3: a 5 in its first and last cells
    good = SAMPLE.read_text().splitlines()[: line - 1]
    (tmp_path / "corpus.txt").write_text("\n".join([*good, clash]) + "\n")
    proc = subprocess.run(
        [*cli_command(), "solve", "corpus.txt", "--ordered"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    last = json.loads(proc.stdout.splitlines()[-1])
    assert (last["line"], last["status"], last["error"]) == (line, "invalid", error)
    assert f"  {summary.group(1)}" in proc.stderr.splitlines()


def test_the_readme_solver_table_names_every_registered_solver():
    import solvers.race.portfolio  # noqa: F401 - imports and so registers every solver
    from solvers import registry

    section = README.split("## Solvers and portfolios", 1)[1].split("\n## ", 1)[0]
    named = {row.split("`")[1] for row in section.splitlines() if row.startswith("| `")}
    assert named == set(registry.SOLVERS)


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_the_readme_ten_lines_of_use_run_as_written(workers, tmp_path):
    """Every line of "The whole use in ten lines" runs as written (the broker is the session's, its
    workers already started; `pip install .` is this venv), each command exiting 0."""
    import gzip
    import os
    import shutil

    import redis

    block = README.split("## The whole use in ten lines", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    lines = [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]
    assert len(lines) == 10 and lines[0] == "pip install ."
    script = ["set -euo pipefail"]
    for line in lines[1:]:
        if line.startswith("export SUDOKU_BATCH_BROKER="):
            line = f"export SUDOKU_BATCH_BROKER={workers}"
        elif line.startswith("sudoku-batch worker"):
            continue  # the session's workers serve the broker
        script.append(line)
    shutil.copy(SAMPLE, tmp_path / "corpus.txt")
    (tmp_path / "big.txt.gz").write_bytes(gzip.compress(SAMPLE.read_bytes()))
    env = {k: v for k, v in os.environ.items() if k != "SUDOKU_BATCH_BROKER"}
    env["PATH"] = f"{Path(cli_command()[0]).parent}{os.pathsep}{env['PATH']}"
    client = redis.Redis.from_url(workers)
    before = set(client.keys("sbatch:job:*"))
    try:
        proc = subprocess.run(
            ["bash", "-c", "\n".join(script)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=280,
        )
    finally:  # `collect` keeps the job it collected (result_ttl): later tests must not meet it
        left = set(client.keys("sbatch:job:*")) - before
        if left:
            client.delete(*left)
        client.close()
    assert proc.returncode == 0, proc.stderr
    results = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(results) == 306 and {r["status"] for r in results} == {"solved"}
    manifest = json.loads((tmp_path / "results" / "_manifest.json").read_text())  # the dataset's
    assert manifest["records"] == 306 and (tmp_path / "results" / "_SUCCESS").exists()
    assert manifest["options"]["splits"]  # the workers read corpus.txt themselves
    assert (tmp_path / "report.html").exists()
    assert len((tmp_path / "puzzles.txt").read_text().splitlines()) == 1000
    assert "time limit 20 s per puzzle" in proc.stderr  # the default, said in the summary
