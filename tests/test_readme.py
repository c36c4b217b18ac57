"""The README's examples are what the program does: its invalid-line record and summary, its solvers."""

from __future__ import annotations

import json
import re
import subprocess

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
        [*cli_command(), "solve", "corpus.txt", "--ordered"], capture_output=True, text=True, timeout=120,
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    last = json.loads(proc.stdout.splitlines()[-1])
    assert (last["line"], last["status"], last["error"]) == (line, "invalid", error)
    assert f"  {summary.group(1)}" in proc.stderr.splitlines()


def test_the_readme_solver_table_names_every_registered_solver():
    import solvers.portfolio  # noqa: F401 - imports and so registers every solver
    from solvers import registry

    section = README.split("## Solvers and portfolios", 1)[1].split("\n## ", 1)[0]
    named = {row.split("`")[1] for row in section.splitlines() if row.startswith("| `")}
    assert named == set(registry.SOLVERS)
