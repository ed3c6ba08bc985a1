"""A team on one PostgreSQL server: many `kb` processes at once, an import killed half-way,
connection failures that say what is wrong, and passwords that are never printed.

The behaviour every database shares runs on both in the other modules (`databases`); what is
here needs a server: several processes sharing it, a network connection, credentials.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from kb.knowledge import KnowledgeBase
from tests.conftest import RECORDS40, SEED, corpus_records
from tests.test_import import write_jsonl
from tests.test_match_cli import LOG

SEED_ID = "46a1fcb95e0d367e"
SECRET = "s3cret-Pw"  # a password that must never appear in any output


def kb_env(home: Path) -> dict[str, str]:
    """The environment of one teammate's `kb`: a home (and so a matcher cache) of its own."""
    env = dict(os.environ)
    env.update(XDG_DATA_HOME=str(home / "data"), XDG_CACHE_HOME=str(home / "cache"), HOME=str(home))
    env.pop("KB_DATABASE_URL", None)
    return env


def kb(env: dict[str, str], *args: str, stdin: str | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kb", *args],
        env=env,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def many_records(count: int) -> list[dict[str, Any]]:
    """`count` valid records, new ids, cycling through the corpus fixture."""
    template = corpus_records()
    return [
        dict(template[i % len(template)], id=format(0xA000000000000000 + i, "016x"))
        for i in range(count)
    ]


# ----------------------------------------------------------------------------- many at once


def test_eight_matches_and_an_import_at_once_all_answer_right(pg_url: str, tmp_path: Path) -> None:
    """Eight teammates, none with a matcher cache of their own, match a log while another
    imports: every answer is right, and each was served by the index the importer shared
    (or, after the import, by the new revision's), never by a half-written knowledge base."""
    importer = kb_env(tmp_path / "importer")
    done = subprocess.run(
        [sys.executable, "-m", "kb", "--db", pg_url, "import", str(SEED), str(RECORDS40)],
        env=importer,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    big = write_jsonl(tmp_path / "more.jsonl", many_records(3000))
    running = kb(importer, "--db", pg_url, "import", str(big), "--json")
    matchers = [
        kb(kb_env(tmp_path / f"mate{n}"), "--db", pg_url, "match", "--json", stdin=LOG)
        for n in range(8)
    ]
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda p: (p, *p.communicate(LOG, timeout=300)), matchers))
    imported = running.communicate(timeout=300)
    assert running.returncode == 0, imported[1]
    assert json.loads(imported[0])["inserted"] == 3000
    for process, out, err in answers:
        assert process.returncode == 0, err
        found = json.loads(out)
        assert [m["id"] for m in found["matches"]] == [SEED_ID], err
        assert found["matches"][0]["record"]["errorClass"] == "ValueError"
        assert found["stats"]["records"] in (41, 3041)  # the old revision, or the new one
    # A teammate after the import: the new revision's index, fetched, not built.
    late = kb(kb_env(tmp_path / "late"), "--db", pg_url, "match", "--json", stdin=LOG)
    out, err = late.communicate(LOG, timeout=300)
    assert json.loads(out)["stats"]["records"] == 3041, err


def test_readers_during_an_import_see_the_old_or_the_new_knowledge_base(
    pg_url: str, tmp_path: Path
) -> None:
    """One import is one transaction: a reader counting records and searching while it runs
    sees all of the old knowledge base or all of the new one, never a part."""
    with KnowledgeBase(pg_url) as base:
        base.import_sources([str(RECORDS40)])
    big = write_jsonl(tmp_path / "more.jsonl", many_records(4000))
    running = kb(kb_env(tmp_path / "importer"), "--db", pg_url, "import", str(big), "--quiet")
    seen: set[tuple[int, int]] = set()
    with KnowledgeBase(pg_url) as reader:
        while running.poll() is None:
            figures = reader.stats()
            seen.add((figures["records"], figures["imports"]))
            time.sleep(0.05)
        figures = reader.stats()
        seen.add((figures["records"], figures["imports"]))
    assert running.returncode == 0, running.communicate()[1]
    assert seen <= {(40, 1), (4040, 2)}, seen
    assert (4040, 2) in seen


def test_a_killed_import_leaves_the_knowledge_base_as_it_was(
    pg_url: str, pg_server: Any, tmp_path: Path
) -> None:
    env = kb_env(tmp_path / "importer")
    with KnowledgeBase(pg_url) as base:
        base.import_sources([str(SEED)])
        before = base.stats()
        revision = base.revision()
    feeder = tmp_path / "feed.py"
    (tmp_path / "r.json").write_text(json.dumps(corpus_records()))
    feeder.write_text(
        "import json, sys\n"
        f"records = json.load(open({str(tmp_path / 'r.json')!r}))\n"
        "for i in range(200000):\n"
        "    r = dict(records[i % len(records)]); r['id'] = format(i + 1, '016x')\n"
        "    sys.stdout.write(json.dumps(r) + '\\n')\n"
    )
    feed = subprocess.Popen([sys.executable, str(feeder)], stdout=subprocess.PIPE)
    running = subprocess.Popen(
        [sys.executable, "-m", "kb", "--db", pg_url, "import", "-", "--batch-size", "200"],
        stdin=feed.stdout,
        env=env,
        stderr=subprocess.PIPE,
    )
    assert feed.stdout is not None
    feed.stdout.close()
    # Half-way: the import's transaction has written several batches (the server says so).
    import psycopg

    dsn = pg_url.replace("postgresql+psycopg://", "postgresql://")
    deadline = time.monotonic() + 120
    with psycopg.connect(dsn, autocommit=True) as watcher:
        while time.monotonic() < deadline:
            busy = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND query LIKE 'INSERT INTO record_tags%%' AND pid <> pg_backend_pid()"
            ).fetchone()
            if busy and busy[0]:
                break
            time.sleep(0.05)
        time.sleep(1.0)  # a few more batches
    assert running.poll() is None, "the import finished before it could be killed"
    running.send_signal(signal.SIGKILL)
    running.wait()
    feed.kill()
    feed.wait()
    with KnowledgeBase(pg_url) as after:
        assert after.stats()["records"] == before["records"] == 1
        assert after.stats()["imports"] == before["imports"]
        assert after.revision() == revision
        assert [r.id for r in after.search("kv cache group").results] == [SEED_ID]


