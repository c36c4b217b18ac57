"""`serve`'s JSON API and pages, embedded: answers, and clear 4xx JSON errors for bad input."""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from client.batch import BatchClient
from client.output import Record
from client.pool import WarmPool
from solvers import is_solution, parse_puzzle
from solvers.fields import NAMES
from tests.conftest import SAMPLE
from web.app import create_app, portfolios
from web.backend import Backend
from web.puzzles import samples
from web.settings import ServeSettings, is_loopback

LINES = SAMPLE.read_text().splitlines()
UNSOLVABLE = next(s.puzzle for s in samples() if "no solution" in s.name)
SPARSE = next(s.puzzle for s in samples() if "17 random" in s.name)
LOCAL = "http://127.0.0.1"


@pytest.fixture(scope="module")
def backend() -> Iterator[Backend]:
    """An embedded backend: one process for jobs, one for single puzzles; small limits to meet them."""
    settings = ServeSettings(
        max_time_limit=10.0, max_upload_bytes=64 << 10, max_puzzle_chars=4096, max_pending=2
    )
    client = BatchClient(None, workers=1, daemon=True)
    client.pool.start()
    backend = Backend(client, WarmPool(1).fork(), settings)
    yield backend
    backend.close()


@pytest.fixture
def api(backend: Backend) -> Iterator[TestClient]:
    with TestClient(create_app(backend), base_url=LOCAL) as client:
        yield client


def wait_done(api: TestClient, job: str, timeout: float = 60.0) -> dict:
    deadline, step = time.monotonic() + timeout, 0.005
    while time.monotonic() < deadline:
        data = api.get(f"/api/jobs/{job}").json()
        if data["phase"] in ("done", "failed"):
            return data
        time.sleep(step)
        step = min(step * 2, 0.1)
    raise AssertionError(f"job {job} did not finish: {data}")


