"""The ASGI application: routes, errors as JSON or pages, the security middleware, the lifespan
that loads the knowledge base once per worker and watches its revision.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from kb.errors import DatabaseError, InputError, KbError, NotFound
from kb.serve import api, pages
from kb.serve.config import ServeConfig
from kb.serve.http import HttpError
from kb.serve.security import SecurityMiddleware, wants_json
from kb.serve.service import MatchTimedOut, Service

STATIC: Final = Path(__file__).parent / "static"
log = logging.getLogger("kb.serve")


def _status_code(status: int) -> str:
    return {
        400: "bad_request",
        404: "not_found",
        405: "method_not_allowed",
        413: "too_large",
        415: "unsupported_media_type",
    }.get(status, "error")


def _answer(request: Request, error: HttpError) -> Response:
    if wants_json(request.url.path):
        return api.JSONResponse(error.as_dict(), status_code=error.status)
    return pages.error_page(request, error.status, error.message)


async def on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HttpError)
    return _answer(request, exc)


async def on_starlette_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    message = {404: "no such page", 405: "this method is not allowed here"}.get(
        exc.status_code, str(exc.detail)
    )
    response = _answer(request, HttpError(exc.status_code, _status_code(exc.status_code), message))
    for name, value in (exc.headers or {}).items():
        response.headers[name] = value  # e.g. Allow on a 405
    return response


async def on_kb_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, KbError)
    if isinstance(exc, NotFound):
        status, code = 404, "not_found"
    elif isinstance(exc, InputError):
        status, code = 400, "bad_input"
    elif isinstance(exc, DatabaseError):
        status, code = 503, "database_unavailable"
        log.error("database error: %s", exc)
    else:
        status, code = 400, "bad_request"
    return _answer(request, HttpError(status, code, exc.message))


async def on_timeout(request: Request, exc: Exception) -> Response:
    log.warning("%s %s: %s", request.method, request.url.path, exc)
    message = f"{exc}; try a shorter part of the log"
    return _answer(request, HttpError(504, "match_timeout", message))


async def on_unexpected(request: Request, exc: Exception) -> Response:
    # The traceback goes to the server's log, never to the client.
    log.exception("%s %s failed", request.method, request.url.path)
    return _answer(request, HttpError(500, "internal_error", "the server failed; see its log"))


def create_app(config: ServeConfig) -> SecurityMiddleware:
    """The application, inside the security middleware: outside Starlette's own error
    middleware, so even a 500 answer carries the security headers."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        svc = await asyncio.to_thread(Service, config)
        app.state.service = svc
        watcher = asyncio.create_task(svc.watch())
        try:
            yield
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            svc.close()

    app = Starlette(
        routes=[
            *api.routes(),
            *pages.routes(),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        exception_handlers={
            HttpError: on_http_error,
            HTTPException: on_starlette_error,
            MatchTimedOut: on_timeout,
            KbError: on_kb_error,
            Exception: on_unexpected,
        },
        lifespan=lifespan,
    )
    return SecurityMiddleware(app, token=config.token)


def app_from_environment() -> SecurityMiddleware:
    """What uvicorn's workers import (`kb.serve.app:app_from_environment`, a factory)."""
    return create_app(ServeConfig.from_environment())
