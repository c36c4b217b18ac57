"""The door of the server: the token, the Host and Origin checks, and the headers every answer carries.

With a token (required off loopback) every request carries it (`Authorization: Bearer`, or the cookie a page
opened once with `?token=` sets, then redirected without it); without one the Host must name this machine
(DNS rebinding); a POST or DELETE from another origin is refused (CSRF); answers forbid framing and sniffing.
"""

from __future__ import annotations

import hmac
import json
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from web.settings import LOOPBACK_NAMES, ServeSettings

COOKIE = "sbatch_token"
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (
        b"content-security-policy",
        b"default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        b"frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    ),
]


class Guard:
    """ASGI middleware in front of every route (see the module docstring)."""

    def __init__(self, app: ASGIApp, settings: ServeSettings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        refusal = self._refusal(scope, headers, query)
        if refusal is not None:
            data = json.dumps({"error": refusal[1]}).encode()
            head = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
            await _send(send, refusal[0], head, data)
            return
        token = self.settings.token
        page = not scope["path"].startswith("/api/")
        if token is not None and page and scope["method"] == "GET" and _same(query.get("token"), token):
            await _redirect_with_cookie(send, scope, query, token)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _refusal(
        self, scope: Scope, headers: dict[str, str], query: dict[str, str]
    ) -> tuple[int, str] | None:
        """(status, reason) when the request may not go on, else None."""
        host = headers.get("host", "")
        token = self.settings.token
        if token is None and _hostname(host) not in (*LOOPBACK_NAMES, self.settings.host):
            return 403, f"Host {host!r} is not this machine: the server answers loopback names only"
        if scope["method"] not in SAFE_METHODS:
            origin = headers.get("origin")
            if origin is not None and urlsplit(origin).netloc != host:
                return 403, f"a request from {origin!r} may not change anything on this server"
        if token is not None:
            given = _bearer(headers.get("authorization")) or _cookie(headers.get("cookie"))
            if not (_same(given, token) or scope["method"] == "GET" and _same(query.get("token"), token)):
                return 401, (
                    "this server needs its token: send `Authorization: Bearer TOKEN`, or open the "
                    "address `sudoku-batch serve` printed (it ends in ?token=...)"
                )
        return None


def _hostname(host: str) -> str:
    """The name in a Host header, without the port (`[::1]:8000` -> `::1`)."""
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _bearer(value: str | None) -> str | None:
    if value and value[:7].lower() == "bearer ":
        return value[7:].strip()
    return None


def _cookie(value: str | None) -> str | None:
    if not value:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(value)
    except CookieError:  # a malformed cookie header carries no token
        return None
    morsel = jar.get(COOKIE)
    return morsel.value if morsel is not None else None


def _same(given: str | None, token: str) -> bool:
    """Compare in constant time (a wrong token's timing tells nothing about the right one)."""
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


async def _send(send: Send, status: int, head: list[tuple[bytes, bytes]], body: bytes = b"") -> None:
    await send({"type": "http.response.start", "status": status, "headers": [*head, *HEADERS]})
    await send({"type": "http.response.body", "body": body})


async def _redirect_with_cookie(send: Send, scope: Scope, query: dict[str, str], token: str) -> None:
    """Keep the token in an HttpOnly, same-site cookie and reload the page without it in the address."""
    rest = urlencode({k: v for k, v in query.items() if k != "token"})
    location = scope.get("root_path", "") + scope["path"] + (f"?{rest}" if rest else "")
    cookie = f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
    await _send(send, 303, [(b"location", location.encode("latin-1")), (b"set-cookie", cookie.encode())])