def assert_error(response, status: int, words: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert words in response.json()["error"], response.json()


def test_solve_answers_a_verified_record_with_the_json_lines_fields(api):
    response = api.post("/api/solve", json={"puzzle": LINES[0], "time_limit": 5})
    assert response.status_code == 200
    record = response.json()
    assert tuple(record) == NAMES and Record(**record).status == "solved"
    assert record["cost"] == 0 and record["input"] == "web" and record["line"] == 1
    assert is_solution(parse_puzzle(LINES[0]), parse_puzzle(record["solution"]).givens)


def test_solve_takes_one_row_per_line_and_answers_on_one_line(api):
    rows = "\n".join(LINES[1][r * 9 : r * 9 + 9] for r in range(9))
    record = api.post("/api/solve", json={"puzzle": rows}).json()
    assert record["status"] == "solved" and record["puzzle"] == LINES[1]


def test_an_unsolvable_puzzle_raced_by_stochastic_solvers_comes_back_approximate_with_its_cost(api):
    body = {"puzzle": UNSOLVABLE, "portfolio": "stochastic", "time_limit": 0.3}
    record = api.post("/api/solve", json=body).json()
    assert record["status"] == "approximate" and record["cost"] > 0 and len(record["solution"]) == 81
    assert api.post("/api/solve", json={"puzzle": UNSOLVABLE}).json()["status"] == "unsolvable"


def test_another_seed_finds_another_solution_of_a_puzzle_that_has_many(api):
    found = {
        api.post("/api/solve", json={"puzzle": SPARSE, "seed": seed}).json()["solution"] for seed in range(4)
    }
    assert len(found) > 1
    again = api.post("/api/solve", json={"puzzle": SPARSE, "seed": 3}).json()["solution"]
    assert again in found


def two_solution_puzzle() -> tuple[str, set[str]]:
    """A puzzle with exactly two solutions: a solved grid without the four cells of a rectangle
    holding a, b / b, a whose rows share a band (swapping a and b keeps every unit whole)."""
    from solvers import solve

    grid = solve(LINES[0]).solution
    assert grid is not None
    for r1 in range(9):
        for r2 in range(r1 + 1, 3 * (r1 // 3) + 3):
            for c1 in range(9):
                for c2 in range(c1 + 1, 9):
                    a, b = grid[9 * r1 + c1], grid[9 * r1 + c2]
                    if (grid[9 * r2 + c1], grid[9 * r2 + c2]) == (b, a):
                        cells = (9 * r1 + c1, 9 * r1 + c2, 9 * r2 + c1, 9 * r2 + c2)
                        puzzle = "".join("." if i in cells else ch for i, ch in enumerate(grid))
                        other = [*grid]
                        for i, ch in zip(cells, (b, a, a, b), strict=True):
                            other[i] = ch
                        return puzzle, {grid, "".join(other)}
    raise AssertionError("no rectangle in the grid")


@pytest.mark.parametrize("portfolio", portfolios())
def test_new_solution_answers_a_grid_not_shown_yet_with_every_portfolio(api, portfolio):
    shown: list[str] = []
    for seed in (0, 7, 8):
        body = {"puzzle": SPARSE, "portfolio": portfolio, "time_limit": 5, "seed": seed, "exclude": shown}
        record = api.post("/api/solve", json=body).json()
        assert record["status"] == "solved" and is_solution(
            parse_puzzle(SPARSE), parse_puzzle(record["solution"]).givens
        )
        assert record["solution"] not in shown and record.get("another", True) is True
        shown.append(record["solution"])


def test_new_solution_says_when_every_solution_has_been_shown(api):
    puzzle, both = two_solution_puzzle()
    first = api.post("/api/solve", json={"puzzle": puzzle, "portfolio": "sat"}).json()
    second = api.post(
        "/api/solve", json={"puzzle": puzzle, "portfolio": "sat", "exclude": [first["solution"]]}
    )
    assert second.json()["another"] is True and {first["solution"], second.json()["solution"]} == both
    third = api.post(
        "/api/solve", json={"puzzle": puzzle, "portfolio": "sat", "exclude": sorted(both)}
    ).json()
    assert (third["another"], third["solutions"], third["solution"] in both) == (False, 2, True)
    unique = api.post("/api/solve", json={"puzzle": LINES[0]}).json()
    again = api.post(
        "/api/solve", json={"puzzle": LINES[0], "seed": 3, "exclude": [unique["solution"]]}
    ).json()
    assert (again["another"], again["solutions"], again["solution"]) == (False, 1, unique["solution"])


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"puzzle": LINES[0], "exclude": ["123"]}, 422, "exclude[0] is not a grid of this puzzle"),
        ({"puzzle": LINES[0], "exclude": [LINES[0]]}, 422, "exclude[0] is not a full grid"),
        ({"puzzle": LINES[0], "exclude": ["1" * 81] * 17}, 422, "exclude"),
        ({"puzzle": LINES[0][:80]}, 422, "80 cells do not make a square grid"),
        ({"puzzle": LINES[0][:80] + "x"}, 422, "not a puzzle"),
        ({"puzzle": "55" + LINES[0][2:]}, 422, "row 1 has two 5s"),
        ({"puzzle": LINES[0], "box": "2x3"}, 422, "81 cells, but a 2x3 box needs"),
        ({"puzzle": LINES[0], "box": "nine"}, 422, "write it as RxC"),
        ({"puzzle": "1" * 5000}, 413, "at most 4,096"),
        ({"puzzle": LINES[0], "time_limit": 11}, 422, "at most 10 s"),
        ({"puzzle": LINES[0], "time_limit": 0}, 422, "time_limit"),
        ({"puzzle": LINES[0], "seed": -1}, 422, "seed"),
        ({"puzzle": LINES[0], "seed": 2**63}, 422, "seed"),
        ({"puzzle": LINES[0], "portfolio": "telepathy"}, 422, "unknown solver 'telepathy'"),
        ({"puzzle": LINES[0], "colour": "red"}, 422, "colour"),
        ({}, 422, "puzzle"),
        ([1, 2], 422, "body"),
    ],
)
def test_a_bad_solve_request_gets_a_json_error_naming_what_is_wrong(api, body, status, words):
    assert_error(api.post("/api/solve", json=body), status, words)


def test_a_solve_body_that_is_not_json_or_too_large_is_refused(api):
    assert_error(api.post("/api/solve", content=b"{puzzle:"), 400, "not JSON")
    assert_error(api.post("/api/solve", content=b"x" * 80000), 413, "at most")  # 4 KB puzzles, 16 shown


def test_more_single_puzzles_at_once_than_the_server_takes_get_a_429(backend):
    from web.solving import Busy

    busy = Busy(1)
    with busy, pytest.raises(Exception, match="try again") as caught:
        busy.__enter__()
    assert caught.value.status == 429 and busy.now == 0