# ----------------------------------------------------------------------------- connections


@pytest.mark.parametrize(
    "case",
    ["wrong password", "no such database", "nothing listening", "port not a number", "bad port"],
)
def test_a_server_that_cannot_be_used_exits_3_with_one_clear_line(
    pg_server: Any, case: str, tmp_path: Path
) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    url = {
        "wrong password": pg_server.url("kb_template", password=SECRET),
        "no such database": pg_server.url("kb_missing"),
        "nothing listening": f"postgresql+psycopg://kb:{SECRET}@127.0.0.1:{closed}/kb",
        "port not a number": f"postgresql+psycopg://kb:{SECRET}@127.0.0.1:54x2/kb",
        "bad port": f"postgresql+psycopg://kb:{SECRET}@127.0.0.1:99999/kb",
    }[case]
    expected = {
        "wrong password": "Check the user name and password",
        "no such database": "Create the database first",
        "nothing listening": "Is the server running",
        "port not a number": "not a database URL",
        "bad port": "invalid port",
    }[case]
    env = kb_env(tmp_path)
    every = (["stats"], ["match"], ["search", "kv"], ["import", str(SEED)], ["db", "upgrade"])
    for args in every if case == "wrong password" else every[:2]:
        process = kb(env, "--db", url, *args, stdin="")
        out, err = process.communicate("", timeout=60)
        assert process.returncode == 3, (args, err)
        assert err.startswith("Error: "), err
        assert expected in err, err
        assert "Traceback" not in err, err
        assert SECRET not in out + err and "kb-test-pw" not in out + err, err
        assert "kb:***@127.0.0.1" in err, err


def test_a_password_in_the_url_is_never_printed(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Nor in the query (`?password=`): not in stats' database line, not in the import
    sources kb records, not in the traceback of a bug."""
    from kb.cli import main

    in_query = pg_url.replace("kb:kb-test-pw@", "kb@") + "?password=kb-test-pw"
    env = kb_env(tmp_path)
    for url in (pg_url, in_query):
        assert kb(env, "--db", url, "import", str(SEED)).wait(timeout=60) == 0
        for args in (["stats"], ["stats", "--json"]):
            out, err = kb(env, "--db", url, *args).communicate(timeout=60)
            assert "kb-test-pw" not in out + err
            assert "***" in out
    # A source URL's credentials are never stored or shown (user:password, ?token=).
    from kb.ingest import _shown

    assert _shown("https://kb:pw@mirror.example/data/manifest.json?token=t0k&v=2") == (
        "https://mirror.example/data/manifest.json?token=***&v=2"
    )

    def broken(self: Any) -> Any:
        raise RuntimeError(f"unexpected failure talking to {self.url}")

    monkeypatch.setattr(KnowledgeBase, "stats", broken)
    for url in (pg_url, in_query):
        monkeypatch.setattr(sys, "argv", ["kb", "--db", url, "stats"])
        with pytest.raises(SystemExit) as exited:
            main()
        assert exited.value.code == 1
        err = capsys.readouterr().err
        assert "Traceback" in err and "RuntimeError: unexpected failure" in err
        assert "kb-test-pw" not in err and "***" in err


# ----------------------------------------------------------------------------- the server


def test_kb_serve_with_two_workers_shares_one_postgresql_knowledge_base(
    pg_url: str, tmp_path: Path
) -> None:
    """Two workers on one knowledge base; an import by another process is picked up."""
    from tests.serve.conftest import server_env, start_server

    env = server_env(tmp_path)
    assert kb(env, "--db", pg_url, "import", str(SEED), "--quiet").wait(timeout=120) == 0
    live = start_server(pg_url, env, "--workers", "2", log_dir=tmp_path)
    try:
        with live.client() as client:
            for _ in range(6):
                answer = client.post(
                    "/api/match", content=LOG, headers={"Content-Type": "text/plain"}
                )
                assert answer.status_code == 200, answer.text
                assert [m["id"] for m in answer.json()["matches"]] == [SEED_ID]
            other = kb_env(tmp_path / "importer")
            assert kb(other, "--db", pg_url, "import", str(RECORDS40)).wait(timeout=120) == 0
            deadline = time.monotonic() + 60
            seen: set[int] = set()
            while time.monotonic() < deadline and seen != {41}:
                seen = {client.get("/healthz").json()["records"] for _ in range(6)}
                time.sleep(0.5)
            assert seen == {41}
            assert client.get("/api/search", params={"q": "kv cache group"}).json()["total"] >= 1
    finally:
        live.stop()
    assert SECRET not in live.output() and "kb-test-pw" not in live.output()
