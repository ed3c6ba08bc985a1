"""Who may use the server and how much: the token, the login cookie, body and time limits,
imports, several workers. Each against a real `kb serve` process."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.serve.conftest import (
    HOSTILE_LOG_LINE,
    TOKEN,
    LiveServer,
    hostile_record,
    kb_command,
    server_env,
    start_server,
)

MAX_BODY = 65_536


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory, served_db: Path) -> Iterator[LiveServer]:
    """A server with a token, imports allowed and a small body limit, on its own database."""
    import shutil

    home = tmp_path_factory.mktemp("guarded")
    db = home / "kb.sqlite3"
    shutil.copy(served_db, db)
    live = start_server(
        db, server_env(home), "--token", TOKEN, "--allow-import", "--max-body", str(MAX_BODY)
    )
    yield live
    live.stop()


# ---- starting ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "0.0.0.0"], "needs a token"),
        (["--host", "192.168.1.20", "--token", ""], "needs a token"),
        (["--token", "short"], "shorter than 16"),
        (["--allow-import"], "--allow-import needs a token"),
    ],
)
def test_serve_refuses_unsafe_settings_before_starting(
    invoke: Any, served_db: Path, args: list[str], message: str
) -> None:
    result = invoke("serve", *args, db=served_db)
    assert result.exit_code == 2
    assert message in result.output
    assert len(result.output.strip().splitlines()) <= 2  # one line and its next step


def test_serve_reads_the_token_from_the_environment(
    invoke: Any, served_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KB_SERVE_TOKEN", "short")
    result = invoke("serve", "--host", "0.0.0.0", db=served_db)
    assert result.exit_code == 2
    assert "shorter than 16" in result.output  # the variable was read, and checked
    assert "short" not in result.output.replace("shorter", "")  # and not echoed


def test_serve_refuses_a_database_file_that_does_not_exist(invoke: Any, tmp_path: Path) -> None:
    result = invoke("serve", db=tmp_path / "nothing.sqlite3")
    assert result.exit_code == 3
    assert "no knowledge base" in result.output
    assert not (tmp_path / "nothing.sqlite3").exists()


def test_serving_writes_nothing_to_the_database(private_db: Path, tmp_path: Path) -> None:
    before = hashlib.sha256(private_db.read_bytes()).hexdigest()
    live = start_server(private_db, server_env(tmp_path))
    try:
        with live.client() as client:
            assert client.post("/api/match", json={"log": HOSTILE_LOG_LINE}).status_code == 200
            assert client.get("/api/search", params={"q": "gearbox"}).status_code == 200
            assert client.get("/search", params={"q": "kv cache"}).status_code == 200
            assert client.get("/api/stats").status_code == 200
            assert client.post("/match", data={"log": HOSTILE_LOG_LINE}).status_code == 200
    finally:
        live.stop()
    assert hashlib.sha256(private_db.read_bytes()).hexdigest() == before
    wal = private_db.with_name(private_db.name + "-wal")  # where unwritten-back writes would be
    assert not wal.exists() or wal.stat().st_size == 0


# ---- the token -----------------------------------------------------------------------------


def test_api_needs_the_token(guarded: LiveServer) -> None:
    with guarded.client() as anonymous:
        missing = anonymous.get("/api/stats")
        wrong = anonymous.get("/api/stats", headers={"Authorization": "Bearer " + TOKEN[:-1]})
        other_scheme = anonymous.get("/api/stats", headers={"Authorization": "Basic " + TOKEN})
        health = anonymous.get("/healthz")
    with guarded.client(TOKEN) as client:
        allowed = client.get("/api/stats")
    for refused in (missing, wrong, other_scheme, health):
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "unauthorized"
        assert refused.headers["www-authenticate"].startswith("Bearer")
    assert "wrong" in wrong.json()["error"]["message"]
    assert allowed.status_code == 200 and allowed.json()["records"] > 0


def test_a_person_without_the_cookie_is_sent_to_the_login_form(guarded: LiveServer) -> None:
    with guarded.client(follow_redirects=False) as browser:
        response = browser.get("/search", params={"q": "kv cache"})
        login = browser.get("/login")
        static = browser.get("/static/kb.css")
    assert response.status_code == 303
    assert response.headers["location"] == "/login?next=%2Fsearch%3Fq%3Dkv%2Bcache"
    assert login.status_code == 200 and 'name="token"' in login.text
    assert static.status_code == 200  # the login page's own stylesheet


def test_login_sets_a_strict_cookie_that_opens_the_pages(guarded: LiveServer) -> None:
    with guarded.client(follow_redirects=False) as browser:
        wrong = browser.post("/login", data={"token": "nope", "next": "/search"})
        right = browser.post("/login", data={"token": TOKEN, "next": "/search?q=kv"})
        page = browser.get("/search", params={"q": "kv"})
    assert wrong.status_code == 401 and "wrong" in wrong.text
    assert right.status_code == 303 and right.headers["location"] == "/search?q=kv"
    cookie = right.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie
    assert TOKEN not in right.headers["set-cookie"]  # a MAC of the token, not the token
    assert page.status_code == 200 and "results" in page.text


def test_login_goes_back_only_to_this_site(guarded: LiveServer) -> None:
    with guarded.client(follow_redirects=False) as browser:
        for target in ("//attacker.example/x", "https://attacker.example/", "/\\attacker"):
            response = browser.post("/login", data={"token": TOKEN, "next": target})
            assert response.headers["location"] == "/", target


def test_a_form_posted_from_another_site_is_refused_even_with_the_cookie(
    guarded: LiveServer,
) -> None:
    with guarded.client(follow_redirects=False) as browser:
        browser.post("/login", data={"token": TOKEN})
        cross = browser.post("/match", data={"log": "x"}, headers={"Sec-Fetch-Site": "cross-site"})
        other_origin = browser.post(
            "/match", data={"log": "x"}, headers={"Origin": "https://attacker.example"}
        )
        same = browser.post("/match", data={"log": "x"}, headers={"Sec-Fetch-Site": "same-origin"})
    assert cross.status_code == 403
    assert other_origin.status_code == 403
    assert same.status_code == 200


# ---- limits --------------------------------------------------------------------------------


def test_a_body_over_the_limit_is_refused_by_its_declared_length(guarded: LiveServer) -> None:
    with guarded.client(TOKEN) as client:
        response = client.post(
            "/api/match", content=b"x" * (MAX_BODY + 1), headers={"Content-Type": "text/plain"}
        )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"


def test_a_chunked_body_is_cut_off_at_the_limit(guarded: LiveServer) -> None:
    # No Content-Length: the server counts while it reads.
    def chunks() -> Iterator[bytes]:
        for _ in range(MAX_BODY // 4096 + 2):
            yield b"ERROR something failed\n".ljust(4096, b".")

    with guarded.client(TOKEN) as client:
        response = client.post(
            "/api/match", content=chunks(), headers={"Content-Type": "text/plain"}
        )
        under = client.post(
            "/api/match", content=b"y" * (MAX_BODY - 10), headers={"Content-Type": "text/plain"}
        )
    assert response.status_code == 413
    assert under.status_code == 200


def test_a_match_past_the_time_limit_is_a_504_and_the_server_carries_on(
    private_db: Path, tmp_path: Path
) -> None:
    live = start_server(private_db, server_env(tmp_path), "--match-timeout", "0.001")
    try:
        big = b"".join(
            b"2026-12-01T10:00:%02dZ worker-%d ERROR KeyError: 'user_%d' not found in cache\n"
            % (i % 60, i % 7, i)
            for i in range(60_000)
        )
        with live.client() as client:
            started = time.monotonic()
            response = client.post(
                "/api/match", content=big, headers={"Content-Type": "text/plain"}
            )
            answered_in = time.monotonic() - started
            health = client.get("/healthz")
    finally:
        live.stop()
    assert response.status_code == 504
    assert response.json()["error"]["code"] == "match_timeout"
    assert "0.001 s limit" in response.json()["error"]["message"]
    assert answered_in < 5
    assert health.status_code == 200


# ---- imports -------------------------------------------------------------------------------


def new_record() -> dict[str, Any]:
    record = hostile_record()
    record.update(
        id="feedfacecafe0001",
        slug="flux-capacitor-ran-dry",
        errorClass="FluxError",
        errorMessage="Flux capacitor ran dry after {n} jumps",
        messagePattern="Flux capacitor ran dry after (.+?) jumps",
        tags=["flux"],
    )
    return record


FLUX_LOG = "delorean.errors.FluxError: Flux capacitor ran dry after 88 jumps\n"


def test_import_over_http_needs_the_token_and_is_matched_at_once(guarded: LiveServer) -> None:
    body = json.dumps({"record": new_record()}).encode() + b"\n"
    with guarded.client() as anonymous:
        refused = anonymous.post("/api/import", content=body)
    with guarded.client(TOKEN) as client:
        report = client.post("/api/import", content=body)
        found = client.post("/api/match", json={"log": FLUX_LOG}).json()
    assert refused.status_code == 401
    assert report.status_code == 200, report.text
    assert report.json()["inserted"] == 1
    assert [m["id"] for m in found["matches"]] == ["feedfacecafe0001"]


def test_import_of_data_that_cannot_be_read_is_a_400(guarded: LiveServer) -> None:
    with guarded.client(TOKEN) as client:
        response = client.post("/api/import", content=b"\x1f\x8bnot gzip at all")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "bad_input"


def test_the_token_never_reaches_the_log(guarded: LiveServer) -> None:
    with guarded.client(TOKEN) as client:
        client.get("/api/stats")
        client.get("/nothing", headers={"Authorization": "Bearer " + TOKEN + "-wrong"})
    assert "/api/stats" in guarded.output()  # the access log is there
    assert TOKEN not in guarded.output()


# ---- workers -------------------------------------------------------------------------------


def test_every_worker_reloads_its_index_after_another_process_imports(
    private_db: Path, tmp_path: Path
) -> None:
    env = server_env(tmp_path)
    live = start_server(private_db, env, "--workers", "2")
    changed = hostile_record() | {"solutions": ["Oil the gearbox first"]}
    try:
        with live.client(headers={"Connection": "close"}) as client:
            for _ in range(6):  # the old record in both workers' record caches, likely
                client.post("/api/match", json={"log": HOSTILE_LOG_LINE})
        source = tmp_path / "new.jsonl"
        source.write_text(
            json.dumps({"record": new_record()}) + "\n" + json.dumps({"record": changed}) + "\n"
        )
        done = kb_command(env, "--db", str(private_db), "import", str(source), "--quiet")
        assert done.returncode == 0, done.stderr
        revision = json.loads(kb_command(env, "--db", str(private_db), "stats", "--json").stdout)[
            "revision"
        ]
        current: set[int] = set()
        seen: set[int] = set()
        deadline = time.monotonic() + 30
        # A new connection each request, so either worker may take it.
        with live.client(headers={"Connection": "close"}) as client:
            while time.monotonic() < deadline and (len(seen) < 2 or current != seen):
                health = client.get("/healthz").json()
                seen.add(health["pid"])
                if health["indexRevision"] == revision:
                    current.add(health["pid"])
                time.sleep(0.05)
            found = client.post("/api/match", json={"log": FLUX_LOG}).json()
            updated = [
                client.post("/api/match", json={"log": HOSTILE_LOG_LINE}).json()["matches"][0]
                for _ in range(6)
            ]
    finally:
        live.stop()
    assert len(seen) == 2, "both workers answered"
    assert current == seen, "each worker serves the new revision"
    assert [m["id"] for m in found["matches"]] == ["feedfacecafe0001"]
    assert all(m["record"]["solutions"] == ["Oil the gearbox first"] for m in updated)
