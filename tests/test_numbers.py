"""Numbers read the same everywhere: client/numbers.py (summary, report) and web/static/common.js (page).

One table of values, ties and unit boundaries included, goes through both (the page's functions
run under node) and every string must match; the percentiles of the summary, the report and
the job page (one implementation, `Summary.percentiles`) never pass the maximum.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from client import numbers
from client.summary import Summary
from pipeline.contract.part import PartStats
from solvers.model.columns import TIME_BINS_PER_DECADE
from tests.conftest import REPO

COMMON_JS = REPO / "web" / "static" / "common.js"
TIES = [1.125, 12.25, 0.125, 2.5, 0.5, 1.5, 10.5, 100.5, 999.5, -1.125, -2.5, -100.5, 1e15 + 0.5, 90.5]
EDGES = [0.0009995, 0.00099949, 0.9995, 0.99949, 59.95, 59.949, 60, 119.5, 3599.4, 3599.5, 3600, 5400]
SEEN = [0, -0.0, 1, 2.456, 0.002455, 9.996, 45.61, 99.96, 99.94, 123.4, 8035, 12345.6, 1234567, 3.5e-7]
ODD = [0.5, 21.56, 8.85e-6, 3.55e-6, 1e-9, 259200, 123456789.5, 4e15 + 7.5, math.inf, -math.inf, math.nan]
RUN = """
const vm = require("vm");
const fs = require("fs");
vm.runInThisContext(fs.readFileSync(process.argv[1], "utf8"));
const values = JSON.parse(fs.readFileSync(0, "utf8")).map(Number);  // "Infinity", "NaN" as text
const out = values.map((v) => [sig(v), sig(v, 2), duration(v), durationMs(v), count(v), rate(v)]);
process.stdout.write(JSON.stringify(out));
"""


def table() -> list[float]:
    """Values of every magnitude (below 2^53, JavaScript's exact integers): the cases above, random ones
    from 1e-9 to 1e7, and exact halves."""
    rng = np.random.default_rng(31)
    spread = (10.0 ** rng.uniform(-9, 7, 3000)).tolist()
    halves = (rng.integers(0, 100_000, 500) / 8).tolist()  # k/8: ties at the 3rd significant digit
    return [*TIES, *EDGES, *SEEN, *ODD, *spread, *halves]


def python_strings(v: float) -> list[str]:
    return [
        numbers.sig(v),
        numbers.sig(v, 2),
        numbers.duration(v),
        numbers.duration_ms(v),
        numbers.count(v),
        numbers.per_second(v),
    ]


def test_the_page_and_the_command_line_write_every_number_of_one_table_alike():
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("node is not installed, and CI=true forbids skipping the page's number test")
        pytest.skip("node is not installed")
    values = table()
    sent = json.dumps(
        [v if math.isfinite(v) else str(v).replace("inf", "Infinity").replace("nan", "NaN") for v in values]
    )
    proc = subprocess.run(
        [node, "-e", RUN, str(COMMON_JS)], input=sent, capture_output=True, text=True, timeout=60, check=True
    )
    page = json.loads(proc.stdout)
    differ = [
        (v, js, python_strings(v)) for v, js in zip(values, page, strict=True) if js != python_strings(v)
    ]
    assert not differ, differ[:10]


def test_halves_round_away_from_zero_and_units_change_where_the_rounded_value_would_read_1000():
    assert [numbers.sig(v) for v in (1.125, 12.25, 100.5, -2.5)] == ["1.13", "12.3", "101", "-2.5"]
    assert numbers.per_second(10.5) == "11" and numbers.count(2.5) == "3"
    assert numbers.duration(0.00099951) == "1 ms" and numbers.duration(0.99951) == "1 s"
    said = {numbers.duration(v) for v in table()}
    assert not any(re.fullmatch(r"1,000 (us|ms)|60 s|.*60 min", t) for t in said), sorted(said)[:20]
    assert [numbers.duration(s) for s in (59.95, 90.5, 120, 3599.5, 5400)] == [
        "1 min",
        "1 min 31 s",
        "2 min",
        "1 h",
        "1 h 30 min",
    ]
    assert numbers.duration(0.5) == "500 ms" and numbers.duration(21.56) == "21.6 s"


def summary_of(times_ms: list[float]) -> Summary:
    """A summary of puzzles that took `times_ms`, binned as a chunk bins them."""
    bins: dict[int, int] = {}
    for t in times_ms:
        b = math.floor(TIME_BINS_PER_DECADE * math.log10(t))
        bins[b] = bins.get(b, 0) + 1
    s = Summary()
    s.add(
        PartStats(
            n=len(times_ms), counts={"solved": len(times_ms)}, time_bins=bins, time_max_ms=max(times_ms)
        ),
        "",
    )
    return s


def test_a_p99_is_never_above_the_max_and_equals_it_for_one_or_a_few_puzzles():
    assert summary_of([0.0036]).percentiles() == {"p50": 0.0036, "p90": 0.0036, "p99": 0.0036, "max": 0.0036}
    four = summary_of([310.0, 1200.0, 2800.0, 2860.0]).percentiles()
    assert four["p99"] == four["p90"] == four["max"] == 2860.0  # nearest rank: the 4th of 4
    assert 1100 < four["p50"] < 1300  # the 2nd of 4, to within its bin (4.7%)
    rng = np.random.default_rng(5)
    for n in (1, 2, 3, 10, 99, 100, 101, 1000):
        times = (10.0 ** rng.uniform(-3, 4, n)).tolist()
        pct = summary_of(times).percentiles()
        ranked = sorted(times)
        assert pct["p50"] <= pct["p90"] <= pct["p99"] <= pct["max"] == ranked[-1], (n, pct)
        for name, p in (("p50", 50), ("p90", 90), ("p99", 99)):
            exact = ranked[math.ceil(p * n / 100) - 1]  # nearest rank
            assert exact / 1.05 <= pct[name] <= exact * 1.05, (n, name, pct[name], exact)
