"""The web page, as server-rendered HTML from a real `kb serve` process (no JavaScript)."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import pytest

from kb.serve.pages import ENV, http_link
from tests.serve.conftest import (
    DATA,
    HOSTILE_ID,
    HOSTILE_LOG_LINE,
    HOSTILE_SCRIPT,
    LiveServer,
    kb_command,
    server_env,
)

LOG = DATA / "logs" / "pytest_long_report.log"


def assert_no_inline_code(html: str) -> None:
    """What the Content-Security-Policy would block anyway, so the page must not need it."""
    assert not re.search(r"<script(?![^>]*\bsrc=)", html), "inline script"
    assert "<style" not in html, "style element"
    assert not re.search(r"<[a-z][^>]*\sstyle\s*=", html), "style attribute"
    assert not re.search(r"<[a-z][^>]*\son[a-z]+\s*=", html), "inline event handler"


def test_the_home_page_is_a_form_that_works_without_javascript(server: LiveServer) -> None:
    with server.client() as client:
        response = client.get("/")
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    html = response.text
    assert '<form class="paste" action="/match" method="post">' in html
    assert '<textarea id="log" name="log"' in html
    assert 'name="viewport"' in html  # readable on a phone
    assert_no_inline_code(html)


def test_a_pasted_log_shows_each_error_with_its_fix_in_log_order(server: LiveServer) -> None:
    with server.client() as client:
        api = client.post("/api/match", json={"log": LOG.read_text()}).json()
        html = client.post("/match", data={"log": LOG.read_text()}).text
    assert_no_inline_code(html)
    in_log_order = sorted(api["matches"], key=lambda m: (m["line"], m["end_line"], -m["score"]))
    positions = [html.index(f'href="/records/{m["id"]}"') for m in in_log_order]
    assert positions == sorted(positions), "errors appear in log order"
    for match in api["matches"]:
        record = match["record"]
        for solution in record["solutions"]:
            assert f"<li>{escaped(solution)}</li>" in html
        assert escaped(match["text"]) in html
        assert f"confidence {match['score']:.2f}" in html
        assert escaped(record["exampleFix"]) in html
        assert f'<a href="{escaped(record["githubUrl"])}"' in html
        for value in match["captures"]:
            assert f"<code>{escaped(value)}</code>" in html
    assert html.count('data-copy="md-') == len(api["matches"]) + 1  # each error, and all


def escaped(text: str) -> str:
    from markupsafe import escape

    return str(escape(text))


def test_hostile_record_text_is_shown_as_text_never_as_markup(server: LiveServer) -> None:
    with server.client() as client:
        record_page = client.get(f"/records/{HOSTILE_ID}").text
        match_page = client.post("/match", data={"log": HOSTILE_LOG_LINE}).text
    for html in (record_page, match_page):
        assert_no_inline_code(html)
        assert "&lt;script&gt;window.kbPwned=1&lt;/script&gt;" in html
        assert HOSTILE_SCRIPT not in html
        assert "<img" not in html and "\x1b" not in html
        # The link keeps the whole URL inside its quoted attribute.
        assert 'href="https://github.com/zz/gearbox/blob/main/g.py#&#34;&gt;&lt;script&gt;' in html
    assert "Open the &lt;/li&gt;&lt;/ol&gt;&lt;script&gt;" in record_page


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://github.com/a/b/blob/c/d.py#L1-L9", "https://github.com/a/b/blob/c/d.py#L1-L9"),
        ("http://example.org/x", "http://example.org/x"),
        ("javascript:alert(1)", None),
        ("JaVaScRiPt:alert(1)", None),
        ("data:text/html,<script>", None),
        ("https://", None),
        ("https://exa mple.org/", None),
        ("https://example.org/\u202egnp.exe", None),
        (None, None),
    ],
)
def test_only_http_urls_become_links(url: str | None, expected: str | None) -> None:
    assert http_link(url) == expected


def test_a_record_page_has_a_stable_link_and_the_markdown_kb_show_prints(
    server: LiveServer, serve_home: Path
) -> None:
    shown = kb_command(
        server_env(serve_home), "--db", str(server.db), "show", HOSTILE_ID, "--format", "markdown"
    )
    with server.client() as client:
        page = client.get(f"/records/{HOSTILE_ID}")
        markdown = client.get(f"/records/{HOSTILE_ID}.md")
    assert page.status_code == 200
    assert f'href="/records/{HOSTILE_ID}"' in page.text
    assert markdown.headers["content-type"] == "text/markdown; charset=utf-8"
    assert markdown.text == shown.stdout
    # The same markdown, without JavaScript, in the page's <details> block.
    block = re.search(r'<pre id="md-record">(.*?)</pre>', page.text, re.S)
    assert block is not None and unescape(block.group(1)) == shown.stdout


def test_a_slug_redirects_to_the_records_stable_link(server: LiveServer) -> None:
    with server.client(follow_redirects=False) as client:
        moved = client.get("/records/gearbox-script-jammed")
        missing = client.get("/records/no-such-record-anywhere")
    assert moved.status_code == 301
    assert moved.headers["location"] == f"/records/{HOSTILE_ID}"
    assert missing.status_code == 404 and "text/html" in missing.headers["content-type"]


def test_search_page_lists_results_with_filters(server: LiveServer) -> None:
    with server.client() as client:
        api = client.get("/api/search", params={"q": "kv cache", "repo": "vllm-project/vllm"})
        html = client.get("/search", params={"q": "kv cache", "repo": "vllm-project/vllm"}).text
        tag = client.get("/search", params={"tag": "gearbox"}).text
        bad = client.get("/search", params={"type": "bogus"})
    assert_no_inline_code(html)
    ids = [r["id"] for r in api.json()["results"]]
    assert ids and re.findall(r'class="hit" href="/records/([0-9a-f]{16})"', html) == ids
    assert 'value="vllm-project/vllm"' in html  # the filter stays filled in
    assert re.findall(r'class="hit" href="/records/([0-9a-f]{16})"', tag) == [HOSTILE_ID]
    assert bad.status_code == 422 and "text/html" in bad.headers["content-type"]


def test_an_oversized_paste_gets_a_413_page(server: LiveServer) -> None:
    with server.client() as client:
        response = client.post("/match", data={"log": "x" * (5 * 1024 * 1024 + 1)})
    assert response.status_code == 413
    assert "text/html" in response.headers["content-type"]
    assert "limit" in response.text


def test_errors_nobody_knows_are_listed_escaped_once_the_matcher_reports_them() -> None:
    # The "unmatched" key of the match JSON (DESIGN.md) is rendered whenever it is present.
    html = ENV.get_template("match.html").render(
        found=True,
        summary="1 known error",
        views=[],
        markdown="",
        log="",
        unmatched=[
            {
                "line": 40,
                "text": f"zzlib.RotorError: {HOSTILE_SCRIPT}",
                "suggestions": [{"id": HOSTILE_ID, "errorMessage": "<b>x</b>", "score": 0.4}],
            }
        ],
    )
    assert "line 40" in html and "zzlib.RotorError: &lt;script&gt;" in html
    assert f'href="/records/{HOSTILE_ID}"' in html and "&lt;b&gt;x&lt;/b&gt;" in html
    assert HOSTILE_SCRIPT not in html


def test_the_openapi_document_lists_every_api_route(server: LiveServer) -> None:
    with server.client() as client:
        document = client.get("/openapi.json").json()
    assert document["openapi"].startswith("3.1")
    assert set(document["paths"]) == {
        "/api/match",
        "/api/search",
        "/api/records/{id}",
        "/api/stats",
        "/api/import",
        "/healthz",
    }
    assert json.dumps(document)  # plain JSON all the way down