def test_random_puzzles_are_unique_puzzles_of_the_asked_size_and_level(api):
    made = api.get("/api/random", params={"box": "2x3", "level": "easy", "seed": 5}).json()
    assert made["level"] == "easy" and made["box"] == "2x3" and len(made["puzzle"]) == 36
    assert api.post("/api/solve", json={"puzzle": made["puzzle"], "box": "2x3"}).json()["status"] == "solved"
    assert api.get("/api/random", params={"box": "2x3", "level": "easy", "seed": 5}).json() == made
    assert len(api.get("/api/random").json()["puzzle"]) == 81


@pytest.mark.parametrize(
    ("params", "status", "words"),
    [
        ({"box": "9x9"}, 422, "choose one of"),
        ({"level": "impossible"}, 422, "choose one of"),
        ({"seed": "-3"}, 422, "whole number"),
        ({"seed": "1e99"}, 422, "whole number"),
        ({"box": "2x2", "level": "expert"}, 422, "no unique 4x4 puzzle is expert, each is easy"),
    ],
)
def test_a_bad_random_request_gets_a_json_error(api, params, status, words):
    assert_error(api.get("/api/random", params=params), status, words)


def test_every_sample_is_a_puzzle_of_its_box(api):
    listed = api.get("/api/samples").json()
    assert len(listed) >= 10 and {s["box"] for s in listed} >= {"2x2", "3x3", "4x4", "5x5"}
    for s in listed:
        assert parse_puzzle(s["puzzle"], s["box"]).box.n == int(s["box"][0]) * int(s["box"][2])


def test_an_uploaded_corpus_becomes_a_job_with_progress_summary_and_downloads(api):
    body = "\n".join([*LINES[:30], "not a puzzle"]) + "\n"
    made = api.post("/api/jobs", params={"name": "mine.txt", "time_limit": "2"}, content=body.encode())
    assert made.status_code == 201
    job = made.json()["job"]
    data = wait_done(api, job)
    assert data["total"] == 31 and data["done"] == 31 and data["counts"] == {"solved": 30, "invalid": 1}
    assert data["name"] == "mine.txt" and data["options"] == {"time_limit": "2.0"}
    assert data["summary"]["wins"] == {"propagation": 30} and set(data["summary"]["time_ms"]) >= {
        "p50",
        "max",
    }
    assert data["summary"]["done_within"][-1][0] == 30 and data["summary"]["problems"][0]["line"] == 31
    assert data["results"]["state"] == "all"
    assert job in [j["job"] for j in api.get("/api/jobs").json()]
    lines = api.get(f"/api/jobs/{job}/results").text.splitlines()
    records = sorted((json.loads(line) for line in lines), key=lambda r: r["index"])
    assert [r["puzzle"] for r in records] == [*LINES[:30], "not a puzzle"]
    rows = api.get(f"/api/jobs/{job}/results", params={"format": "csv"}).text.splitlines()
    assert rows[0] == ",".join(NAMES) and len(rows) == 32
    plots = api.get(f"/jobs/{job}/plots").text
    assert plots.count("<svg") >= 3 and "Cactus plot" in plots
    assert api.get(f"/api/jobs/{job}/results", params={"format": "csv"}).text.splitlines() == rows  # kept


def test_a_gzip_upload_is_unpacked_and_a_gzip_bomb_is_refused(api):
    made = api.post("/api/jobs", content=gzip.compress("\n".join(LINES[:5]).encode()))
    assert wait_done(api, made.json()["job"])["counts"] == {"solved": 5}
    assert_error(api.post("/api/jobs", content=gzip.compress(b"." * (1 << 20))), 413, "unpacks to more than")
    assert_error(api.post("/api/jobs", content=b"\x1f\x8bnot gzip at all"), 422, "not valid gzip")


def test_an_upload_carries_its_priority_and_one_outside_the_classes_is_refused(api, backend):
    assert '<select id="priority">' not in api.get("/jobs").text  # embedded: no queue to order
    job = api.post("/api/jobs", params={"priority": "low"}, content=LINES[0].encode()).json()["job"]
    wait_done(api, job)
    assert backend.client.store.meta(job)["priority"] == "low"
    refused = api.post("/api/jobs", params={"priority": "urgent"}, content=LINES[0].encode())
    assert_error(refused, 422, "priority 'urgent': must be one of high, normal, low")


