"""Errors a request gets: one JSON object `{"error": reason}` with a 4xx (or 5xx) status, no traceback."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

if TYPE_CHECKING:
    from client.pool import WarmPool

ANSWER_GRACE_S = 30.0  # beyond a puzzle's time limit (loading, queueing, rendering) before a 504


class ApiError(Exception):
    """A request the server refuses: `status` (4xx: the caller's fault) and a one-line reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


async def in_pool(
    pool: WarmPool, seconds: float, late: str, died: str, fn: Callable[..., Any], *args: Any
) -> Any:
    """`fn(*args)` in a puzzle process without blocking the event loop: a 504 ("`late` within `seconds`")
    past `seconds`, a 503 (`died`) when the process died on it (the pool starts a new one)."""
    try:
        return await asyncio.wait_for(asyncio.wrap_future(pool.submit(fn, *args)), seconds)
    except TimeoutError:
        raise ApiError(504, f"{late} within {seconds:g} s") from None
    except BrokenProcessPool:
        raise ApiError(503, died) from None


def error_response(status: int, reason: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The JSON error every endpoint answers with."""
    return JSONResponse({"error": reason}, status_code=status, headers=headers)


async def on_api_error(request: Request, exc: Exception) -> Response:
    """ApiError -> its JSON error."""
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.reason)


async def on_http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no such route, wrong method) as JSON errors too."""
    assert isinstance(exc, HTTPException)
    reasons = {
        404: f"no such page or endpoint: {request.url.path}",
        405: f"{request.method} is not allowed here",
    }
    return error_response(exc.status_code, reasons.get(exc.status_code, str(exc.detail)), exc.headers)


async def on_unexpected(request: Request, exc: Exception) -> Response:
    """Anything else: a 500 naming the kind of failure (the details stay in the server's log)."""
    return error_response(500, f"internal error: {type(exc).__name__}")
