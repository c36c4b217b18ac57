"""`serve` in a real browser (Debian's headless Chromium, driven through its chromedriver by Selenium).

The page takes a typed puzzle and shows the solved grid; a running job's page shows its
progress advance. Each test writes a screenshot (listed at the end of the run) under
out/screenshots/ (or $SUDOKU_BATCH_SCREENSHOTS). With CI=true a missing Chromium fails
these tests instead of skipping them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from solvers import is_solution, parse_puzzle
from tests.conftest import REPO, SAMPLE, SCREENSHOTS, free_port, wait_until
from tests.test_interrupts import kill_session, start, wait_until_gone
from tests.test_numbers import EDGES, SEEN, TIES
from tests.test_portfolio import FRISCH
from tests.test_web_serve import wait_served
from web.puzzles import samples

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1100",
)
PUZZLE = SAMPLE.read_text().splitlines()[50]  # a hard one of Norvig's top95
HARD_25 = next(s.puzzle for s in samples() if s.box == "5x5")
pytestmark = pytest.mark.slow


def shots_dir() -> Path:
    path = Path(os.environ.get("SUDOKU_BATCH_SCREENSHOTS", REPO / "out" / "screenshots"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def need_chromium() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not (Path(p).exists() or shutil.which(p))]
    if missing:
        reason = f"{', '.join(missing)} not installed (apt-get install chromium chromium-driver)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason}, and CI=true forbids skipping the browser tests")
        pytest.skip(reason)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """The real `sudoku-batch serve`, embedded, on a free loopback port."""
    need_chromium()
    port = free_port()
    proc = start(["serve", "--port", str(port), "--workers", "2"])
    try:
        wait_served(proc, port)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        assert wait_until_gone(proc.pid) == []
        kill_session(proc.pid)


@pytest.fixture(scope="module")
def browser(server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must not look for drivers online
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={tempfile.mkdtemp(dir=tmp_path_factory.mktemp('chromium'))}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(condition, timeout: float = 30.0, what: str = "the page"):
    """Poll `condition()` until it returns something truthy; fail naming `what` after `timeout` s."""
    return wait_until(condition, timeout, what)


def screenshot(browser, name: str) -> Path:
    path = shots_dir() / name
    browser.save_screenshot(str(path))
    SCREENSHOTS.append(path)
    return path


def test_a_puzzle_typed_into_the_grid_is_solved_on_the_page(browser, server):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser.get(server + "/")
    cells = wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#grid input"), what="the grid")
    assert len(cells) == 81
    cells[0].click()
    ActionChains(browser).send_keys(PUZZLE).perform()  # a value or `.` per cell, focus moving on
    typed = "".join(c.get_attribute("value") or "." for c in cells)
    assert typed == PUZZLE
    browser.find_element(By.ID, "solve").click()
    status = browser.find_element(By.ID, "a-status")
    wait_for(lambda: status.text == "solved", what="the answer")
    grid = "".join(c.get_attribute("value") for c in cells)
    assert is_solution(parse_puzzle(PUZZLE), parse_puzzle(grid).givens)
    classes = [c.get_attribute("class") for c in cells]
    assert all(
        ("given" in k) == (ch != ".") and ("solved" in k) == (ch == ".")
        for k, ch in zip(classes, PUZZLE, strict=True)
    )
    assert browser.find_element(By.ID, "a-solver").text == "propagation"
    winner_time = browser.find_element(By.CSS_SELECTOR, "#a-members tr td:nth-child(2)").text
    assert winner_time == browser.find_element(By.ID, "a-time").text  # one time, read the same in both tables
    record = {
        "solver": "propagation",
        "status": "solved",
        "time_ms": 0.0088,  # 0.1 us; its counter 1 ns
        "counters": {"propagation": {"time_ms": 0.00884, "nodes": 1}},
    }
    row = browser.execute_script("return members(arguments[0])[0].children[1].textContent", record)
    assert row == "8.8 us"  # as the record's time (and the summary) read it, not 8.84 us
    assert "solved" in browser.find_element(By.ID, "message").text
    screenshot(browser, "solve.png")
    line = browser.find_element(By.ID, "line")  # a pasted line, loaded with Enter: a 16x16 grid
    assert line.get_attribute("value") == PUZZLE  # the line field says what the grid holds
    sixteen = next(s.puzzle for s in samples() if s.box == "4x4")
    line.clear()
    line.send_keys(sixteen + Keys.ENTER)
    wait_for(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#grid input")) == 256, what="a 16x16 grid")
    six = next(s.puzzle for s in samples() if s.box == "2x3")  # pasted into a cell: a 6x6 grid, 2x3 boxes
    browser.execute_script(
        "const data = new DataTransfer(); data.setData('text', arguments[1]);"
        "arguments[0].dispatchEvent(new ClipboardEvent('paste', {clipboardData: data, bubbles: true}));",
        browser.find_element(By.CSS_SELECTOR, "#grid input"),
        six,
    )
    cells = wait_for(
        lambda: (c := browser.find_elements(By.CSS_SELECTOR, "#grid input")) and len(c) == 36 and c
    )
    assert "".join(c.get_attribute("value") or "." for c in cells) == six
    assert browser.find_element(By.ID, "box").get_attribute("value") == "2x3"


def test_a_running_jobs_page_shows_its_progress_advance(browser, server):
    from selenium.webdriver.common.by import By

    body = "\n".join([HARD_25] * 24).encode()
    query = "name=hard25.txt&portfolio=stochastic&time_limit=0.5"
    request = urllib.request.Request(f"{server}/api/jobs?{query}", data=body, method="POST")
    with urllib.request.urlopen(request, timeout=30) as answer:
        job = json.loads(answer.read())["job"]
    browser.set_window_size(1400, 1250)  # room for the plots
    browser.get(f"{server}/jobs/{job}")
    bar = browser.find_element(By.ID, "progress")
    seen: list[int] = []

    def advanced() -> bool:
        value = int(float(bar.get_attribute("value") or 0))
        if not seen or value != seen[-1]:
            seen.append(value)
        return (
            len([v for v in seen if 0 < v < 24]) >= 2 and len(browser.find_elements(By.TAG_NAME, "svg")) >= 2
        )

    wait_for(advanced, timeout=60, what="progress on the job page")
    assert seen == sorted(seen) and browser.find_element(By.ID, "phase").text in ("submitting", "solving")
    assert "puzzles" in browser.find_element(By.ID, "progress-text").text
    screenshot(browser, "job.png")
    wait_for(lambda: browser.find_element(By.ID, "phase").text == "done", timeout=90, what="the job's end")
    assert browser.find_element(By.ID, "progress-text").text.startswith("24 / 24")
    assert "every result is stored" in browser.find_element(By.ID, "results-note").text
    times = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "#times td:nth-child(2)")]
    assert len(times) == 4 and all(re.fullmatch(r"\d{1,3}(\.\d{1,2})? (us|ms|s)", t) for t in times), times
    screenshot(browser, "job-done.png")
    browser.get(f"{server}/jobs")
    wait_for(lambda: job[:8] in browser.find_element(By.ID, "jobs").text, what="the job in the list")
    workers = wait_for(lambda: browser.find_element(By.ID, "workers").text, what="the workers panel")
    assert "(jobs)" in workers and "(single puzzles)" in workers and "jobs: jobs" not in workers, workers
    assert "null" not in workers and "undefined" not in browser.find_element(By.TAG_NAME, "main").text
    note = wait_for(lambda: browser.find_element(By.ID, "limits-note").text, what="the server's bounds")
    bounds = r"This server keeps at most 50 jobs and 1,024 MB of memory \(now 1 job, [\d,]+ MB\)"
    assert re.match(bounds, note), note
    screenshot(browser, "jobs.png")


NUMBERS = [*SEEN, *TIES, *EDGES]  # tests/test_numbers.py runs many more under node


def test_the_page_writes_numbers_as_the_summary_and_the_report_do(browser, server):
    from client import numbers

    browser.get(f"{server}/jobs")
    wait_for(lambda: browser.execute_script("return typeof sig === 'function'"), what="common.js")
    script = "return arguments[0].map((v) => [sig(v), duration(v), count(v), rate(v)])"
    seen = browser.execute_script(script, NUMBERS)
    expected = [
        [numbers.sig(v), numbers.duration(v), numbers.count(v), numbers.per_second(v)] for v in NUMBERS
    ]
    assert seen == expected
    resume = "sudoku-batch submit --resume 5b5b big.txt --broker URL"
    stopped = {
        "phase": "stopped",
        "done": 53721,
        "submitted": 53721,
        "total": None,
        "checkpoint": 53721,
        "producer_silent_s": 600,
        "resume": resume,
    }
    assert browser.execute_script("return progressText(arguments[0])", stopped) == (
        "53,721 / 53,721+ (submission stopped)"
    )
    assert browser.execute_script("return resumeText(arguments[0])", stopped) == (
        f"The submission stopped after 53,721 puzzles, its producer silent for 10 min; resume it: {resume}"
    )


INK = "rgb(29, 39, 51)"  # --ink in style.css: box borders and the grid's outer border
MEASURE = """
const grid = document.getElementById("grid");
const box = grid.getBoundingClientRect(), style = getComputedStyle(grid);
const cells = [...grid.querySelectorAll("input")].map((c) => {
  const r = c.getBoundingClientRect(), s = getComputedStyle(c);
  return [r.left, r.top, r.width, r.height, parseFloat(s.borderRightWidth), parseFloat(s.borderBottomWidth),
          s.borderRightColor, s.borderBottomColor];
});
return {box: [box.left, box.top, box.width, box.height],
        border: ["Left", "Right", "Top", "Bottom"].map((k) => [parseFloat(style["border" + k + "Width"]),
                                                              style["border" + k + "Color"]]),
        cells: cells, scrollWidth: document.documentElement.scrollWidth};