def test_an_upload_without_a_time_limit_gets_the_default_within_the_servers_cap(api):
    job = api.post("/api/jobs", content=LINES[0].encode()).json()["job"]
    assert wait_done(api, job)["options"]["time_limit"] == "10.0"  # 20 s, capped by --max-time-limit 10
    job = api.post("/api/jobs", params={"time_limit": "3"}, content=LINES[0].encode()).json()["job"]
    assert wait_done(api, job)["options"]["time_limit"] == "3.0"
    assert 'placeholder="10 (default)"' in api.get("/jobs").text  # what a blank field gets


def test_a_single_puzzle_without_a_time_limit_gets_the_command_lines_20_s_within_the_cap(api):
    from pipeline.contract.tasks import DEFAULT_TIME_LIMIT_S
    from web.solving import SolveRequest, check_request

    asked = SolveRequest(puzzle=LINES[0])
    assert check_request(asked, ServeSettings()).time_limit == DEFAULT_TIME_LIMIT_S == 20
    assert check_request(asked, ServeSettings(max_time_limit=10)).time_limit == 10  # the server's cap
    page = api.get("/").text  # the page's field shows it (this server's cap: 10 s)
    assert 'id="time-limit" type="number" min="0.01" max="10.0" step="any" value="10"' in page


def test_a_gzip_of_several_members_is_read_whole_as_the_command_line_reads_it(api, tmp_path):
    """`cat a.gz b.gz`: the upload gets every member's puzzles, as `solve` of the same bytes does."""
    from pipeline.engine.reader import read_blocks

    data = b"".join(gzip.compress(("\n".join(part) + "\n").encode()) for part in (LINES[:50], LINES[50:95]))
    job = api.post("/api/jobs", content=data).json()["job"]
    assert wait_done(api, job)["counts"] == {"solved": 95}
    (tmp_path / "both.gz").write_bytes(data)
    assert sum(len(b) for b in read_blocks(str(tmp_path / "both.gz"))) == 95
    bomb = gzip.compress(LINES[0].encode() + b"\n") + gzip.compress(b"." * (1 << 20))  # member 2: 1 MB
    assert_error(api.post("/api/jobs", content=bomb), 413, "unpacks to more than 65,536 bytes")
    assert_error(api.post("/api/jobs", content=data[:-20]), 422, "the upload is not valid gzip")


@pytest.mark.parametrize(
    ("params", "body", "status", "words"),
    [
        ({}, b"x" * (65 << 10), 413, "at most 65,536"),
        ({}, b"  \n\n", 422, "holds no puzzle"),
        ({"time_limit": "eleven"}, b"1", 422, "not a number"),
        ({"time_limit": "11"}, b"1", 422, "at most 10"),
        ({"time_limit": "nan"}, b"1", 422, "time_limit"),
        ({"portfolio": "telepathy"}, b"1", 422, "unknown solver"),
        ({"box": "3y3"}, LINES[0].encode(), 422, "write it as RxC"),
        ({"name": "n" * 300}, b"1", 422, "at most 200"),
    ],
)
def test_a_bad_upload_gets_a_json_error(api, params, body, status, words):
    assert_error(api.post("/api/jobs", params=params, content=body), status, words)


@pytest.mark.parametrize(
    "job", ["0123456789abcdef0123456789abcdef", "*", "abc", "..x", "sbatch:workers", "%2e%2e"]
)
def test_an_unknown_or_malformed_job_id_is_a_404_everywhere(api, job):
    for response in (
        api.get(f"/api/jobs/{job}"),
        api.get(f"/api/jobs/{job}/results"),
        api.delete(f"/api/jobs/{job}"),
        api.get(f"/jobs/{job}/plots"),
    ):
        assert_error(response, 404, "no job")
    assert api.get(f"/jobs/{job}").status_code == 404


def test_purge_deletes_a_job(api):
    job = api.post("/api/jobs", content=LINES[0].encode()).json()["job"]
    wait_done(api, job)
    assert api.delete(f"/api/jobs/{job}").json() == {"job": job, "removed": 1}
    assert api.get(f"/api/jobs/{job}").status_code == 404
    assert job not in [j["job"] for j in api.get("/api/jobs").json()]


