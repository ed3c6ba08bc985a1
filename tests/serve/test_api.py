"""The JSON API against a real `kb serve` process on a loopback port."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.serve.conftest import (
    DATA,
    HOSTILE_ID,
    HOSTILE_LOG_LINE,
    LiveServer,
    kb_command,
    server_env,
)

LOG = DATA / "logs" / "pytest_long_report.log"


def without_timing(report: dict[str, object]) -> dict[str, object]:
    stats = dict(report["stats"])  # type: ignore[call-overload]
    stats.pop("elapsed_ms")
    # the time `kb match` took to get its index: a server got its own once, at start
    stats.pop("index_ms", None)
    stats.pop("index_step", None)
    return {**report, "stats": stats}


def test_match_answers_what_kb_match_json_prints(server: LiveServer, serve_home: Path) -> None:
    cli = kb_command(server_env(serve_home), "--db", str(server.db), "match", str(LOG), "--json")
    assert cli.returncode == 0, cli.stderr
    with server.client() as client:
        response = client.post(
            "/api/match", content=LOG.read_bytes(), headers={"Content-Type": "text/plain"}
        )
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    answer = response.json()
    assert answer["matches"], "the example log has known errors"
    assert without_timing(answer) == without_timing(json.loads(cli.stdout))


def test_match_takes_a_json_body_with_top_and_min_score(server: LiveServer) -> None:
    log = LOG.read_text()
    with server.client() as client:
        default = client.post("/api/match", json={"log": log}).json()
        strict = client.post("/api/match", json={"log": log, "min_score": 0.99}).json()
        one = client.post("/api/match", json={"log": log, "top": 1}).json()
    assert len(default["matches"]) > len(strict["matches"])
    assert all(m["score"] >= 0.99 for m in strict["matches"])
    assert all(m["alternatives"] == [] for m in one["matches"])


def test_match_of_a_clean_log_is_an_empty_list_not_an_error(server: LiveServer) -> None:
    clean = (DATA / "logs" / "clean_service_noise.log").read_bytes()
    with server.client() as client:
        response = client.post("/api/match", content=clean, headers={"Content-Type": "text/plain"})
    assert response.status_code == 200
    assert response.json()["matches"] == []


def test_hostile_record_text_comes_back_as_data_in_json(server: LiveServer) -> None:
    with server.client() as client:
        found = client.post("/api/match", json={"log": HOSTILE_LOG_LINE}).json()
    assert [m["id"] for m in found["matches"]] == [HOSTILE_ID]
    assert "<script>" in found["matches"][0]["record"]["documentation"]


def test_bidi_and_8_bit_controls_are_escaped_in_api_json_and_the_data_stays_exact(
    server: LiveServer,
) -> None:
    with server.client() as client:
        raw = client.get(f"/api/records/{HOSTILE_ID}").content.decode("utf-8")
    assert "\u202e" not in raw and "\u009b" not in raw
    assert "\\u202e" in raw and "\\u009b" in raw
    assert json.loads(raw)["record"]["triggerScenarios"].startswith("Opening \u202egpj.exe")


@pytest.mark.parametrize(
    ("body", "content_type", "status", "code"),
    [
        (b"{not json", "application/json", 400, "bad_json"),
        (b'{"text": "no log key"}', "application/json", 422, "invalid"),
        (b'{"log": "x", "top": 0}', "application/json", 422, "invalid"),
        (b'{"log": "x", "top": true}', "application/json", 422, "invalid"),
        (b'{"log": "x", "min_score": 2}', "application/json", 422, "invalid"),
        (b"<log/>", "application/xml", 415, "unsupported_media_type"),
        (b"log=x", "application/x-www-form-urlencoded", 415, "unsupported_media_type"),
    ],
)
def test_bad_match_requests_get_json_errors_with_their_status(
    server: LiveServer, body: bytes, content_type: str, status: int, code: str
) -> None:
    with server.client() as client:
        response = client.post("/api/match", content=body, headers={"Content-Type": content_type})
    assert response.status_code == status
    assert response.json()["error"]["code"] == code
    assert response.json()["error"]["status"] == status


def test_search_answers_what_kb_search_json_prints(server: LiveServer, serve_home: Path) -> None:
    args = ["--repo", "vllm-project/vllm", "kv", "cache", "--limit", "5"]
    cli = kb_command(server_env(serve_home), "--db", str(server.db), "search", *args, "--json")
    assert cli.returncode == 0, cli.stderr
    with server.client() as client:
        response = client.get(
            "/api/search", params={"q": "kv cache", "repo": "vllm-project/vllm", "limit": 5}
        )
    assert response.status_code == 200
    assert response.json() == json.loads(cli.stdout)


def test_search_filters_by_tag_and_checks_its_enums(server: LiveServer) -> None:
    with server.client() as client:
        tagged = client.get("/api/search", params={"tag": "gearbox"}).json()
        bad = client.get("/api/search", params={"severity": "fatal"})
        too_many = client.get("/api/search", params={"q": "x", "limit": 5000})
    assert [r["id"] for r in tagged["results"]] == [HOSTILE_ID]
    assert bad.status_code == 422 and "severity" in bad.json()["error"]["message"]
    assert too_many.status_code == 422


def test_record_is_wrapped_with_its_dataset_version(server: LiveServer, serve_home: Path) -> None:
    shown = kb_command(
        server_env(serve_home), "--db", str(server.db), "show", HOSTILE_ID, "--format", "json"
    )
    with server.client() as client:
        response = client.get(f"/api/records/{HOSTILE_ID}")
        missing = client.get("/api/records/0000000000000000")
    assert response.status_code == 200
    assert set(response.json()) == {"record", "datasetVersion"}
    assert response.json()["record"] == json.loads(shown.stdout)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


def test_stats_and_health_name_the_revision_being_served(server: LiveServer) -> None:
    with server.client() as client:
        stats = client.get("/api/stats").json()
        health = client.get("/healthz").json()
    assert stats["records"] == health["records"] == 515  # data/ holds 514, plus the hostile one
    assert health["status"] == "ok"
    assert health["revision"] == health["indexRevision"] == stats["revision"]


def test_unknown_paths_and_methods_under_api_are_json(server: LiveServer) -> None:
    with server.client() as client:
        missing = client.get("/api/nothing-here")
        wrong_method = client.delete("/api/stats")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert wrong_method.status_code == 405
    assert wrong_method.json()["error"]["code"] == "method_not_allowed"
    assert "GET" in wrong_method.headers["allow"]


def test_import_over_http_is_refused_unless_allowed(server: LiveServer) -> None:
    with server.client() as client:
        response = client.post("/api/import", content=b"{}")
    assert response.status_code == 403
    assert "--allow-import" in response.json()["error"]["message"]


def test_every_response_carries_the_security_headers(server: LiveServer) -> None:
    with server.client() as client:
        for path in ("/", "/api/stats", "/static/kb.css", "/api/nothing-here"):
            headers = client.get(path).headers
            assert "script-src 'self'" in headers["content-security-policy"], path
            assert "frame-ancestors 'none'" in headers["content-security-policy"], path
            assert headers["x-content-type-options"] == "nosniff", path
            assert headers["referrer-policy"] == "no-referrer", path


def test_a_server_without_token_answers_only_to_a_local_host_name(server: LiveServer) -> None:
    # DNS rebinding: another site's name pointed at 127.0.0.1 reaches the port, not the data.
    with server.client() as client:
        rebound = client.get("/api/stats", headers={"Host": "attacker.example:8000"})
        local = client.get("/api/stats", headers={"Host": "localhost:8000"})
    assert rebound.status_code == 403
    assert local.status_code == 200
