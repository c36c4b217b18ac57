"""The HTML report: self-contained inline SVG plots drawn without any plotting library."""

from __future__ import annotations

import re
import sys

from client import numbers, svg_chart
from client.report import write_report
from client.summary import Summary
from pipeline.result import ChunkStats, Problem


def summary() -> Summary:
    s = Summary()
    stats = ChunkStats(
        n=40,
        counts={"solved": 30, "approximate": 8, "invalid": 2},
        wins={"propagation": 25, "<annealing>": 13},
        approx_costs={2: 5, 4: 3},
        time_bins={-100: 10, -99: 20, 50: 8},
        time_max_ms=10.5,
        problems=[Problem(index=3, line=4, status="invalid", error="row 1 has two 5s")],
    )
    s.add(stats, "in.txt")
    s.finish()
    return s


def test_the_report_is_written_when_matplotlib_cannot_be_imported(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    path = tmp_path / "r.html"
    write_report(summary(), path)
    page = path.read_text()
    assert (
        page.count("<svg") == 4 and "<script" not in page
    )  # times, cactus, wins, costs and "http" not in page.split("<body>")[1]
    assert "row 1 has two 5s" in page and "&lt;annealing&gt;" in page and "<annealing>" not in page


def test_a_histogram_draws_one_column_per_nonempty_bin_with_heights_in_proportion():
    chart = svg_chart.histogram([(1, 2, 10), (2, 4, 0), (4, 8, 20)], "ms", "puzzles", log_x=True)
    heights = [float(h) for h in re.findall(r'<rect [^>]*height="([\d.]+)"', chart)]
    assert len(heights) == 2 and abs(heights[1] - 2 * heights[0]) < 0.01
    assert ">1<" in chart and ">10<" in chart  # decade ticks of the log axis


def test_columns_and_rows_label_every_item_and_title_it_with_its_exact_count():
    assert re.findall(r"<title>([^<]*)</title>", svg_chart.columns([("2", 5), ("4", 1234)], "c", "n")) == [
        "2: 5",
        "4: 1,234",
    ]
    chart = svg_chart.rows([("propagation", 9), ("evolution", 3)], "won")
    assert ">propagation</text>" in chart and ">evolution</text>" in chart


def test_ticks_are_round_numbers_reaching_the_top():
    assert svg_chart.nice_ticks(37) == [0, 10, 20, 30, 40]
    assert svg_chart.nice_ticks(7) == [0, 2, 4, 6, 8]
    assert svg_chart.nice_ticks(1200) == [0, 500, 1000, 1500]
    assert svg_chart.nice_ticks(0) == [0.0, 1.0]


def test_a_cactus_plot_rises_through_the_cumulative_counts_on_a_log_time_axis():
    s = summary()  # time bins -100: 10, -99: 20, 50: 8 -> 10, 30 and 38 puzzles done within their bins' times
    points = s.done_within()
    assert [n for n, _ in points] == [10, 30, 38] and [t for _, t in points] == sorted(t for _, t in points)
    assert points[-1][1] == 10.5  # the last bin's time is the exact maximum
    chart = svg_chart.cactus(points, "puzzles", "ms", label=numbers.duration_ms)
    ys = [float(y) for y in re.findall(r"L[\d.]+,([\d.]+)", chart)]
    assert len(ys) == 3 and ys == sorted(ys, reverse=True)  # slower puzzles plot higher
    assert "38 puzzles within 10.5 ms" in chart and svg_chart.cactus([], "x", "y").count("<path") == 0


def test_the_report_says_what_it_is_about_and_leaves_out_empty_sections(tmp_path):
    from client.report import report_facts

    meta = {"created": "1790000000.5", "inputs": "a.txt\nb.txt.gz", "time_limit": "2.5", "portfolio": "race"}
    facts = report_facts("ab" * 16, meta, embedded=True)
    assert facts["inputs"] == "a.txt, b.txt.gz" and facts["options"].startswith("time limit 2.5 s a puzzle")
    assert "portfolio race" in facts["options"] and "box inferred" in facts["options"]
    assert facts["version"].startswith("sudoku-batch ") and "cores" in facts["machine"]
    s = Summary()
    s.add(
        ChunkStats(
            n=3, counts={"solved": 3}, wins={"propagation": 3}, time_bins={-100: 3}, time_max_ms=0.00246
        ),
        "",
    )
    path = tmp_path / "r.html"
    write_report(s, path, "report: a.txt", facts)
    page = path.read_text()
    assert "a.txt, b.txt.gz" in page and "<th>started</th>" in page and "ab" * 16 in page
    assert "Invalid and failed lines" not in page and "Cost histogram" not in page  # nothing to show
    assert "<td>p50</td><td>2.46 us</td>" in page  # 0.00246 ms, written in microseconds
    assert not re.search(r">\d+\.\d{4,}<", page)  # no number with more than 3 decimals


def test_a_count_axis_has_whole_ticks_and_a_bar_of_one_is_seen_beside_fifty_thousand():
    one = svg_chart.columns([("17", 1)], "cost", "results")
    ticks = re.findall(r'text-anchor="end">([^<]*)</text>', one)
    assert ticks == ["0", "1"]  # not 0, 0.2, ..., 1
    chart = svg_chart.rows([("propagation", 50_000), ("annealing", 1)], "won")
    widths = [float(w) for w in re.findall(r'<rect [^>]*width="([\d.]+)"', chart)]
    assert widths[1] >= svg_chart.MIN_BAR and widths[0] > 100
    assert svg_chart.nice_ticks(3, whole=True) == [0, 1, 2, 3]
