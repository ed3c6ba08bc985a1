"""The web page: paste a log, search, read a record; server-rendered, works without JavaScript.

Templates are Jinja2 with autoescape on, and every value printed is first stripped of control
and bidi characters (kb.render.safe), so dataset and log text is shown, never run or spoofed.
"""

from __future__ import annotations

from itertools import zip_longest
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs, urlencode, urlsplit

import jinja2
from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from kb import __version__, markdown, render
from kb.errors import Ambiguous, NotFound
from kb.matcher import DEFAULT_MIN_SCORE
from kb.serve.api import DEFAULT_TOP, search_args, service
from kb.serve.http import HttpError, media_type, read_body
from kb.serve.openapi import ERROR_TYPES, SEVERITIES
from kb.serve.security import (
    SESSION_COOKIE,
    SESSION_MAX_AGE_S,
    safe_next,
    same_secret,
    session_value,
)
from kb.serve.service import Found

TEMPLATES: Final = Path(__file__).parent / "templates"
ECHO_LIMIT: Final = 200_000  # a paste up to this is put back in the box with its results
SEARCH_PAGE_LIMIT: Final = 25
LOGIN_BODY_LIMIT: Final = 4096


def _finalize(value: Any) -> Any:
    """Every `{{ value }}`: None prints nothing, text loses control and bidi characters."""
    if value is None:
        return ""
    if isinstance(value, str) and not isinstance(value, Markup):
        return render.safe(value)
    return value


def http_link(url: object) -> str | None:
    """A dataset URL fit for href: only http(s), no spaces or control characters."""
    if not isinstance(url, str):
        return None
    cleaned = render.safe(url, multiline=False)
    if cleaned != url.strip() or " " in cleaned:
        return None
    try:
        parts = urlsplit(cleaned)
    except ValueError:
        return None
    return cleaned if parts.scheme in ("http", "https") and parts.netloc else None


def paragraphs(text: object) -> list[str]:
    return [" ".join(p.split()) for p in render.safe(text).split("\n\n") if p.strip()]


def make_environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        # Lenient: records differ in their keys (a compact-index stub has few); a missing one
        # prints nothing and tests false.
        undefined=jinja2.Undefined,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["paragraphs"] = paragraphs
    env.filters["http_link"] = http_link
    env.filters["oneline"] = lambda text: render.safe(text, multiline=False)
    env.globals["version"] = __version__
    env.globals["error_types"] = ERROR_TYPES
    env.globals["severities"] = SEVERITIES
    return env


ENV: Final = make_environment()


def page(request: Request, template: str, code: int = 200, **context: Any) -> HTMLResponse:
    svc = getattr(request.app.state, "service", None)
    context.setdefault("title", "kb")
    html = ENV.get_template(template).render(
        records_total=svc.index.records if svc else None,
        login=bool(svc and svc.config.token),
        **context,
    )
    return HTMLResponse(html, status_code=code)


def error_page(request: Request, status: int, message: str) -> HTMLResponse:
    return page(request, "error.html", status, title=f"{status}", status=status, message=message)


# ---- matching a pasted log ----------------------------------------------------------------


def match_views(found: Found) -> tuple[list[dict[str, Any]], list[render.Remainder]]:
    """What the page shows of each error found, in log order: the first
    kb.render.SHOWN_IN_FULL in full, the rest counted by repository (the API lists them all)."""
    views = []
    shown, rest = render.shown_in_full(
        found.report.in_log_order(), found.records, render.SHOWN_IN_FULL
    )
    for number, match in enumerate(shown, start=1):
        record = found.records.get(match.id, {"id": match.id})
        if match.line == match.end_line:
            where = f"line {match.line}"
        else:
            where = f"lines {match.line}-{match.end_line}"
        if match.occurrences > 1:
            where += f" (and {match.occurrences - 1} more)"
        alternatives = [
            {"id": alt, "score": score, "record": found.records.get(alt, {})}
            for alt, score in match.alternatives
        ]
        names = list(match.capture_names)[: len(match.captures)]
        views.append(
            {
                "number": number,
                "where": where,
                "match": match,
                "captures": list(zip_longest(names, match.captures)),
                "record": record,
                "raised_at": render.where_raised(record),
                "alternatives": alternatives,
                "markdown": markdown.match_markdown(number, match, record),
            }
        )
    return views, rest


async def home(request: Request) -> HTMLResponse:
    return page(request, "match.html", log="", found=None)


