"""Who may use the server, and the headers that keep the page safe in a browser.

One pure ASGI middleware, in front of everything: the token (a Bearer header for programs, a
cookie set by the login form for people), the Host check against DNS rebinding when there is
no token, cross-site form posts refused, and the security headers on every response.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final
from urllib.parse import quote

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SESSION_COOKIE: Final = "kb_session"
SESSION_MAX_AGE_S: Final = 7 * 24 * 3600  # a working week and the weekend, then log in again
# The cookie holds a MAC of the token, not the token: a leaked cookie does not give away the
# token, and changing the token logs every browser out.
_SESSION_CONTEXT: Final = b"kb serve session v1"

CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS: Final = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),  # record and search URLs can quote a customer's log
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
# Reachable without the token: what a browser needs to show the login form.
PUBLIC_PATHS: Final = frozenset({"/login"})
PUBLIC_PREFIXES: Final = ("/static/",)
UNSAFE_METHODS: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def session_value(token: str) -> str:
    return hmac.new(token.encode("utf-8"), _SESSION_CONTEXT, hashlib.sha256).hexdigest()


def same_secret(given: str, expected: str) -> bool:
    """Constant-time comparison (on bytes: compare_digest refuses non-ASCII str)."""
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode("utf-8"))


def wants_json(path: str) -> bool:
    """Paths that answer programs: their errors are JSON, never a page or a redirect."""
    return path.startswith("/api/") or path in ("/api", "/healthz", "/openapi.json")


def safe_next(target: str | None) -> str:
    """A local path to go back to after logging in; anything else (another site) becomes /."""
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")):
        return "/"
    return target


def is_loopback_host(host_header: str) -> bool:
    """Whether a Host header names this machine (`localhost`, 127.x, [::1]), port aside."""
    host = host_header.strip().lower()
    if host.startswith("["):
        host = host[1 : host.find("]")] if "]" in host else host
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _headers(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in scope.get("headers", []):
        out.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
    return out


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


class SecurityMiddleware:
    """Token, Host and cross-site checks before the app; security headers after it."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token
        self.session = session_value(token) if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _value in headers}
                headers += [(name, value) for name, value in SECURITY_HEADERS]
                if b"cache-control" not in present:
                    headers.append((b"cache-control", b"no-store"))  # pages can hold a paste
                message["headers"] = headers
            await send(message)

        refusal = self._refusal(scope)
        if refusal is not None:
            status, body, content_type, extra = refusal
            headers = [(b"content-type", content_type), *extra]
            await send_with_headers(
                {"type": "http.response.start", "status": status, "headers": headers}
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send_with_headers)

    def _refusal(self, scope: Scope) -> tuple[int, bytes, bytes, list[tuple[bytes, bytes]]] | None:
        """(status, body, content type, headers) when the request may not go on, else None."""
        path: str = scope.get("path", "/")
        headers = _headers(scope)
        if self.token is None:
            # Loopback only: a page on another site that rebinds its name to 127.0.0.1 must not
            # read this server, so the Host must name this machine too.
            if not is_loopback_host(headers.get("host", "")):
                return _error(path, 403, "forbidden", "this server answers only to localhost")
            return None
        if path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES):
            return None
        authorization = headers.get("authorization", "")
        scheme, _, credentials = authorization.partition(" ")
        if scheme.lower() == "bearer":
            if same_secret(credentials.strip(), self.token):
                return None
            return _error(
                path,
                401,
                "unauthorized",
                "the token is wrong",
                [(b"www-authenticate", b'Bearer realm="kb", error="invalid_token"')],
            )
        cookie = _cookie(headers.get("cookie", ""), SESSION_COOKIE)
        if cookie is not None and self.session and same_secret(cookie, self.session):
            if scope.get("method") in UNSAFE_METHODS and _cross_site(headers):
                return _error(path, 403, "forbidden", "a form on another site cannot post here")
            return None
        if wants_json(path):
            return _error(
                path,
                401,
                "unauthorized",
                "this server needs a token: send `Authorization: Bearer TOKEN`",
                [(b"www-authenticate", b'Bearer realm="kb"')],
            )
        # A person without the cookie: to the login form, and back here afterwards (a form post
        # goes back to the form it came from).
        query = scope.get("query_string", b"").decode("latin-1")
        back = path + ("?" + query if query and scope.get("method") in ("GET", "HEAD") else "")
        location = "/login?next=" + quote(back, safe="")
        return 303, b"", b"text/plain; charset=utf-8", [(b"location", location.encode("latin-1"))]


def _cross_site(headers: dict[str, str]) -> bool:
    """A browser's cross-site request (SameSite=Strict already keeps the cookie off those;
    this is the second lock)."""
    fetch_site = headers.get("sec-fetch-site")
    if fetch_site is not None:
        return fetch_site not in ("same-origin", "none")
    origin = headers.get("origin")
    if origin is None:
        return False  # not a browser's cross-site form (browsers send Origin on those)
    if origin == "null":
        return True  # a sandboxed or file: page
    return origin.split("://", 1)[-1] != headers.get("host", "")


def _error(
    path: str,
    status: int,
    code: str,
    message: str,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> tuple[int, bytes, bytes, list[tuple[bytes, bytes]]]:
    if wants_json(path):
        body = json.dumps({"error": {"status": status, "code": code, "message": message}})
        return status, body.encode(), b"application/json", extra or []
    return status, message.encode() + b"\n", b"text/plain; charset=utf-8", extra or []