"""


def check_geometry(seen: dict, rows: int, cols: int) -> None:
    """Square cells tiling the grid inside its border, thin lines inside a box, thick ones on its edges."""
    n = rows * cols
    cells = seen["cells"]
    assert len(cells) == n * n
    left, top, width, height = seen["box"]
    assert all(w >= 2 and color == INK for w, color in seen["border"]), seen[
        "border"
    ]  # the outer border whole
    side = cells[0][2]
    inner = left + seen["border"][0][0], top + seen["border"][2][0]
    for i, (x, y, w, h, right, bottom, right_color, bottom_color) in enumerate(cells):
        r, c = divmod(i, n)
        assert abs(w - h) <= 1 and abs(w - side) <= 0.5, (rows, cols, r, c, w, h)  # square, all alike
        assert abs(x - (inner[0] + c * side)) <= 0.5 and abs(y - (inner[1] + r * side)) <= 0.5, (r, c)
        for k, width_px, color, edge in ((c, right, right_color, cols), (r, bottom, bottom_color, rows)):
            if k == n - 1:
                assert width_px == 0  # the grid's own border is the last line
            elif (k + 1) % edge == 0:
                assert width_px == 2 and color == INK, (rows, cols, r, c)  # a box's edge
            else:
                assert width_px == 1 and color != INK, (rows, cols, r, c)
    assert abs(left + width - seen["border"][1][0] - (inner[0] + n * side)) <= 0.5  # the last column ends
    assert abs(top + height - seen["border"][3][0] - (inner[1] + n * side)) <= 0.5  # at the border, inside


def test_every_grid_from_4x4_to_64x64_has_square_cells_and_every_box_border_visible(browser, server):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.set_window_size(1280, 1100)
    browser.get(server + "/")
    wait_for(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#grid input")) == 81, what="the grid")
    boxes = [o.get_attribute("value") for o in Select(browser.find_element(By.ID, "box")).options]
    assert boxes == ["2x2", "2x3", "2x4", "3x3", "3x4", "4x4", "5x5", "6x6", "7x7", "8x8"]
    for text in boxes:
        rows, cols = map(int, text.split("x"))
        Select(browser.find_element(By.ID, "box")).select_by_value(text)
        wait_for(lambda t=text: browser.find_element(By.ID, "grid").get_attribute("data-box") == t, what=text)
        seen = browser.execute_script(MEASURE)
        check_geometry(seen, rows, cols)
        assert seen["scrollWidth"] <= 1280, text  # no grid is wider than the window
        if text in ("2x3", "3x3", "5x5", "8x8"):
            screenshot(browser, f"grid-{rows * cols}x{rows * cols}.png")
    sample = next(s for s in samples() if s.box == "3x4")  # a filled-in 12x12 (3x4 boxes) stays square
    Select(browser.find_element(By.ID, "sample")).select_by_visible_text(sample.name)
    wait_for(lambda: browser.find_element(By.ID, "grid").get_attribute("data-box") == "3x4", what="12x12")
    check_geometry(browser.execute_script(MEASURE), 3, 4)


BIG_SEED = "3232294954710345700"  # past 2^53: as a JSON number a browser reads 3232294954710345728


def test_the_line_and_sample_fields_follow_the_grid_and_a_random_puzzles_seed_replays_it(browser, server):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.get(server + "/")
    wait_for(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#grid input")) == 81, what="the grid")
    sample, line = Select(browser.find_element(By.ID, "sample")), browser.find_element(By.ID, "line")
    big = next(s for s in samples() if s.box == "5x5")
    sample.select_by_visible_text(big.name)
    wait_for(lambda: line.get_attribute("value") == big.puzzle, what="the sample's line")
    line.clear()  # a 9x9 line loaded: the sample no longer names the grid
    line.send_keys(PUZZLE + "\n")
    wait_for(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#grid input")) == 81, what="the 9x9 grid")
    assert sample.first_selected_option.get_attribute("value") == "" and line.get_attribute("value") == PUZZLE
    sample.select_by_visible_text(big.name)
    wait_for(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#grid input")) == 625, what="25x25")
    browser.find_elements(By.CSS_SELECTOR, "#grid input")[0].send_keys("7")  # an edit: no longer the sample
    assert sample.first_selected_option.get_attribute("value") == ""
    assert line.get_attribute("value") == "7" + big.puzzle[1:]
    Select(browser.find_element(By.ID, "box")).select_by_value("2x3")
    seed = browser.find_element(By.ID, "random-seed")
    seed.send_keys(BIG_SEED)
    message = browser.find_element(By.ID, "message")
    made: list[str] = []
    for _ in range(2):  # the same seed twice: the same puzzle
        browser.execute_script("document.getElementById('message').textContent = ''")
        browser.find_element(By.ID, "random").click()
        wait_for(lambda: "seed" in message.text, what="a random puzzle")
        assert message.text.endswith(f"seed {BIG_SEED}"), message.text  # as typed, not rounded
        made.append(line.get_attribute("value"))
        assert sample.first_selected_option.get_attribute("value") == ""
    with urllib.request.urlopen(f"{server}/api/random?box=2x3&seed={BIG_SEED}", timeout=30) as answer:
        replayed = json.loads(answer.read())
    assert made[0] == made[1] == replayed["puzzle"] and replayed["seed"] == BIG_SEED
    assert len(browser.find_elements(By.CSS_SELECTOR, "#grid input")) == 36
    screenshot(browser, "random.png")


MANY = next(s.puzzle for s in samples() if "not unique" in s.name)  # 17 random givens: many solutions


def solve_on_page(browser, button: str, before: str) -> str:
    """Press Solve or New solution; the message once the answer came (it differs from `before`)."""
    from selenium.webdriver.common.by import By

    message = browser.find_element(By.ID, "message")
    browser.find_element(By.ID, button).click()
    return wait_for(
        lambda: (t := message.text) != before and not t.startswith("solving") and t,
        timeout=60,
        what="the answer",
    )


def test_new_solution_shows_another_grid_each_press_and_says_when_the_puzzle_has_only_one(browser, server):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.set_window_size(1280, 1100)
    browser.get(server + "/")
    line = wait_for(lambda: browser.find_element(By.ID, "line"), what="the page")
    line.send_keys(MANY + "\n")
    Select(browser.find_element(By.ID, "portfolio")).select_by_value("race")
    said = solve_on_page(browser, "solve", "")
    grids: list[str] = []
    for k in range(4):
        cells = browser.find_elements(By.CSS_SELECTOR, "#grid input")
        grids.append("".join(c.get_attribute("value") for c in cells))
        assert is_solution(parse_puzzle(MANY), parse_puzzle(grids[-1]).givens), said
        if k:
            assert said == f"another solution ({k + 1} shown so far)", said
        if k < 3:
            said = solve_on_page(browser, "again", said)
    assert len(set(grids)) == 4
    screenshot(browser, "new-solution.png")
    line.clear()
    line.send_keys(PUZZLE + "\n")  # a unique puzzle: New solution says so
    said = solve_on_page(browser, "solve", said)
    said = solve_on_page(browser, "again", said)
    assert said == "this puzzle has exactly one solution: it is shown"


def test_the_race_shows_one_row_per_solver_winner_first_and_its_raw_counters_behind_details(browser, server):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.set_window_size(1280, 1500)  # the grid and the answer below it
    browser.get(server + "/")
    line = wait_for(lambda: browser.find_element(By.ID, "line"), what="the page")
    browser.execute_script("arguments[0].value = arguments[1]", line, FRISCH)  # no member solves it in 2 s
    browser.find_element(By.ID, "load").click()
    Select(browser.find_element(By.ID, "portfolio")).select_by_value("race")
    limit = browser.find_element(By.ID, "time-limit")
    limit.clear()
    limit.send_keys("2")
    solve_on_page(browser, "solve", "")
    status = browser.find_element(By.ID, "a-status").text
    assert status in ("solved", "approximate")
    rows = browser.find_elements(By.CSS_SELECTOR, "#a-members tr")
    texts = [[td.text for td in r.find_elements(By.TAG_NAME, "td")] for r in rows]
    winner = browser.find_element(By.ID, "a-solver").text
    assert 5 <= len(rows) <= 8 and texts[0][0] == winner and "winner" in rows[0].get_attribute("class")
    assert not any("running" in t for row in texts for t in row), texts
    assert all(t[5] for t in texts) and any(
        t[5] in ("time limit", "another solver answered first") for t in texts
    )
    details = browser.find_element(By.ID, "a-details")
    assert (
        details.get_attribute("open") is None and not browser.find_element(By.ID, "a-counters").is_displayed()
    )
    screenshot(browser, "counters.png")
    details.find_element(By.TAG_NAME, "summary").click()
    raw = browser.find_elements(By.CSS_SELECTOR, "#a-counters tr")
    assert len(raw) > len(rows) and browser.find_element(By.ID, "a-counters").is_displayed()
    assert not any('"' in td.text for td in browser.find_elements(By.CSS_SELECTOR, "#a-counters td"))


def test_a_new_grid_clears_the_status_an_answer_left(browser, server):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.set_window_size(1280, 1100)
    browser.get(server + "/")
    line = wait_for(lambda: browser.find_element(By.ID, "line"), what="the page")
    message = browser.find_element(By.ID, "message")
    for change in ("box", "clear"):
        line.clear()
        line.send_keys(PUZZLE + "\n")
        assert solve_on_page(browser, "solve", message.text) == "solved"
        if change == "box":  # another box size: an empty 4x4 grid, which nothing solved
            Select(browser.find_element(By.ID, "box")).select_by_value("2x2")
            wait_for(
                lambda: browser.find_element(By.ID, "grid").get_attribute("data-box") == "2x2", what="4x4"
            )
        else:
            browser.find_element(By.ID, "clear").click()
        cells = browser.find_elements(By.CSS_SELECTOR, "#grid input")
        assert not any(c.get_attribute("value") for c in cells)
        assert message.text == "", (change, message.text)


def test_a_typed_conflict_is_marked_red_on_the_grid_and_named_as_the_server_names_it(browser, server):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    browser.get(server + "/")
    Select(wait_for(lambda: browser.find_element(By.ID, "box"), what="the page")).select_by_value("3x3")
    cells = wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#grid input"), what="the grid")
    message = browser.find_element(By.ID, "message")

    def marked() -> list[int]:
        return [i for i, c in enumerate(cells) if "conflict" in (c.get_attribute("class") or "").split()]

    cells[0].click()
    ActionChains(browser).send_keys("33").perform()  # cells 1 and 2 of row 1: two 3s
    assert marked() == [0, 1] and message.text == "row 1 has two 3s", (marked(), message.text)
    red = browser.execute_script("return getComputedStyle(arguments[0]).backgroundColor", cells[0])
    assert red == "rgb(255, 212, 212)"  # as an approximate grid's conflicts (style.css)
    cells[1].click()
    ActionChains(browser).send_keys(Keys.DELETE).perform()
    assert marked() == [] and message.text == ""
    cells[9].click()
    ActionChains(browser).send_keys("3").perform()  # row 2, column 1: column 1 and box 1 have two 3s
    assert marked() == [0, 9], marked()
    screenshot(browser, "conflict.png")
    line = browser.find_element(By.ID, "line").get_attribute("value")
    request = urllib.request.Request(
        f"{server}/api/solve",
        data=json.dumps({"puzzle": line}).encode(),
        method="POST",
        headers={"content-type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert (
        json.loads(refused.value.read())["error"]
        == f"not a puzzle: {message.text}"
        == ("not a puzzle: column 1 has two 3s")
    )


def set_viewport(browser, width: int, height: int) -> None:
    """Size the window so that the page's viewport is width x height (the window's frame aside)."""
    browser.set_window_size(width, height)
    inner = browser.execute_script("return [window.innerWidth, window.innerHeight]")
    browser.set_window_size(2 * width - inner[0], 2 * height - inner[1])
    assert browser.execute_script("return [window.innerWidth, window.innerHeight]") == [width, height]


def pattern_puzzle(rows: int, cols: int, every: int) -> str:
    """A puzzle of rows x cols boxes as integers: a pattern solution with every `every`-th cell emptied."""
    n = rows * cols
    values = [
        0 if (r * n + c) % every == 0 else (cols * (r % rows) + r // rows + c) % n + 1
        for r in range(n)
        for c in range(n)
    ]
    return " ".join(map(str, values))


def test_a_64x64_solve_keeps_its_status_in_view_at_1366x768_and_the_time_limit_is_20_s(browser, server):
    from selenium.webdriver.common.by import By

    browser.get(server + "/")
    set_viewport(browser, 1366, 768)
    limit = wait_for(lambda: browser.find_element(By.ID, "time-limit"), what="the page")
    assert limit.get_attribute("value") == "20"  # as `solve`, `submit` and an upload (DEFAULT_TIME_LIMIT_S)
    line = browser.find_element(By.ID, "line")
    browser.execute_script("arguments[0].value = arguments[1]", line, pattern_puzzle(8, 8, 7))
    browser.find_element(By.ID, "load").click()
    wait_for(lambda: browser.find_element(By.ID, "grid").get_attribute("data-box") == "8x8", what="64x64")
    assert solve_on_page(browser, "solve", browser.find_element(By.ID, "message").text) == "solved"
    seen = browser.execute_script(
        "const m = document.getElementById('message'), r = m.getBoundingClientRect();"
        "const hit = document.elementFromPoint(r.left + 4, (r.top + r.bottom) / 2);"
        "return [r.top, r.bottom, innerHeight, scrollY, hit === m || m.contains(hit),"
        " document.getElementById('grid').getBoundingClientRect().bottom];"
    )
    top, bottom, height, scrolled, on_top, grid_bottom = seen
    assert grid_bottom > height, seen  # the grid runs below the fold...
    assert top >= 0 and bottom <= height and on_top, seen  # ...and its status is seen, over it
    screenshot(browser, "solve-64.png")