async def match_form(request: Request) -> Response:
    svc = service(request)
    if media_type(request) != "application/x-www-form-urlencoded":
        raise HttpError(415, "unsupported_media_type", "post the form from the page")
    body = await read_body(request, svc.config.max_body)
    form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True, max_num_fields=10)
    log = (form.get("log") or [""])[0]
    if not log.strip():
        return page(request, "match.html", 422, log="", found=None, notice="Paste a log first.")
    found = await svc.match(log.encode("utf-8"), top=DEFAULT_TOP, min_score=DEFAULT_MIN_SCORE)
    report = render.matches_json(found.report, found.records)
    views, rest = match_views(found)
    return page(
        request,
        "match.html",
        title=f"{len(found.report.matches)} known errors",
        log=log if len(log) <= ECHO_LIMIT else "",
        found=found,
        summary=render.match_summary(found.report, "the pasted log"),
        views=views,
        rest=rest,
        rest_heading=render.remainder_heading(rest, "POST /api/match lists every one"),
        unmatched=report.get("unmatched") or [],
        markdown=markdown.matches_markdown(found.report, found.records, "the pasted log"),
    )


# ---- search and records ----------------------------------------------------------------------


async def search_page(request: Request) -> HTMLResponse:
    args = search_args(request.query_params, default_limit=SEARCH_PAGE_LIMIT)
    filters = {
        key: request.query_params.get(key, "")
        for key in ("q", "repo", "tag", "error_class", "code", "type", "severity")
    }
    searched = any(value.strip() for value in filters.values())
    response = None
    if searched:
        response = await run_in_threadpool(lambda: service(request).kb.search(**args))
    more = None
    if response is not None and response.total > len(response.results) and args["limit"] < 1000:
        wider = {k: v for k, v in filters.items() if v} | {"limit": min(1000, args["limit"] * 4)}
        more = "/search?" + urlencode(wider)
    return page(
        request,
        "search.html",
        title=f"Search: {filters['q']}" if filters["q"] else "Search",
        filters=filters,
        response=response,
        more=more,
    )


async def _record_or_redirect(request: Request, key: str, suffix: str = "") -> Any:
    """The record with id `key`; a slug or code redirects to its id's stable URL."""
    kb = service(request).kb
    record = await run_in_threadpool(kb.get, key)
    if record is not None:
        return record
    try:
        found = await run_in_threadpool(kb.lookup, key)
    except NotFound:
        return error_page(request, 404, f"No record has the id, slug or code {key!r}.")
    except Ambiguous as exc:
        return page(request, "ambiguous.html", 300, title=key, key=key, candidates=exc.candidates)
    return RedirectResponse(f"/records/{found['id']}{suffix}", status_code=301)


async def record_page(request: Request) -> Response:
    result = await _record_or_redirect(request, request.path_params["key"])
    if isinstance(result, Response):
        return result
    return page(
        request,
        "record.html",
        title=render.safe(result.get("errorMessage"), multiline=False)[:80],
        record=result,
        markdown=markdown.record_markdown(result),
    )


async def record_markdown(request: Request) -> Response:
    result = await _record_or_redirect(request, request.path_params["key"], ".md")
    if isinstance(result, Response):
        return result
    return PlainTextResponse(
        markdown.record_markdown(result), media_type="text/markdown; charset=utf-8"
    )


# ---- logging in (only when the server has a token) -----------------------------------------


async def login_form(request: Request) -> Response:
    if not service(request).config.token:
        return RedirectResponse("/", status_code=303)
    target = safe_next(request.query_params.get("next"))
    return page(request, "login.html", title="Log in", next=target)


async def login(request: Request) -> Response:
    token = service(request).config.token
    if not token:
        return RedirectResponse("/", status_code=303)
    if media_type(request) != "application/x-www-form-urlencoded":
        raise HttpError(415, "unsupported_media_type", "post the form from the page")
    form = parse_qs(
        (await read_body(request, LOGIN_BODY_LIMIT)).decode("utf-8", "replace"), max_num_fields=5
    )
    given = (form.get("token") or [""])[0]
    target = safe_next((form.get("next") or ["/"])[0])
    if not same_secret(given.strip(), token):
        return page(request, "login.html", 401, title="Log in", next=target, wrong=True)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        session_value(token),
        max_age=SESSION_MAX_AGE_S,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


async def logout(request: Request) -> Response:
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, httponly=True, samesite="strict")
    return response


async def back_home(request: Request) -> Response:
    return RedirectResponse("/", status_code=303)


def routes() -> list[BaseRoute]:
    return [
        Route("/", home, methods=["GET"]),
        Route("/match", match_form, methods=["POST"]),
        Route("/match", back_home, methods=["GET"]),
        Route("/search", search_page, methods=["GET"]),
        # Before /records/{key}: a key never holds "/", but it may hold a dot.
        Route("/records/{key}.md", record_markdown, methods=["GET"]),
        Route("/records/{key}", record_page, methods=["GET"]),
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
    ]