def test_the_workers_panel_lists_this_servers_processes_when_embedded(api, backend):
    data = api.get("/api/workers").json()
    assert data["mode"] == "embedded"
    names = {w["name"] for w in data["workers"]}
    assert names == {f"local:{pid}" for pid in [*backend.client.pool.pids(), *backend.pool.pids()]}


def test_unknown_routes_and_methods_answer_json(api):
    assert_error(api.get("/api/nothing"), 404, "no such page")
    assert_error(api.put("/api/solve"), 405, "PUT is not allowed")


def test_the_pages_render_and_escape_what_they_show(api):
    page = api.get("/")
    assert page.status_code == 200 and 'id="grid"' in page.text and "16x16, expert" in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"
    job = api.post("/api/jobs", params={"name": "<script>alert(1)</script>"}, content=LINES[0].encode())
    job = job.json()["job"]
    wait_done(api, job)
    text = api.get(f"/jobs/{job}").text
    assert "<script>alert(1)</script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "Jobs" in api.get("/jobs").text
    assert "No job" in api.get("/jobs/0123456789abcdef").text


def test_the_static_files_are_served(api):
    for name in ("solve.js", "jobs.js", "job.js", "common.js", "style.css"):
        assert api.get(f"/static/{name}").status_code == 200


TOKEN = "t0ken-for-the-tests-1234"


@pytest.fixture
def guarded(backend: Backend) -> Iterator[TestClient]:
    """The app behind a token, bound to every address (as `serve --host 0.0.0.0 --token ...`)."""
    settings = ServeSettings(host="0.0.0.0", token=TOKEN)
    with TestClient(create_app(backend, settings), base_url="http://sudoku.example:8000") as client:
        yield client


def test_with_a_token_every_request_without_it_is_refused(guarded):
    for response in (
        guarded.get("/"),
        guarded.get("/api/jobs"),
        guarded.post("/api/solve", json={"puzzle": LINES[0]}),
        guarded.get("/static/solve.js"),
        guarded.get("/api/jobs", headers={"authorization": "Bearer wrong-token-of-some-length"}),
    ):
        assert_error(response, 401, "needs its token")
    guarded.cookies.set("sbatch_token", "wrong")
    assert_error(guarded.get("/api/jobs"), 401, "needs its token")


def test_the_token_is_taken_as_a_bearer_header_or_once_in_the_address_then_as_a_cookie(guarded):
    bearer = {"authorization": f"Bearer {TOKEN}"}
    assert guarded.post("/api/solve", json={"puzzle": LINES[0]}, headers=bearer).json()["status"] == "solved"
    opened = guarded.get("/jobs", params={"token": TOKEN, "x": "1"}, follow_redirects=False)
    assert opened.status_code == 303 and opened.headers["location"] == "/jobs?x=1"
    assert "HttpOnly" in opened.headers["set-cookie"] and "SameSite=Strict" in opened.headers["set-cookie"]
    guarded.cookies.set("sbatch_token", TOKEN)
    assert guarded.get("/jobs").status_code == 200
    assert guarded.get("/api/jobs", params={"token": TOKEN}).status_code == 200  # an API address: no redirect


def test_without_a_token_only_loopback_host_names_are_answered(api):
    assert_error(api.get("/api/jobs", headers={"host": "rebound.example:8000"}), 403, "not this machine")
    for host in ("localhost:8000", "127.0.0.1", "[::1]:8000"):
        assert api.get("/api/workers", headers={"host": host}).status_code == 200


def test_a_page_of_another_origin_cannot_submit_solve_or_purge(api):
    evil = {"origin": "http://evil.example"}
    assert_error(api.post("/api/jobs", content=LINES[0].encode(), headers=evil), 403, "may not change")
    assert_error(api.post("/api/solve", json={"puzzle": LINES[0]}, headers=evil), 403, "may not change")
    assert_error(api.delete("/api/jobs/0123456789abcdef", headers=evil), 403, "may not change")
    same = {"origin": LOCAL}
    assert api.post("/api/solve", json={"puzzle": LINES[0]}, headers=same).status_code == 200


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"host": "0.0.0.0"}, "give --token"),
        ({"host": "192.168.1.5"}, "give --token"),
        ({"token": "short"}, "at least 16"),
        ({"token": "has spaces in it, lots of them"}, "pattern"),
        ({"max_time_limit": 0}, "greater than 0"),
        ({"max_upload_bytes": 2 << 30}, "less than or equal"),
    ],
)
def test_serve_settings_out_of_range_are_refused(fields, words):
    with pytest.raises(ValueError, match=words):
        ServeSettings(**fields)


