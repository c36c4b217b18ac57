"""The routes: three pages (one puzzle, jobs, one job) and the JSON API behind them. Pages are Jinja2 with
autoescaping, their scripts write text nodes only; every number in a request is bounded here.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import jinja2
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from client import numbers
from pipeline.contract.formats import FORMATS, OUTPUTS
from pipeline.contract.tasks import DEFAULT_PRIORITY, MAX_SEED, PRIORITIES
from solvers.generate.difficulty import LEVEL_NAMES
from solvers.generate.generator import random_seed
from web import another
from web.another import MAX_EXCLUDE, excluded_grids
from web.backend import Backend, check_job_id
from web.errors import ApiError, in_pool, on_api_error, on_http_error, on_unexpected
from web.guard import Guard
from web.puzzles import BOXES, check_random, random_puzzle, samples
from web.settings import ServeSettings
from web.solving import MAX_OPTION_CHARS, SolveRequest, check_portfolio, check_request

HERE = Path(__file__).parent
MAX_JSON_BYTES_OVER_PUZZLE = 4096  # room for the other fields of a solve request
RANDOM_WAIT_S = 30.0
DOWNLOADS = [name for name in OUTPUTS if FORMATS[name].lines]  # records streamed as they are read


def portfolios() -> list[str]:
    """The portfolio names the page offers: presets, then every solver alone."""
    from solvers import registry
    from solvers.race.portfolio import PRESETS

    return [*PRESETS, *registry.names()]


def create_app(backend: Backend, settings: ServeSettings | None = None) -> Starlette:
    """The ASGI app over `backend`; `settings` (default: the backend's) give the token and the limits."""
    settings = settings or backend.settings
    static = Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")
    makers = (page_routes, solve_routes, job_routes, metrics_routes)
    routes = [route for make in makers for route in make(backend, settings)]
    handlers = {ApiError: on_api_error, HTTPException: on_http_error, Exception: on_unexpected}
    guard = Middleware(Guard, settings=settings)
    return Starlette(routes=[*routes, static], middleware=[guard], exception_handlers=handlers)


def page_routes(backend: Backend, settings: ServeSettings) -> list[Route]:
    """The three pages (one puzzle, jobs, one job) and a job's plots, rendered with autoescaping."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True)
    templates = Jinja2Templates(env=env)
    templates.env.globals.update(embedded=backend.embedded, settings=settings)
    for name in ("count", "duration", "per_second", "sig"):  # numbers as the scripts write them
        templates.env.filters[name] = getattr(numbers, name)

    async def solve_page(request: Request) -> Response:
        context = {"samples": samples(), "levels": LEVEL_NAMES, "boxes": BOXES, "portfolios": portfolios()}
        return templates.TemplateResponse(request, "solve.html", context)

    async def jobs_page(request: Request) -> Response:
        classes = [] if backend.embedded else list(PRIORITIES)  # embedded: no queue to order
        context = {"portfolios": portfolios(), "priorities": classes, "default": DEFAULT_PRIORITY}
        return templates.TemplateResponse(request, "jobs.html", context)

    def job_page(request: Request) -> Response:
        job = request.path_params["job"]
        try:
            data = backend.job(job)
        except ApiError as exc:
            context = {"job": job[:80], "reason": exc.reason}
            return templates.TemplateResponse(request, "missing.html", context, status_code=exc.status)
        return templates.TemplateResponse(request, "job.html", {"job": data})

    def job_plots(request: Request) -> Response:
        figures = backend.plots(request.path_params["job"])
        return templates.TemplateResponse(request, "plots.html", {"figures": figures})

    pages = {"/": solve_page, "/jobs": jobs_page, "/jobs/{job}": job_page, "/jobs/{job}/plots": job_plots}
    return [Route(path, page) for path, page in pages.items()]


def solve_routes(backend: Backend, settings: ServeSettings) -> list[Route]:
    """The one-puzzle API: solve (or another solution), a random puzzle, the samples."""

    async def api_solve(request: Request) -> Response:
        most = settings.max_puzzle_chars * (1 + MAX_EXCLUDE) + MAX_JSON_BYTES_OVER_PUZZLE  # grids shown too
        body = await read_body(request, most)
        try:
            req = SolveRequest.model_validate(parse_json(body))
        except ValidationError as exc:
            raise ApiError(422, validation_reason(exc)) from None
        checked = check_request(req, settings)
        shown = excluded_grids(req.exclude, checked.box, settings.max_puzzle_chars)
        record = await backend.solver.solve(checked)
        if req.exclude:
            record = await another.answer(
                backend.pool, record, shown, checked.text, checked.box, checked.seed, checked.time_limit
            )
        return JSONResponse(record)

    async def api_random(request: Request) -> Response:
        q = request.query_params
        box, level = q.get("box", "3x3"), q.get("level") or None
        try:
            check_random(box, level)
        except ValueError as exc:
            raise ApiError(422, str(exc)) from None
        seed = int_param(q.get("seed"), "seed", 0, MAX_SEED)
        seed = random_seed() if seed is None else seed
        died = "the puzzle process died (a new one is started): ask again"
        made = await in_pool(
            backend.pool, RANDOM_WAIT_S, "no puzzle made", died, random_puzzle, box, level, seed
        )
        if made is None:
            raise ApiError(422, f"no {level} puzzle turned up for {box} boxes; try another difficulty")
        return JSONResponse(made)

    async def api_samples(request: Request) -> Response:
        return JSONResponse([s.__dict__ for s in samples()])

    return [
        Route("/api/solve", api_solve, methods=["POST"]),
        Route("/api/random", api_random),
        Route("/api/samples", api_samples),
    ]


def job_routes(backend: Backend, settings: ServeSettings) -> list[Route]:
    """The jobs' API: list, submit, read, purge, download results; the workers and the limits."""

    async def api_submit(request: Request) -> Response:
        q = request.query_params
        limit = float_param(q.get("time_limit"), "time_limit", settings.max_time_limit)
        portfolio = str_param(q.get("portfolio"), "portfolio")
        box = str_param(q.get("box"), "box")
        name = str_param(q.get("name"), "name") or "upload"
        priority = str_param(q.get("priority"), "priority") or DEFAULT_PRIORITY  # checked by the submit (422)
        check_portfolio(portfolio)
        data = await read_body(request, settings.max_upload_bytes)
        job = await asyncio.to_thread(backend.submit, name, data, limit, portfolio, box, priority)
        return JSONResponse({"job": job, "url": f"/jobs/{job}"}, status_code=201)

    def api_job(request: Request) -> Response:
        return JSONResponse(backend.job(request.path_params["job"]))

    def api_purge(request: Request) -> Response:
        job = request.path_params["job"]
        return JSONResponse({"job": job, "removed": backend.purge(job)})

    def api_results(request: Request) -> Response:
        job = check_job_id(request.path_params["job"])
        fmt = request.query_params.get("format", "jsonl")
        if fmt not in DOWNLOADS:
            raise ApiError(422, f"format {fmt[:20]!r}: choose {' or '.join(DOWNLOADS)}")
        chunks = backend.records(job, fmt)
        headers = {"content-disposition": f'attachment; filename="{job}.{fmt}"'}
        return StreamingResponse(chunks, media_type=FORMATS[fmt].media_type, headers=headers)

    return [
        Route("/api/jobs", lambda request: JSONResponse(backend.list_jobs()), methods=["GET"]),
        Route("/api/jobs", api_submit, methods=["POST"]),
        Route("/api/jobs/{job}", api_job, methods=["GET"]),
        Route("/api/jobs/{job}", api_purge, methods=["DELETE"]),
        Route("/api/jobs/{job}/results", api_results),
        Route("/api/workers", lambda request: JSONResponse(backend.workers())),
        Route("/api/limits", lambda request: JSONResponse(backend.limits())),
    ]


def metrics_routes(backend: Backend, settings: ServeSettings) -> list[Route]:
    """`/metrics`: the fleet in the Prometheus text format (`web.metrics`), behind the page's token; an
    embedded server has no fleet: 404 with the reason in one line."""
    if backend.embedded:
        reason = "no metrics: this server solves in its own processes (start it with --broker URL)\n"
        return [Route("/metrics", lambda request: PlainTextResponse(reason, status_code=404))]
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

    from web.metrics import FleetCollector

    registry = CollectorRegistry(auto_describe=True)
    registry.register(FleetCollector(backend))

    def metrics(request: Request) -> Response:
        return Response(generate_latest(registry), headers={"content-type": CONTENT_TYPE_PLAIN_0_0_4})

    return [Route("/metrics", metrics)]


async def read_body(request: Request, most: int) -> bytes:
    """The request body, refused with 413 past `most` bytes (announced or as it streams in)."""
    announced = request.headers.get("content-length")
    if announced is not None and announced.isdigit() and int(announced) > most:
        raise ApiError(413, f"the body is {int(announced):,} bytes; at most {most:,} are accepted")
    parts, size = [], 0
    async for part in request.stream():
        size += len(part)
        if size > most:
            raise ApiError(413, f"the body is more than {most:,} bytes, the most accepted")
        parts.append(part)
    return b"".join(parts)


def parse_json(body: bytes) -> Any:
    """The JSON in a request body (400 naming where it breaks)."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"the body is not JSON: {exc}") from None


def validation_reason(exc: ValidationError) -> str:
    """Pydantic's first complaint, as `field: reason`."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "body"
    return f"{where}: {first.get('msg', 'invalid')}"


def float_param(text: str | None, name: str, most: float) -> float | None:
    """A query parameter in seconds, (0, most]; None when absent; 422 otherwise."""
    if text in (None, ""):
        return None
    try:
        value = float(text)
    except ValueError:
        raise ApiError(422, f"{name} {text[:20]!r} is not a number") from None
    if not (math.isfinite(value) and 0 < value <= most):
        raise ApiError(422, f"{name} {value:g}: must be above 0 and at most {most:g} seconds")
    return value


def int_param(text: str | None, name: str, least: int, most: int) -> int | None:
    """An integer query parameter in [least, most]; None when absent; 422 otherwise."""
    if text in (None, ""):
        return None
    if not (text.isascii() and text.isdigit()) or len(text) > 20 or not least <= int(text) <= most:
        raise ApiError(422, f"{name} {text[:24]!r}: must be a whole number from {least} to {most}")
    return int(text)


def str_param(text: str | None, name: str) -> str | None:
    """A short text query parameter (422 past MAX_OPTION_CHARS); None when absent or empty."""
    if not text:
        return None
    if len(text) > MAX_OPTION_CHARS:
        raise ApiError(422, f"{name} is {len(text)} characters; at most {MAX_OPTION_CHARS}")
    return text
