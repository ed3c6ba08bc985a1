"""Sources that misbehave: a manifest that points elsewhere, a server that redirects to
another host, trickles, never ends or stops half-way. Each is refused with a clear message,
the documented exit code, and nothing stored. (Issue 13, defect 10.)"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from kb import KnowledgeBase
from tests.conftest import corpus_records

pytestmark = pytest.mark.databases  # each test on SQLite and on PostgreSQL

Handler = Callable[[BaseHTTPRequestHandler], None]


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], str]]:
    """Serve one hand-written handler on loopback; returns its base URL."""
    servers: list[ThreadingHTTPServer] = []

    def start(handle: Handler) -> str:
        class One(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), One)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def records_jsonl(n: int = 3) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in corpus_records(n)).encode()


def stored(db_url: str) -> int:
    with KnowledgeBase(str(db_url)) as kb:
        return int(kb.stats()["records"])


def test_a_redirect_to_another_host_is_refused(
    invoke: Any, db_url: str, serve: Callable[[Handler], str]
) -> None:
    def target(h: BaseHTTPRequestHandler) -> None:
        body = records_jsonl()
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    other = serve(target).replace("127.0.0.1", "localhost")

    def redirect(h: BaseHTTPRequestHandler) -> None:
        h.send_response(302)
        h.send_header("Location", other + "/records.jsonl" if h.path == "/away" else "/same")
        h.end_headers()

    base = serve(lambda h: target(h) if h.path == "/same" else redirect(h))
    result = invoke("import", f"{base}/away")
    assert result.exit_code == 2
    assert f"{base}/away: redirected to another host (http://localhost:" in result.stderr
    assert stored(db_url) == 0
    # Within the same origin a redirect is followed.
    assert invoke("import", f"{base}/here").exit_code == 0
    assert stored(db_url) == 3


def test_a_server_that_trickles_is_given_up_on(
    invoke: Any, db_url: str, serve: Callable[[Handler], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("kb.ingest.http.GRACE_S", 0.3)
    monkeypatch.setattr("kb.ingest.http.MIN_BYTES_PER_S", 1000)
    body = records_jsonl()

    def trickle(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        for byte in body:
            h.wfile.write(bytes([byte]))
            h.wfile.flush()
            time.sleep(0.02)

    result = invoke("import", f"{serve(trickle)}/slow.jsonl")
    assert result.exit_code == 2
    assert "arriving too slowly" in result.stderr
    assert stored(db_url) == 0


def test_a_body_that_never_ends_is_cut_off_and_nothing_is_stored(
    invoke: Any, db_url: str, serve: Callable[[Handler], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("kb.ingest.http.MAX_BODY_BYTES", 200_000)
    template = corpus_records(1)[0]

    def endless(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.end_headers()  # no length: read until the connection closes
        for n in range(10**9):
            h.wfile.write((json.dumps({**template, "id": f"{n:016x}"}) + "\n").encode())

    result = invoke("import", f"{serve(endless)}/endless.jsonl")
    assert result.exit_code == 2
    assert "longer than the 200,000 bytes allowed" in result.stderr
    assert stored(db_url) == 0


def test_a_body_cut_short_is_refused(
    invoke: Any, db_url: str, serve: Callable[[Handler], str]
) -> None:
    body = records_jsonl(6)

    def cut(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body[: len(body) // 2].rsplit(b"\n", 1)[0] + b"\n")  # whole lines only

    result = invoke("import", f"{serve(cut)}/cut.jsonl")
    assert result.exit_code == 2
    assert "cut short" in result.stderr or "broke off" in result.stderr
    assert stored(db_url) == 0


def test_a_manifest_entry_without_a_checksum_is_imported_with_a_warning(
    invoke: Any, db_url: str, tmp_path: Path
) -> None:
    (tmp_path / "r.jsonl").write_bytes(records_jsonl())
    (tmp_path / "manifest.json").write_text(json.dumps({"files": [{"path": "r.jsonl"}]}))
    result = invoke("import", str(tmp_path / "manifest.json"))
    assert result.exit_code == 0
    assert "r.jsonl: the manifest gives no sha256; read without a check" in result.stderr
    assert stored(db_url) == 3


def test_a_manifest_with_a_checksum_that_is_not_one_is_refused(
    invoke: Any, db_url: str, tmp_path: Path
) -> None:
    (tmp_path / "r.jsonl").write_bytes(records_jsonl())
    for bad in (12345, "", "xyz"):
        manifest = {"files": [{"path": "r.jsonl", "sha256": bad}]}
        (tmp_path / "manifest.json").write_text(json.dumps(manifest))
        result = invoke("import", str(tmp_path / "manifest.json"))
        assert result.exit_code == 2
        assert "sha256 must be 64 hex digits" in result.stderr
    assert stored(db_url) == 0


def test_a_named_pipe_is_read_like_a_file(invoke: Any, db_url: str, tmp_path: Path) -> None:
    """`kb import <(zcat records.jsonl.gz)` hands kb a pipe such as /dev/fd/63."""
    import os

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)

    def feed() -> None:
        with open(pipe, "wb") as out:
            out.write(records_jsonl())

    writer = threading.Thread(target=feed)
    writer.start()
    result = invoke("import", str(pipe))
    writer.join()
    assert result.exit_code == 0, result.stderr
    assert stored(db_url) == 3