def test_loopback_binds_need_no_token():
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        assert is_loopback(ServeSettings(host=host).host)


def test_a_puzzle_process_that_died_is_replaced_and_the_next_puzzle_is_solved(api, backend):
    import os
    import signal

    (pid,) = backend.pool.pids()
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the first request may still meet the dying pool: 503, said so
        response = api.post("/api/solve", json={"puzzle": LINES[2]})
        if response.status_code == 200:
            break
        assert_error(response, 503, "died")
        time.sleep(0.1)
    assert response.json()["status"] == "solved" and backend.pool.pids() != [pid]


@pytest.fixture(scope="module")
def bounded() -> Iterator[Backend]:
    """An embedded backend that keeps at most two jobs."""
    client = BatchClient(None, workers=1, daemon=True)
    client.pool.start()
    backend = Backend(client, WarmPool(1).fork(), ServeSettings(max_jobs_kept=2))
    yield backend
    backend.close()


def test_an_embedded_server_keeps_its_bounds_dropping_the_oldest_finished_jobs_and_says_so(
    bounded, monkeypatch
):
    import web.backend
    import web.retention

    trims: list[int] = []
    monkeypatch.setattr(web.backend, "release_memory", lambda: trims.append(1))
    with TestClient(create_app(bounded), base_url=LOCAL) as api:
        jobs = []
        for k in range(3):
            jobs.append(
                api.post("/api/jobs", params={"name": f"c{k}.txt"}, content=LINES[k].encode()).json()["job"]
            )
            wait_done(api, jobs[-1])
        assert [r["job"] for r in api.get("/api/jobs").json()] == [jobs[2], jobs[1]]  # newest first
        kept = api.get("/api/limits").json()
        assert (kept["max_jobs_kept"], kept["jobs_kept"], kept["dropped_total"]) == (2, 2, 1)
        assert (kept["dropped"][0]["job"], kept["dropped"][0]["name"], kept["dropped"][0]["why"]) == (
            jobs[0],
            "c0.txt",
            "jobs",
        )
        assert_error(api.get(f"/api/jobs/{jobs[0]}"), 410, "keeps at most 2 jobs")
        assert "was dropped" in api.get(f"/jobs/{jobs[0]}").text and trims
        monkeypatch.setattr(
            web.retention, "resident_mb", lambda: 5000.0
        )  # past 1,024 MB: only the newest stays
        assert [r["job"] for r in api.get("/api/jobs").json()] == [jobs[2]]
        assert api.get("/api/limits").json()["dropped"][0] | {"at": 0} == {
            "job": jobs[1],
            "name": "c1.txt",
            "why": "memory",
            "at": 0,
        }
        before = len(trims)
        api.delete(f"/api/jobs/{jobs[2]}")
        assert len(trims) == before + 1  # a purge hands the freed memory back too


def test_the_bound_never_drops_a_running_job_or_the_newest():
    from web.retention import Retention

    rows = [
        {"job": "a", "name": "a", "phase": "solving", "created": 1.0},
        {"job": "b", "name": "b", "phase": "done", "created": 2.0},
        {"job": "c", "name": "c", "phase": "done", "created": 3.0},
    ]
    keep_one = Retention(max_jobs=1, max_memory_mb=1 << 20)
    assert keep_one.over(rows) == (rows[1], "jobs")
    assert keep_one.over([rows[0], rows[2]]) is None  # a running job and the newest: nothing can go
    assert Retention(max_jobs=10, max_memory_mb=1 << 20).over(rows) is None


def test_the_records_of_a_job_that_writes_a_dataset_are_not_downloaded_but_said_where_they_are(
    api, backend, tmp_path
):
    job = backend.client.submit(str(SAMPLE), dataset=f"{tmp_path}/out/", format="jsonl")
    for _ in job.chunks(keep=True):
        pass
    assert_error(api.get(f"/api/jobs/{job.id}/results"), 404, f"writes a dataset to {tmp_path}/out/")
