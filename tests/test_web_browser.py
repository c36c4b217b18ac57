"""`serve` in a real browser (Debian's headless Chromium, driven through its chromedriver by Selenium).

The page takes a typed puzzle and shows the solved grid; a running job's page shows its
progress advance. Each test writes a screenshot (listed at the end of the run) under
out/screenshots/ (or $SUDOKU_BATCH_SCREENSHOTS). With CI=true a missing Chromium fails
these tests instead of skipping them.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from solvers import is_solution, parse_puzzle
from tests.conftest import REPO, SAMPLE, SCREENSHOTS
from tests.test_interrupts import kill_session, start, wait_until_gone
from tests.test_web_serve import free_port, wait_served
from web.puzzles import samples

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--window-size=1280,1100",
)  # fmt: skip
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
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"{what} did not happen within {timeout} s")


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
    assert "solved" in browser.find_element(By.ID, "message").text
    screenshot(browser, "solve.png")
    line = browser.find_element(By.ID, "line")  # a pasted line, loaded with Enter: a 16x16 grid
    sixteen = next(s.puzzle for s in samples() if s.box == "4x4")
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
    browser.get(f"{server}/jobs")
    wait_for(lambda: job[:8] in browser.find_element(By.ID, "jobs").text, what="the job in the list")
