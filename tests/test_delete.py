"""`kb delete` and `KnowledgeBase.delete`: the records named go, all of them or none, and with
them everything derived from them: full-text entries, tag rows, every matcher index."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kb.knowledge import KnowledgeBase
from tests.conftest import RECORDS40, SEED, corpus_records, seed_record
from tests.test_import import write_jsonl
from tests.test_match_cli import LOG

pytestmark = pytest.mark.databases  # each test on SQLite and on PostgreSQL

SEED_ID = "46a1fcb95e0d367e"
NUMPY_ID = "49269dc6732ce3b4"  # records40's first record
HUB_ID = "3705b3f12a19ccf0"  # and its second
TWINS = ("bd9691ed93e93614", "b60782b12c825a9d")  # one repo, one slug
TWIN_SLUG = "huggingface/diffusers/could-not-access-latents-of-provided-encoder-o"
README = (Path(__file__).parent.parent / "README.md").read_text()


@pytest.fixture
def seeded(invoke: Any) -> Any:
    """The seed record (which LOG's error matches) and records40's 40 beside it."""
    assert invoke("import", str(SEED), str(RECORDS40)).exit_code == 0
    return invoke


def matched_ids(invoke: Any) -> list[str]:
    return [m["id"] for m in json.loads(invoke("match", "--json", input=LOG).stdout)["matches"]]


def exported_ids(invoke: Any) -> list[str]:
    return [json.loads(line)["id"] for line in invoke("export").stdout.splitlines()]


def test_a_deleted_record_is_not_matched_searched_shown_counted_or_exported(
    seeded: Any,
) -> None:
    assert matched_ids(seeded) == [SEED_ID]
    before = json.loads(seeded("stats", "--json").stdout)

    result = seeded("delete", SEED_ID)

    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"Deleted 1 record:\n  {SEED_ID}  vllm-project/vllm/{seed_record()['slug']}\n"
    )
    assert matched_ids(seeded) == []
    search = json.loads(seeded("search", "unknown kv cache group kind", "--json").stdout)
    assert SEED_ID not in [hit["id"] for hit in search["results"]]
    shown = seeded("show", SEED_ID)
    assert shown.exit_code == 1
    assert f"no record has the id, slug or code '{SEED_ID}'" in shown.stderr
    after = json.loads(seeded("stats", "--json").stdout)
    assert after["records"] == before["records"] - 1 == 40
    assert after["by_repo"].get("vllm-project/vllm") == before["by_repo"]["vllm-project/vllm"] - 1
    assert after["revision"] != before["revision"]
    ids = exported_ids(seeded)
    assert SEED_ID not in ids and len(ids) == 40
    assert seeded("show", NUMPY_ID).exit_code == 0  # the others stay


def test_several_records_go_in_one_command_each_once(seeded: Any) -> None:
    result = seeded("delete", SEED_ID, NUMPY_ID, HUB_ID, NUMPY_ID, "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert [r["id"] for r in out["deleted"]] == [SEED_ID, NUMPY_ID, HUB_ID]
    assert json.loads(seeded("stats", "--json").stdout)["records"] == 38
    assert not {SEED_ID, NUMPY_ID, HUB_ID} & set(exported_ids(seeded))


def test_an_unknown_key_deletes_nothing_and_exits_1_naming_it(seeded: Any) -> None:
    revision = json.loads(seeded("stats", "--json").stdout)["revision"]
    result = seeded("delete", SEED_ID, "ffffffffffffffff", NUMPY_ID)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.splitlines()[:2] == [
        "Error: no record has the id, slug or code 'ffffffffffffffff'",
        "Nothing was deleted. Try `kb search` with words from the message.",
    ]
    stats = json.loads(seeded("stats", "--json").stdout)
    assert stats["records"] == 41 and stats["revision"] == revision
    assert matched_ids(seeded) == [SEED_ID]


def test_several_unknown_keys_are_named_in_one_line(seeded: Any) -> None:
    result = seeded("delete", "no-such-slug", SEED_ID, "eeeeeeeeeeeeeeee")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "Error: 2 keys name no record: 'no-such-slug', 'eeeeeeeeeeeeeeee'",
        "Nothing was deleted.",
    ]
    assert seeded("show", SEED_ID).exit_code == 0


def test_a_key_that_names_several_records_deletes_nothing_and_exits_2(seeded: Any) -> None:
    result = seeded("delete", SEED_ID, TWIN_SLUG)
    assert result.exit_code == 2
    assert "names 2 records" in result.stderr
    assert all(twin in result.stderr for twin in TWINS)  # listed, to pick from
    assert "Nothing was deleted." in result.stderr
    assert seeded("show", SEED_ID).exit_code == 0


def test_keys_are_those_kb_show_takes(invoke: Any, tmp_path: Path) -> None:
    record = seed_record()
    coded = dict(record, id="0123456789abcdef", slug="coded", errorCode="E_KIND")
    forked = dict(record, id="fedcba9876543210", repo="someone/fork", slug="forked")
    prefixed = dict(record, id="abcdef0123456789", slug="prefixed")
    write_jsonl(tmp_path / "in.jsonl", [record, coded, forked, prefixed])
    assert invoke("import", str(tmp_path / "in.jsonl")).exit_code == 0

    keys = [record["slug"], "E_KIND", "someone/fork/forked", "abcdef01"]
    result = invoke("delete", *keys, "--json")

    assert result.exit_code == 0, result.output
    deleted = [r["id"] for r in json.loads(result.stdout)["deleted"]]
    assert deleted == [SEED_ID, "0123456789abcdef", "fedcba9876543210", "abcdef0123456789"]
    assert json.loads(invoke("stats", "--json").stdout)["records"] == 0


def test_a_dry_run_lists_the_records_and_deletes_nothing(seeded: Any) -> None:
    revision = json.loads(seeded("stats", "--json").stdout)["revision"]
    text = seeded("delete", "--dry-run", SEED_ID, NUMPY_ID)
    assert text.exit_code == 0
    assert text.stdout.splitlines()[0] == "Would delete 2 records:"
    as_json = json.loads(seeded("delete", "--dry-run", "--json", SEED_ID).stdout)
    assert as_json == {
        "deleted": [{"id": SEED_ID, "repo": "vllm-project/vllm", "slug": seed_record()["slug"]}],
        "dry_run": True,
    }
    stats = json.loads(seeded("stats", "--json").stdout)
    assert stats["records"] == 41 and stats["revision"] == revision
    assert matched_ids(seeded) == [SEED_ID]
    assert seeded("delete", "--dry-run", "ffffffffffffffff").exit_code == 1


def test_the_readme_names_every_key_that_kb_delete_json_emits(seeded: Any) -> None:
    out = json.loads(seeded("delete", SEED_ID, "--json").stdout)
    keys = {*out, *(key for record in out["deleted"] for key in record)}
    section = README[README.index("### `kb delete") :].split("\n### ", 1)[0]
    assert [k for k in sorted(keys) if f'"{k}"' not in section] == []


def test_the_full_text_index_forgets_a_deleted_record(invoke: Any, tmp_path: Path) -> None:
    # The seed is stored last, so on SQLite the next record stored takes its key: the index
    # must not still hold the deleted record's words under it.
    assert invoke("import", str(RECORDS40)).exit_code == 0
    assert invoke("import", str(SEED)).exit_code == 0
    assert invoke("delete", SEED_ID).exit_code == 0
    newcomer = dict(corpus_records(1)[0], id="0123456789abcdef", slug="newcomer")
    assert invoke("import", str(write_jsonl(tmp_path / "new.jsonl", [newcomer]))).exit_code == 0

    found = json.loads(invoke("search", "backend_per_kind", "--json").stdout)["results"]
    assert found == []
    words = json.loads(invoke("search", newcomer["errorMessage"], "--json").stdout)["results"]
    assert "0123456789abcdef" in [hit["id"] for hit in words]


def test_the_sqlite_full_text_index_passes_its_integrity_check_after_a_delete(
    db_path: Path,
) -> None:
    import sqlite3

    with KnowledgeBase(str(db_path)) as kb:
        kb.import_sources([str(SEED), str(RECORDS40)])
        kb.delete([SEED_ID, NUMPY_ID])
    conn = sqlite3.connect(db_path)
    # rank 1: the index is checked against the records' text too, not only against itself
    conn.execute("INSERT INTO records_fts(records_fts, rank) VALUES ('integrity-check', 1)")
    tags = conn.execute(
        "SELECT count(*) FROM record_tags WHERE record_key NOT IN (SELECT key FROM records)"
    ).fetchone()[0]
    conn.close()
    assert tags == 0


def test_the_library_deletes_and_reports(db_url: str) -> None:
    with KnowledgeBase(db_url) as kb:
        kb.import_sources([str(SEED), str(RECORDS40)])
        revision = kb.revision()
        assert kb.delete([]).deleted == [] and kb.revision() == revision

        report = kb.delete([SEED_ID, NUMPY_ID])

        assert [(r.id, r.repo) for r in report.deleted] == [
            (SEED_ID, "vllm-project/vllm"),
            (NUMPY_ID, "numpy/numpy"),
        ]
        assert report.revision == kb.revision() != revision
        assert kb.get(SEED_ID) is None and kb.count() == 39
        assert kb.match(LOG).matches == []


def test_a_failure_half_way_leaves_every_record_and_the_revision(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kb import deletion

    real = deletion._delete

    def fails_after_deleting(conn: Any, rows: list[Any]) -> None:
        real(conn, rows)
        raise RuntimeError("the disk went away")

    monkeypatch.setattr(deletion, "_delete", fails_after_deleting)
    with KnowledgeBase(db_url) as kb:
        kb.import_sources([str(SEED), str(RECORDS40)])
        revision = kb.revision()
        with pytest.raises(RuntimeError):
            kb.delete([SEED_ID, NUMPY_ID])
        assert kb.count() == 41 and kb.revision() == revision
        assert [hit.id for hit in kb.search("backend_per_kind").results] == [SEED_ID]
        assert [m.id for m in kb.match(LOG).matches] == [SEED_ID]


def test_delete_builds_the_matcher_index_that_other_processes_then_load(
    seeded: Any, db_url: str, tmp_path: Path
) -> None:
    from kb.matcher import FORMAT_VERSION, cache_is_current
    from kb.shared_index import stored_size
    from kb.sql import SqlAlchemyRunner

    with KnowledgeBase(db_url) as server:  # a long-running reader, its index in memory
        assert [m.id for m in server.match(LOG).matches] == [SEED_ID]
        assert seeded("delete", SEED_ID).exit_code == 0
        assert cache_is_current(server.cache_dir(), server.revision())  # built by the command
        assert server.match(LOG).matches == []  # noticed the new revision and reloaded
        with server.engine.connect() as conn:  # stored for machines without a copy
            stored = stored_size(SqlAlchemyRunner(conn), server.revision(), FORMAT_VERSION)
        assert stored

    # Another machine (no cache folder of its own): fetches the index the command stored.
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "other-machine")}
    other = subprocess.run(
        [sys.executable, "-m", "kb", "--db", db_url, "match", "--json", "-"],
        input=LOG,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert other.returncode == 1, other.stderr
    assert json.loads(other.stdout)["matches"] == []


def test_two_deletes_of_the_same_records_at_once_one_deletes_the_other_finds_none(
    seeded: Any, db_url: str
) -> None:
    import threading

    from kb.errors import NotFound

    outcomes: list[str] = []

    def delete() -> None:
        with KnowledgeBase(db_url) as kb:
            try:
                outcomes.append(str(len(kb.delete([SEED_ID, NUMPY_ID, HUB_ID]).deleted)))
            except NotFound:
                outcomes.append("not found")

    threads = [threading.Thread(target=delete) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(outcomes) == ["3", "not found"]
    assert json.loads(seeded("stats", "--json").stdout)["records"] == 38
