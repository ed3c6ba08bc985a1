"""The JSON API: the same objects as the CLI's `--json`, for bots and other tools.

Every answer comes from the library API and kb.render, so the API and `kb match --json` cannot
drift apart; errors are JSON with the right status (kb.serve.app turns HttpError into them).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse as _StarletteJSON
from starlette.routing import BaseRoute, Route

from kb import render
from kb.matcher import DEFAULT_MIN_SCORE
from kb.serve.http import (
    LIMIT_RANGE,
    TOP_RANGE,
    HttpError,
    choice_value,
    copy_body,
    int_value,
    media_type,
    read_body,
    score_value,
)
from kb.serve.openapi import ERROR_TYPES, SEVERITIES, document
from kb.serve.service import Found, Service
from kb.text import json_safe

DEFAULT_TOP = 3  # the same as `kb match --top`


class JSONResponse(_StarletteJSON):
    """JSON with every control, bidi and invisible character escaped, as `--json` prints it:
    the data exact, and a terminal or a log viewer that shows the answer is not fooled."""

    def render(self, content: Any) -> bytes:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return json_safe(text).encode("utf-8")


def service(request: Request) -> Service:
    svc: Service = request.app.state.service
    return svc


async def match_request(request: Request, limit: int) -> tuple[bytes, int, float]:
    """(log bytes, top, min_score) from a text/plain body and query, or a JSON body."""
    kind = media_type(request)
    if kind in ("text/plain", ""):
        body = await read_body(request, limit)
        top = int_value("top", request.query_params.get("top"), DEFAULT_TOP, TOP_RANGE)
        min_score = score_value(
            "min_score", request.query_params.get("min_score"), DEFAULT_MIN_SCORE
        )
        return body, top, min_score
    if kind == "application/json":
        body = await read_body(request, limit)
        try:
            payload = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise HttpError(400, "bad_json", f"the body is not valid JSON: {exc}") from None
        if not isinstance(payload, dict) or not isinstance(payload.get("log"), str):
            raise HttpError(422, "invalid", 'send {"log": "the log text", ...}')
        top = int_value("top", payload.get("top"), DEFAULT_TOP, TOP_RANGE)
        min_score = score_value("min_score", payload.get("min_score"), DEFAULT_MIN_SCORE)
        return payload["log"].encode("utf-8", "replace"), top, min_score
    raise HttpError(
        415,
        "unsupported_media_type",
        'send the log as text/plain, or as application/json {"log": "..."}',
    )


def match_json(found: Found) -> dict[str, Any]:
    return render.matches_json(found.report, found.records)


async def api_match(request: Request) -> JSONResponse:
    svc = service(request)
    log_bytes, top, min_score = await match_request(request, svc.config.max_body)
    found = await svc.match(log_bytes, top=top, min_score=min_score)
    return JSONResponse(match_json(found))


def search_args(params: Any, default_limit: int) -> dict[str, Any]:
    """The library's search arguments from query parameters (the page's filters too)."""

    def text(name: str) -> str | None:
        value = params.get(name)
        return value.strip() or None if isinstance(value, str) else None

    return {
        "query": text("q"),
        "repo": text("repo"),
        "tag": text("tag"),
        "error_class": text("error_class"),
        "code": text("code"),
        "error_type": choice_value("type", text("type"), ERROR_TYPES),
        "severity": choice_value("severity", text("severity"), SEVERITIES),
        "limit": int_value("limit", params.get("limit"), default_limit, LIMIT_RANGE),
    }


async def api_search(request: Request) -> JSONResponse:
    args = search_args(request.query_params, default_limit=10)
    response = await run_in_threadpool(lambda: service(request).kb.search(**args))
    return JSONResponse(response.as_dict())


async def api_record(request: Request) -> JSONResponse:
    record_id = request.path_params["id"]
    wrapped = await run_in_threadpool(service(request).kb.get_wrapped, record_id)
    if wrapped is None:
        raise HttpError(
            404, "not_found", "no record has this id (search by slug or code: /api/search?q=)"
        )
    return JSONResponse(wrapped)


async def api_stats(request: Request) -> JSONResponse:
    return JSONResponse(await run_in_threadpool(service(request).kb.stats))


async def healthz(request: Request) -> JSONResponse:
    return JSONResponse(service(request).health())


async def openapi(request: Request) -> JSONResponse:
    return JSONResponse(document())


async def api_import(request: Request) -> JSONResponse:
    svc = service(request)
    if not svc.config.allow_import:
        raise HttpError(
            403, "import_off", "imports over HTTP are off: start kb serve with --allow-import"
        )
    # A fresh folder of its own: a manifest in the upload can only name files inside it.
    with tempfile.TemporaryDirectory(prefix="kb-import-") as folder:
        path = Path(folder) / "upload.json"
        with open(path, "wb") as out:
            await copy_body(request, svc.config.max_import_body, out)

        def run() -> dict[str, Any]:
            report = svc.kb.import_sources([str(path)])
            if report.inserted or report.updated:
                svc.kb.build_matcher()
                svc.refresh()  # this worker answers with the new records at once
            return report.as_dict()

        return JSONResponse(await run_in_threadpool(run))


def routes() -> list[BaseRoute]:
    return [
        Route("/api/match", api_match, methods=["POST"]),
        Route("/api/search", api_search, methods=["GET"]),
        Route("/api/records/{id}", api_record, methods=["GET"]),
        Route("/api/stats", api_stats, methods=["GET"]),
        Route("/api/import", api_import, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
    ]
