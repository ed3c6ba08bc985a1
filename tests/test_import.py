"""`kb import`: every input format, every rejection reason, upserts, exit codes, atomicity."""

from __future__ import annotations

import contextlib
import copy
import gzip
import hashlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kb.knowledge import KnowledgeBase
from tests.conftest import RECORDS40, SEED, corpus_records, kb_noting_its_end, seed_record

pytestmark = pytest.mark.databases  # each test on SQLite and on PostgreSQL


def write_jsonl(path: Path, records: list[Any], wrap: bool = False) -> Path:
    with open(path, "w", encoding="utf-8") as out:
        for record in records:
            value = (
                {"record": record, "datasetVersion": "2026-11-29T20:00:00.000Z"} if wrap else record
            )
            out.write(json.dumps(value) + "\n")
    return path


def gzip_file(path: Path) -> Path:
    target = path.with_name(path.name + ".gz")
    target.write_bytes(gzip.compress(path.read_bytes()))
    return target


def count(db_url: str) -> int:
    with KnowledgeBase(str(db_url)) as kb:
        return int(kb.stats()["records"])


# ----------------------------------------------------------------------------- formats


def test_import_single_wrapped_record_from_the_seed_file(invoke: Any, db_url: str) -> None:
    result = invoke("import", str(SEED), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "inserted": 1,
        "updated": 0,
        "unchanged": 0,
        "rejected": 0,
        "repeated": 0,
        "errors": [],
        "failed": [],
        "repositories": 0,
        "skipped": [],
        "up_to_date": [],
    }
    with KnowledgeBase(str(db_url)) as kb:
        assert kb.get("46a1fcb95e0d367e") == seed_record()


def test_import_pretty_printed_plain_record(invoke: Any, db_url: str, tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_text(json.dumps(seed_record(), indent=2))
    assert invoke("import", str(path)).exit_code == 0
    assert count(db_url) == 1


def test_import_json_array_of_records(
    invoke: Any, db_url: str, tmp_path: Path, records: list[Any]
) -> None:
    path = tmp_path / "repo.json"
    path.write_text(json.dumps(records, indent=1))
    result = invoke("import", str(path), "--json")
    assert json.loads(result.stdout)["inserted"] == len(records)
    assert count(db_url) == len(records)


def test_import_jsonl_wrapped_and_plain(
    invoke: Any, db_url: str, tmp_path: Path, records: list[Any]
) -> None:
    write_jsonl(tmp_path / "a.jsonl", records[:20], wrap=True)
    write_jsonl(tmp_path / "b.jsonl", records[20:], wrap=False)
    result = invoke("import", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"))
    assert result.exit_code == 0
    assert count(db_url) == len(records)


@pytest.mark.parametrize("shape", ["jsonl", "array", "single"])
def test_import_gzipped_inputs_of_every_shape(
    invoke: Any, db_url: str, tmp_path: Path, records: list[Any], shape: str
) -> None:
    path = tmp_path / f"in.{shape}"
    if shape == "jsonl":
        write_jsonl(path, records)
        expected = len(records)
    elif shape == "array":
        path.write_text(json.dumps(records))
        expected = len(records)
    else:
        path.write_text(json.dumps({"record": records[0], "datasetVersion": "x"}, indent=2))
        expected = 1
    gz = gzip_file(path)
    gz = gz.rename(tmp_path / "renamed.data")  # detected by content, not by name
    assert invoke("import", str(gz)).exit_code == 0
    assert count(db_url) == expected


def test_import_stdin(invoke: Any, db_url: str) -> None:
    result = invoke("import", "-", input=RECORDS40.read_text())
    assert result.exit_code == 0, result.output
    assert count(db_url) == 40


def test_import_folder_walks_data_files_and_skips_hidden(
    invoke: Any, db_url: str, tmp_path: Path, records: list[Any]
) -> None:
    folder = tmp_path / "dataset"
    (folder / "repos" / "owner").mkdir(parents=True)
    (folder / ".hidden").mkdir()
    (folder / "repos" / "owner" / "one.json").write_text(json.dumps(records[:10]))
    write_jsonl(folder / "more.jsonl", records[10:20])
    gzip_file(write_jsonl(tmp_path / "z.jsonl", records[20:30])).rename(folder / "z.jsonl.gz")
    write_jsonl(folder / ".hidden" / "ignored.jsonl", records[30:])
    (folder / "notes.md").write_text("not data")
    result = invoke("import", str(folder), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["inserted"] == 30


def compact_row(record: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": record["id"],
        "repo": record["repo"],
        "slug": record["slug"],
        "code": record["errorCode"],
        "msg": record["errorMessage"],
        "pattern": record["messagePattern"],
        "type": record["errorType"],
        "cls": record["errorClass"],
        "tags": record["tags"],
        "sev": record["severity"],
    }


def test_compact_index_rows_become_stubs_filled_in_by_full_records(
    invoke: Any, db_url: str, tmp_path: Path, records: list[Any]
) -> None:
    index = {
        "schemaVersion": 2,
        "datasetVersion": "2026-11-29T20:00:00.000Z",
        "errors": [compact_row(r) for r in records[:10]],
    }
    path = tmp_path / "index.json.gz"
    path.write_bytes(gzip.compress(json.dumps(index).encode()))
    result = invoke("import", str(path), "--json")
    assert json.loads(result.stdout)["inserted"] == 10
    with KnowledgeBase(str(db_url)) as kb:
        stub = kb.get(records[0]["id"])
        assert stub is not None and stub["msg"] == records[0]["errorMessage"]
        assert kb.stats()["stubs"] == 10
    # The full records fill the stubs in; the stubs again never take a full record back.
    write_jsonl(tmp_path / "full.jsonl", records[:5])
    assert (
        json.loads(invoke("import", str(tmp_path / "full.jsonl"), "--json").stdout)["updated"] == 5
    )
    again = json.loads(invoke("import", str(path), "--json").stdout)
    assert (again["updated"], again["unchanged"]) == (0, 10)
    with KnowledgeBase(str(db_url)) as kb:
        assert kb.get(records[0]["id"]) == records[0]
        assert kb.stats()["stubs"] == 5


def make_manifest(folder: Path, records: list[Any], corrupt: bool = False) -> Path:
    (folder / "repos" / "a").mkdir(parents=True, exist_ok=True)
    first = folder / "repos" / "a" / "one.json"
    first.write_text(json.dumps(records[:10]))
    second = folder / "repos" / "a" / "two.json.gz"
    raw = json.dumps(records[10:20]).encode()
    second.write_bytes(gzip.compress(raw))
    files = [
        {
            "path": "repos/a/one.json",
            "bytes": first.stat().st_size,
            "sha256": hashlib.sha256(first.read_bytes()).hexdigest(),
        },
        {
            "path": "repos/a/two.json.gz",
            "bytes": second.stat().st_size,
            "sha256": hashlib.sha256(second.read_bytes()).hexdigest(),
            "rawBytes": len(raw),
            "rawSha256": hashlib.sha256(raw).hexdigest(),
        },
    ]
    if corrupt:
        files[1]["sha256"] = "0" * 64
    manifest = folder / "manifest.json"
    manifest.write_text(
        json.dumps(
            {
                "schemaVersion": 2,
                "datasetVersion": "2026-11-29T20:00:00.000Z",
                "counts": {"errors": 20},
                "files": files,
            },
            indent=2,
        )
    )
    return manifest


def test_manifest_imports_listed_files_verifying_sha256(
    invoke: Any, db_url: str, tmp_path: Path, records: list[Any]
) -> None:
    manifest = make_manifest(tmp_path / "mirror", records)
    result = invoke("import", str(manifest), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["inserted"] == 20
    # A folder holding a manifest imports through it (and not the files twice); the same
    # dataset version again is seen to be imported already, unless --force.
    again = json.loads(invoke("import", str(tmp_path / "mirror"), "--json").stdout)
    assert (again["unchanged"], len(again["up_to_date"])) == (0, 1)
    forced = invoke("import", str(tmp_path / "mirror"), "--json", "--force")
    assert json.loads(forced.stdout)["unchanged"] == 20


def test_manifest_sha256_mismatch_is_refused_by_name_and_nothing_is_stored(
    invoke: Any, db_url: str, tmp_path: Path, records: list[Any]
) -> None:
    manifest = make_manifest(tmp_path / "mirror", records, corrupt=True)
    result = invoke("import", str(manifest))
    assert result.exit_code == 2
    assert "two.json.gz: sha256 mismatch: the manifest says 0000" in result.stderr
    assert count(db_url) == 0


def test_manifest_url_fetches_the_files_it_lists(
    invoke: Any, db_url: str, tmp_path: Path, records: list[Any], http_mirror: Any
) -> None:
    make_manifest(tmp_path / "mirror", records)
    base = http_mirror(tmp_path / "mirror")
    result = invoke("import", f"{base}/manifest.json", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["inserted"] == 20
    single = invoke("import", f"{base}/repos/a/two.json.gz", "--json")
    assert json.loads(single.stdout)["unchanged"] == 10


def test_url_that_does_not_exist_exits_2(invoke: Any, tmp_path: Path, http_mirror: Any) -> None:
    (tmp_path / "mirror").mkdir()
    base = http_mirror(tmp_path / "mirror")
    result = invoke("import", f"{base}/nope.json")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: {base}/nope.json: HTTP 404")


def test_corrupt_manifest_over_http_is_refused(
    invoke: Any, db_url: str, tmp_path: Path, records: list[Any], http_mirror: Any
) -> None:
    make_manifest(tmp_path / "mirror", records, corrupt=True)
    base = http_mirror(tmp_path / "mirror")
    result = invoke("import", f"{base}/manifest.json")
    assert result.exit_code == 2
    assert "sha256 mismatch" in result.stderr
    assert count(db_url) == 0


# ----------------------------------------------------------------------------- rejections


def mutate(record: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(record)
    for key, value in changes.items():
        if value is _DELETE:
            del out[key]
        else:
            out[key] = value
    return out


_DELETE = object()

REJECTIONS = [
    ({"id": "XYZ"}, "id", 'must be 16 lowercase hex digits, got "XYZ"'),
    ({"id": _DELETE}, "id", "missing"),
    ({"repo": "no-slash"}, "repo", "must be 'owner/name', got \"no-slash\""),
    ({"errorMessage": ""}, "errorMessage", "must not be empty"),
    ({"messagePattern": 7}, "messagePattern", "expected a string, got number"),
    (
        {"errorType": "oops"},
        "errorType",
        'must be one of console, error_code, exception, http, panic, validation, got "oops"',
    ),
    ({"severity": None}, "severity", "must be one of critical, error, info, warning, got null"),
    ({"httpStatus": 700}, "httpStatus", "must be at most 599, got 700"),
    ({"httpStatus": True}, "httpStatus", "expected an integer, got boolean"),
    ({"lineNumber": "12"}, "lineNumber", "expected an integer, got string"),
    ({"sourceCodeEnd": 1}, "sourceCodeEnd", "must not be before sourceCodeStart"),
    ({"documentation": ""}, "documentation", "must not be empty"),
    ({"solutions": ["ok", ""]}, "solutions[1]", "must not be empty"),
    (
        {"slug": "Bad Slug"},
        "slug",
        "must be lowercase kebab-case like 'err-bad-response', got \"Bad Slug\"",
    ),
    ({"lineNumber": 0}, "lineNumber", "must be at least 1, got 0"),
    ({"repo": "a b/c"}, "repo", "must be 'owner/name', got \"a b/c\""),
    ({"sourceCode": "x\n" * 40}, "sourceCode", "must be at most 40 lines, got 41"),
    ({"solutions": "do this"}, "solutions", "expected an array of strings, got string"),
    ({"preventionTips": ["ok", 3]}, "preventionTips[1]", "expected a string, got number"),
    ({"tags": ["Bad Tag"]}, "tags[0]", "must be kebab-case like 'kv-cache', got \"Bad Tag\""),
    (
        {"handlingStrategy": "pray"},
        "handlingStrategy",
        'must be one of fallback, retry, try-catch, type-guard, validation, got "pray"',
    ),
    (
        {"analyzedAt": "yesterday"},
        "analyzedAt",
        'not an ISO-8601 UTC timestamp like 2026-07-14T00:00:00Z: "yesterday"',
    ),
    (
        {"analyzedAt": "2026-07-14T00:00:00+02:00"},
        "analyzedAt",
        'not an ISO-8601 UTC timestamp like 2026-07-14T00:00:00Z: "2026-07-14T00:00:00+02:00"',
    ),
    ({"analyzedSha": ""}, "analyzedSha", "must not be empty"),
    ({"githubUrl": "github.com/a/b"}, "githubUrl", 'not a valid URL: "github.com/a/b"'),
    ({"githubUrl": "https://"}, "githubUrl", 'not a valid URL: "https://"'),
    ({"schemaVersion": 3}, "schemaVersion", "unsupported version 3 (kb reads 2)"),
]


@pytest.mark.parametrize(("changes", "field", "reason"), REJECTIONS)
def test_each_rejection_reason_is_reported_exactly_and_good_records_are_kept(
    invoke: Any,
    db_url: str,
    tmp_path: Path,
    records: list[Any],
    changes: dict[str, Any],
    field: str,
    reason: str,
) -> None:
    bad = mutate(records[1], **changes)
    path = write_jsonl(tmp_path / "in.jsonl", [records[0], bad, records[2]])
    result = invoke("import", str(path), "--json")
    assert result.exit_code == 1
    record_id = bad.get("id") if isinstance(bad.get("id"), str) else None
    assert result.stderr.splitlines()[0] == f"{path}:2: id {record_id or '-'}: {field}: {reason}"
    summary = json.loads(result.stdout)
    assert summary["inserted"] == 2 and summary["rejected"] == 1
    assert summary["errors"] == [
        {"file": str(path), "line": 2, "id": record_id, "field": field, "reason": reason}
    ]
    assert count(db_url) == 2


def test_rejection_in_an_array_names_the_index(
    invoke: Any, tmp_path: Path, records: list[Any]
) -> None:
    path = tmp_path / "repo.json"
    path.write_text(
        json.dumps([records[0], records[1], mutate(records[2], severity="fatal")], indent=2)
    )
    result = invoke("import", str(path))
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0].startswith(f"{path}:2: id {records[2]['id']}: severity:")


def test_a_line_that_is_not_json_is_rejected_alone(
    invoke: Any, db_url: str, tmp_path: Path
) -> None:
    lines = RECORDS40.read_text().splitlines()
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join([lines[0], '{"id": "0123', lines[1], "[1, 2]"]) + "\n")
    result = invoke("import", str(path))
    assert result.exit_code == 1
    errors = result.stderr.splitlines()
    assert errors[0].startswith(f"{path}:2: id -: record: not valid JSON: Unterminated string")
    assert errors[1] == f"{path}:4: id -: record: expected a JSON object, got array"
    assert count(db_url) == 2


def test_unknown_fields_are_kept_and_exported_unchanged(
    invoke: Any, db_url: str, tmp_path: Path, records: list[Any]
) -> None:
    newer = dict(records[0], contentChangedAt="2026-11-01T00:00:00Z", extraInfo={"a": [1, 2]})
    path = write_jsonl(tmp_path / "in.jsonl", [newer])
    assert invoke("import", str(path)).exit_code == 0
    with KnowledgeBase(str(db_url)) as kb:
        assert kb.get(newer["id"]) == newer
    exported = invoke("export").stdout
    assert json.loads(exported) == newer


# ----------------------------------------------------------------------------- unreadable input


def test_missing_file_exits_2_and_stores_nothing(invoke: Any, db_url: str, tmp_path: Path) -> None:
    result = invoke("import", str(RECORDS40), str(tmp_path / "missing.jsonl"))
    assert result.exit_code == 2
    assert result.stderr.strip() == f"Error: {tmp_path / 'missing.jsonl'}: no such file or folder"
    assert count(db_url) == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"hello world\n", "1: not JSON: the file starts with 'hello world'"),
        (b"\xff\xfe\x00garbage", "not UTF-8 text"),
        (b'{"id": "x",\n  "repo": ', "not valid JSON: Expecting value"),
    ],
)
def test_input_that_is_not_json_at_all_exits_2(
    invoke: Any, db_url: str, tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    result = invoke("import", str(RECORDS40), str(path))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: {path}")
    assert message in result.stderr
    assert count(db_url) == 0


# ----------------------------------------------------------------------------- upserts


def test_reimport_is_idempotent_and_changes_are_updates(
    invoke: Any, db_url: str, tmp_path: Path, records: list[Any]
) -> None:
    path = write_jsonl(tmp_path / "in.jsonl", records)
    first = json.loads(invoke("import", str(path), "--json").stdout)
    second = json.loads(invoke("import", str(path), "--json").stdout)
    assert first["inserted"] == 40
    assert (second["inserted"], second["updated"], second["unchanged"]) == (0, 0, 40)
    changed = [dict(r) for r in records]
    changed[3]["documentation"] = "Rewritten documentation."
    changed[7]["tags"] = ["new-tag"]
    write_jsonl(path, changed)
    third = json.loads(invoke("import", str(path), "--json").stdout)
    assert (third["updated"], third["unchanged"]) == (2, 38)
    # the derived tag rows follow the update: the new tag finds it, an old one no longer does
    tagged = json.loads(invoke("search", "--tag", "new-tag", "--json").stdout)["results"]
    assert [r["id"] for r in tagged] == [records[7]["id"]]
    old_tag = records[7]["tags"][0]
    still = json.loads(invoke("search", "--tag", old_tag, "--limit", "100", "--json").stdout)
    assert records[7]["id"] not in [r["id"] for r in still["results"]]
    with KnowledgeBase(str(db_url)) as kb:
        assert kb.get(records[3]["id"])["documentation"] == "Rewritten documentation."  # type: ignore[index]


def test_export_import_export_gives_the_same_bytes(
    invoke: Any, tmp_path: Path, records: list[Any]
) -> None:
    first_db, second_db = tmp_path / "one.sqlite3", tmp_path / "two.sqlite3"
    invoke("import", str(RECORDS40), str(SEED), db=first_db)
    invoke("export", str(tmp_path / "one.jsonl"), db=first_db)
    invoke("import", str(tmp_path / "one.jsonl"), db=second_db)
    invoke("export", str(tmp_path / "two.jsonl"), db=second_db)
    one = (tmp_path / "one.jsonl").read_bytes()
    assert one == (tmp_path / "two.jsonl").read_bytes()
    exported = {json.loads(line)["id"]: json.loads(line) for line in one.splitlines()}
    for record in [*records, seed_record()]:
        assert exported[record["id"]] == record


def test_export_of_one_repo(invoke: Any, records: list[Any]) -> None:
    invoke("import", str(RECORDS40))
    repo = records[0]["repo"]
    lines = invoke("export", "--repo", repo).stdout.splitlines()
    assert lines and all(json.loads(line)["repo"] == repo for line in lines)
    assert len(lines) == sum(1 for r in records if r["repo"] == repo)


# ----------------------------------------------------------------------------- atomicity


@pytest.mark.parametrize("first", [False, True], ids=["into-records", "first-load"])
def test_killed_import_leaves_the_database_as_it_was(tmp_path: Path, first: bool) -> None:
    """Killed mid-way, an import leaves the database as it was: with its records, or empty,
    its schema untouched either way."""
    db_path = tmp_path / "kb.sqlite3"
    env = dict(os.environ, KB_DATABASE_URL=str(db_path))
    if first:
        subprocess.run(
            [sys.executable, "-m", "kb", "db", "upgrade"], env=env, check=True, capture_output=True
        )
    else:
        subprocess.run(
            [sys.executable, "-m", "kb", "import", str(SEED)],
            env=env,
            check=True,
            capture_output=True,
        )
    schema_before = schema_of_file(db_path)
    # A big input, served slowly through a pipe, so the kill lands mid-import.
    template = corpus_records()
    feeder = tmp_path / "feed.py"
    feeder.write_text(
        "import json, sys, time\n"
        f"records = json.load(open({str(tmp_path / 'r.json')!r}))\n"
        "for i in range(200000):\n"
        "    r = dict(records[i % len(records)]); r['id'] = format(i + 1, '016x')\n"
        "    sys.stdout.write(json.dumps(r) + '\\n')\n"
        "    if i % 5000 == 0: sys.stdout.flush()\n"
    )
    (tmp_path / "r.json").write_text(json.dumps(template))
    feed = subprocess.Popen([sys.executable, str(feeder)], stdout=subprocess.PIPE)
    kb = subprocess.Popen(
        [sys.executable, "-m", "kb", "import", "-", "--batch-size", "100"],
        stdin=feed.stdout,
        env=env,
        stderr=subprocess.PIPE,
    )
    feed.stdout.close()
    # Wait until the import has written pages of its transaction to disk: into the WAL, or,
    # for a first load (kb.db.import_transaction's rollback journal), into the database file
    # itself once its page cache spills, the journal keeping what to undo.
    wal, journal = Path(f"{db_path}-wal"), Path(f"{db_path}-journal")
    size_before = db_path.stat().st_size
    deadline = time.monotonic() + 60

    def written() -> int:
        if first:
            return db_path.stat().st_size - size_before if journal.exists() else 0
        return wal.stat().st_size if wal.exists() else 0

    while time.monotonic() < deadline and written() < 2_000_000:
        time.sleep(0.05)
    assert kb.poll() is None, "the import finished before it could be killed"
    assert written() >= 2_000_000, "the import wrote nothing to disk in a minute"
    kb.send_signal(signal.SIGKILL)
    kb.wait()
    feed.kill()
    feed.wait()
    with KnowledgeBase(str(db_path)) as opened:
        figures = opened.stats()
        assert figures["records"] == (0 if first else 1)
        assert figures["imports"] == (0 if first else 1)
    assert schema_of_file(db_path) == schema_before
    assert not journal.exists()  # rolled back by the first connection after the kill
    with contextlib.closing(sqlite3.connect(db_path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_an_import_says_it_builds_the_matcher_index_only_when_it_does(
    invoke: Any, records: list[Any], tmp_path: Path, db_path: Path
) -> None:
    """A first load into an empty SQLite file builds the index beside the import, so its
    summary is the last line; an import into a knowledge base with records builds it after,
    and says so. Either way the next match loads the index for the new revision."""
    from kb.config import cache_dir_for
    from kb.knowledge import KnowledgeBase
    from kb.matcher import cache_is_current

    first = invoke("import", str(write_jsonl(tmp_path / "first.jsonl", records[:20])))
    assert first.exit_code == 0, first.output
    assert first.stderr.splitlines()[-1].startswith("20 records read from 1 file(s)")
    assert "Building the matcher index" not in first.stderr
    more = invoke("import", str(write_jsonl(tmp_path / "more.jsonl", records[20:25])))
    assert more.exit_code == 0, more.output
    assert more.stderr.splitlines()[-1] == "Building the matcher index..."
    with KnowledgeBase(str(db_path)) as kb:
        revision = kb.revision()
    assert cache_is_current(cache_dir_for(f"sqlite:///{db_path.resolve()}"), revision)


def test_an_import_ends_without_the_interpreters_finalization_and_loses_nothing(
    tmp_path: Path, records: list[Any], db_url: str
) -> None:
    """`kb import`, once it has committed, ends without the interpreter freeing every object
    (kb.cli.exit_now): its JSON summary whole on stdout, its exit status (0 all stored, 1 some
    rejected), its atexit handlers run, its connections closed (no WAL left behind), and the
    records and the matcher index there for the next process. An import that stores nothing
    because an input cannot be read ends as any program does."""
    env = dict(os.environ, KB_DATABASE_URL=db_url)

    def kb(*args: str) -> subprocess.CompletedProcess[str]:
        return kb_noting_its_end(env, *args)

    good = write_jsonl(tmp_path / "good.jsonl", records[:30])
    first = kb("import", "--json", str(good))
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["inserted"] == 30
    assert "atexit ran" in first.stderr and "finalized" not in first.stderr
    bad = dict(records[30], severity="fatal")
    mixed = write_jsonl(tmp_path / "mixed.jsonl", [records[31], bad, records[32]])
    second = kb("import", "--json", str(mixed))
    assert second.returncode == 1, second.stderr
    summary = json.loads(second.stdout)
    assert (summary["inserted"], summary["rejected"]) == (2, 1)
    assert "atexit ran" in second.stderr and "finalized" not in second.stderr
    if db_url.endswith(".sqlite3"):
        assert not Path(db_url + "-wal").exists()  # the last connection closed, checkpointed
    stats = kb("stats", "--json")
    assert stats.returncode == 0 and json.loads(stats.stdout)["records"] == 32
    log = tmp_path / "app.log"
    log.write_text(records[31]["errorMessage"] + "\n")
    found = kb("match", "--json", str(log))
    assert found.returncode == 0, found.stderr
    assert records[31]["id"] in [m["id"] for m in json.loads(found.stdout)["matches"]]
    assert "Building" not in found.stderr  # the index the import built, loaded
    unreadable = kb("import", str(tmp_path / "no-such.jsonl"))
    assert unreadable.returncode == 2
    assert unreadable.stderr.splitlines()[-2:] == ["atexit ran", "finalized"]


@pytest.mark.parametrize("page_size", [16384, 4096])
def test_a_first_load_gives_the_full_text_index_leaves_its_pages_hold(
    tmp_path: Path, records: list[Any], page_size: int
) -> None:
    """On kb's 16 KB pages a first load sets FTS5's leaf size (pgsz) to what one page holds,
    and the index keeps it through later imports; a file of 4 KB pages (made before kb chose
    16 KB) keeps FTS5's own. Either way FTS5's check passes and a word finds its records."""
    from kb.ingest.writers import FTS_LEAF_SLACK

    db = tmp_path / "kb.sqlite3"
    if page_size != 16384:  # a file whose page size is set before kb first opens it
        with contextlib.closing(sqlite3.connect(db)) as conn:
            conn.execute(f"PRAGMA page_size = {page_size}")
            conn.execute("PRAGMA journal_mode = WAL").fetchall()
    first = write_jsonl(tmp_path / "first.jsonl", records)
    later = write_jsonl(tmp_path / "later.jsonl", [dict(records[0], documentation="Quokkas.")])
    with KnowledgeBase(str(db)) as kb:
        kb.import_sources([str(first)])
        kb.import_sources([str(later)])
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == page_size
        config = dict(conn.execute("SELECT k, v FROM records_fts_config").fetchall())
        assert config.get("pgsz") == (16384 - FTS_LEAF_SLACK if page_size == 16384 else None)
        conn.execute("INSERT INTO records_fts(records_fts, rank) VALUES ('integrity-check', 1)")
        (longest,) = conn.execute("SELECT max(length(block)) FROM records_fts_data").fetchone()
        assert longest <= page_size - 35  # a table leaf's payload kept in its page
        found = conn.execute(
            "SELECT r.id FROM records_fts AS f JOIN records AS r ON r.key = f.rowid "
            "WHERE records_fts MATCH 'quokkas'"
        ).fetchall()
        assert found == [(records[0]["id"],)]


@pytest.mark.parametrize("good", [True, False], ids=["stored", "all-rejected"])
def test_a_first_load_gives_back_every_index_it_set_aside(
    tmp_path: Path, records: list[Any], good: bool
) -> None:
    """Into an empty table the import drops the secondary indexes and makes them again after
    its last row (one sort each, not a random insert a row): the schema after it is the
    schema before, also when no record was stored, and the indexes answer for every row."""
    db_path = tmp_path / "kb.sqlite3"
    with KnowledgeBase(str(db_path)):
        pass
    schema_before = schema_of_file(db_path)
    # A repeated id with other tags: the later copy's tags are the ones kept.
    retagged = dict(records[0], tags=["retagged", "retagged", *records[1]["tags"]])
    rows = [*records, retagged] if good else [dict(r, schemaVersion=9) for r in records]
    path = write_jsonl(tmp_path / "in.jsonl", rows)
    with KnowledgeBase(str(db_path)) as opened:
        report = opened.import_sources([str(path)], batch_size=7)
    assert (report.inserted, report.rejected) == ((len(records), 0) if good else (0, len(records)))
    after = schema_of_file(db_path)
    assert after == schema_before
    assert any(kind == "index" and name == "ix_record_tags_tag" for kind, name, _sql in after)
    import sqlite3

    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        keys = dict(conn.execute("SELECT id, key FROM records"))
        stored_tags = set(conn.execute("SELECT record_key, tag FROM record_tags"))
        latest = {r["id"]: r for r in rows} if good else {}
        assert stored_tags == {(keys[i], tag) for i, r in latest.items() for tag in r["tags"]}
        for index in ("ix_records_repo", "ix_records_slug", "ix_record_tags_tag"):
            table = "record_tags" if "tags" in index else "records"
            indexed = conn.execute(f"SELECT count(*) FROM {table} INDEXED BY {index}").fetchone()
            assert indexed == conn.execute(f"SELECT count(*) FROM {table}").fetchone()


def schema_of_file(db_path: Path) -> list[tuple[str, str, str]]:
    # closed after: an open connection would keep a first load in WAL (kb.db.import_transaction)
    with contextlib.closing(sqlite3.connect(db_path)) as conn:
        rows = conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name"
        )
        return [tuple(row) for row in rows]


# ----------------------------------------------------------------------------- storage


@pytest.mark.parametrize(
    "value",
    [
        [],
        {},
        None,
        ["plain", 'quote " and \\ backslash', "tab\tnew\nline", "café ☕ 😀", "\x00\x1f"],
        ["mixed", 1, None, True, 2.5],
        [["nested"]],
        {"key": ["value"], "n": 1},
        "a string",
        (),
        ("a", "b_c", 'q"uote', "é 😀"),
        ("name", None, "other"),
        (("nested",), ["list"]),
    ],
)
def test_stored_json_is_exactly_what_json_dumps_writes(value: Any) -> None:
    from kb.jsontext import std_dumps

    assert std_dumps(value) == json.dumps(value)


def test_a_first_load_with_a_repeated_id_finds_the_repeat_in_any_batch(
    invoke: Any, tmp_path: Path, records: list[Any]
) -> None:
    """Into an empty table the importer skips looking up ids it has not written yet; one it
    wrote earlier in the same import is still found, whatever batch it is in, and reported
    as a repeat (the later copy kept), not as an update of the knowledge base."""
    changed = dict(records[0], documentation="Changed later in the same file.")
    path = write_jsonl(tmp_path / "in.jsonl", [*records, records[1], changed])
    result = invoke("import", str(path), "--batch-size", "7", "--json")
    report = json.loads(result.stdout)
    assert (report["inserted"], report["updated"], report["unchanged"]) == (40, 0, 0)
    assert report["repeated"] == 2
    assert f"{path}:42: id {records[0]['id']}: appears again in this import" in result.stderr
    exported = [json.loads(line) for line in invoke("export").stdout.splitlines()]
    assert len(exported) == 40
    by_id = {r["id"]: r for r in exported}
    assert by_id[records[0]["id"]]["documentation"] == "Changed later in the same file."


def test_the_portable_writer_stores_what_the_sqlite_writer_stores(
    tmp_path: Path, records: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer other databases use (PostgreSQL), run here on SQLite: the same records and
    tag rows after a first import and after an import that updates some of them."""
    from sqlalchemy import select

    from kb.ingest import writers
    from kb.models import RECORD_TAGS, RECORDS

    first = write_jsonl(tmp_path / "first.jsonl", records[:30])
    changed = [mutate(r, tags=[*r["tags"], "changed"]) for r in records[20:]]
    second = write_jsonl(tmp_path / "second.jsonl", changed)

    def stored(db: Path) -> tuple[list[Any], list[Any]]:
        with KnowledgeBase(str(db)) as kb, kb.engine.connect() as conn:
            rows = conn.execute(
                select(RECORDS.c.id, RECORDS.c.content_hash, RECORDS.c.tags).order_by("id")
            ).all()
            tags = conn.execute(
                select(RECORDS.c.id, RECORD_TAGS.c.tag)
                .join(RECORDS, RECORDS.c.key == RECORD_TAGS.c.record_key)
                .order_by(RECORDS.c.id, RECORD_TAGS.c.tag)
            ).all()
        return rows, tags

    results = []
    for name, writer in (("sqlite", writers.SqliteWriter), ("portable", writers.PortableWriter)):
        monkeypatch.setattr(writers, "make_writer", lambda conn, run, w=writer: w(conn, run))
        monkeypatch.setattr("kb.ingest.importer.make_writer", writers.make_writer)
        db = tmp_path / f"{name}.sqlite3"
        with KnowledgeBase(str(db)) as kb:
            assert kb.import_sources([str(first)]).inserted == 30
            report = kb.import_sources([str(second)])
            assert (report.inserted, report.updated) == (len(records) - 30, 10)
        results.append(stored(db))
    assert results[0] == results[1]
    assert any(tag == "changed" for _id, tag in results[1][1])


def test_a_nul_character_rejects_its_record_on_postgresql_alone(
    invoke: Any, tmp_path: Path, records: list[Any], database: str
) -> None:
    """JSON can spell U+0000 and SQLite keeps it; PostgreSQL's text and jsonb cannot hold it,
    so there the record is rejected with a reason and the others are stored."""
    with_nul = dict(records[0], documentation="before\x00after")
    path = write_jsonl(tmp_path / "in.jsonl", [with_nul, *records[1:5]])
    result = invoke("import", str(path), "--json")
    report = json.loads(result.stdout)
    if database == "sqlite":
        assert (result.exit_code, report["inserted"], report["rejected"]) == (0, 5, 0)
        assert (
            json.loads(invoke("show", records[0]["id"], "--format", "json").stdout)["documentation"]
            == "before\x00after"
        )
        return
    assert (result.exit_code, report["inserted"], report["rejected"]) == (1, 4, 1)
    assert report["errors"][0]["field"] == "documentation"
    assert "NUL character (U+0000), which PostgreSQL cannot store" in report["errors"][0]["reason"]
    assert f"{path}:1: id {records[0]['id']}: documentation:" in result.stderr


def test_a_folder_with_no_dataset_files_is_an_error_not_zero_records(
    invoke: Any, tmp_path: Path, records: list[Any]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.md").write_text("not a dataset")
    result = invoke("import", str(empty))
    assert result.exit_code == 2
    assert f"Error: {empty}: no dataset files (names ending .json/.jsonl" in result.stderr
    # Beside a file that is one, the empty folder is a warning.
    path = write_jsonl(tmp_path / "in.jsonl", records[:2])
    both = invoke("import", str(empty), str(path))
    assert both.exit_code == 0
    assert f"warning: {empty}: no dataset files in this folder" in both.stderr


# ----------------------------------------------------------------------------- pacing


def test_an_import_and_a_build_collect_garbage_less_often_and_give_the_pace_back(
    tmp_path: Path, records: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """While records are stored and while the matcher index is built, the cyclic collector
    runs at BULK_GC_THRESHOLDS; afterwards at the process's own pace (here a made-up one),
    also when the import failed."""
    import gc

    from kb.ingest.importer import Importer
    from kb.matcher import build
    from kb.pacing import BULK_GC_THRESHOLDS

    seen: dict[str, tuple[int, int, int]] = {}
    add, write = Importer.add, build._RowWriter.write

    def watched_add(self: Any, item: Any) -> None:
        seen["import"] = gc.get_threshold()
        add(self, item)

    def watched_write(self: Any, pending: Any) -> None:
        seen["build"] = gc.get_threshold()
        write(self, pending)

    monkeypatch.setattr(Importer, "add", watched_add)
    monkeypatch.setattr(build._RowWriter, "write", watched_write)
    before = gc.get_threshold()
    gc.set_threshold(900, 11, 12)
    try:
        with KnowledgeBase(str(tmp_path / "kb.sqlite3")) as opened:
            opened.import_sources([str(write_jsonl(tmp_path / "in.jsonl", records))])
            assert gc.get_threshold() == (900, 11, 12)
            opened.build_matcher()
            assert gc.get_threshold() == (900, 11, 12)
            assert seen == {"import": BULK_GC_THRESHOLDS, "build": BULK_GC_THRESHOLDS}

            def broken(self: Any, item: Any) -> None:
                raise RuntimeError("the disk went away")

            monkeypatch.setattr(Importer, "add", broken)
            with pytest.raises(RuntimeError):
                opened.import_sources([str(tmp_path / "in.jsonl")], force=True)
            assert gc.get_threshold() == (900, 11, 12)
    finally:
        gc.set_threshold(*before)


def test_a_held_setting_comes_back_when_the_last_of_overlapping_holders_leaves() -> None:
    import threading

    from kb.pacing import Held

    value = [5]
    held = Held(lambda: value[0], lambda v: value.__setitem__(0, v), lambda saved: saved * 10)
    entered, leave = threading.Barrier(2), threading.Event()

    def holder() -> None:
        with held:
            entered.wait()
            leave.wait()

    thread = threading.Thread(target=holder)
    thread.start()
    with held:
        entered.wait()
        assert value[0] == 50  # not 500: the second holder keeps the first one's value
    assert value[0] == 50  # the thread still holds it
    leave.set()
    thread.join()
    assert value[0] == 5


def test_the_list_columns_words_are_stored_as_they_are_and_found_by_a_search(
    invoke: Any, db_url: str, tmp_path: Path
) -> None:
    """A solution's words outside ASCII are stored as they are, not as JSON escapes, so the
    full-text index holds them and a search finds the record by them (json.dumps's
    "gr\\u00fcndlich" was never found by "gründlich"); the other list columns and the unknown
    fields come back as they went in."""
    record = seed_record()
    record["solutions"] = ["Überprüfen Sie die Konfigurationsdatei gründlich", "日本語の説明"]
    record["preventionTips"] = ["Schlüssel regelmäßig erneuern"]
    record["vendorNote"] = {"name": "Zoë", "n": [1, 2.5, None, True]}
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(record, ensure_ascii=True) + "\n", encoding="utf-8")
    result = invoke("import", str(path))
    assert result.exit_code == 0, result.output
    for words in ("gründlich", "Überprüfen"):
        found = json.loads(invoke("search", words, "--json").stdout)
        assert [hit["id"] for hit in found["results"]] == [record["id"]], words
    with KnowledgeBase(str(db_url)) as kb:
        assert kb.get(record["id"]) == record
    # an update (written otherwise than a new row) keeps its words searchable too
    record["solutions"] = ["Prüfen Sie den Schlüsselspeicher"]
    path.write_text(json.dumps(record, ensure_ascii=True) + "\n", encoding="utf-8")
    report = json.loads(invoke("import", str(path), "--json").stdout)
    assert report["updated"] == 1
    found = json.loads(invoke("search", "Schlüsselspeicher", "--json").stdout)
    assert [hit["id"] for hit in found["results"]] == [record["id"]]
    assert json.loads(invoke("search", "gründlich", "--json").stdout)["results"] == []
    with KnowledgeBase(str(db_url)) as kb:
        assert kb.get(record["id"]) == record


def test_nan_in_an_unknown_field_rejects_its_record_on_postgresql_alone(
    invoke: Any, tmp_path: Path, records: list[Any], database: str
) -> None:
    """Python's JSON spells NaN and Infinity and SQLite keeps their text; PostgreSQL's jsonb
    cannot hold them, so there the record is rejected with a reason and the others are stored
    (the whole import failed on it before)."""
    odd = dict(records[0], vendorScore={"ratio": float("nan"), "top": [float("inf")]})
    path = write_jsonl(tmp_path / "in.jsonl", [odd, *records[1:5]])
    result = invoke("import", str(path), "--json")
    report = json.loads(result.stdout)
    if database == "sqlite":
        assert (result.exit_code, report["inserted"], report["rejected"]) == (0, 5, 0)
        shown = json.loads(invoke("show", records[0]["id"], "--format", "json").stdout)
        score = shown["vendorScore"]
        assert score["ratio"] != score["ratio"] and score["top"] == [float("inf")]
        return
    assert (result.exit_code, report["inserted"], report["rejected"]) == (1, 4, 1), result.output
    assert report["errors"][0]["field"] == "vendorScore"
    assert "NaN or Infinity, which PostgreSQL's jsonb cannot store" in report["errors"][0]["reason"]
    assert f"{path}:1: id {records[0]['id']}: vendorScore:" in result.stderr


class _LaggingBuild:
    """A matcher build beside the import that is always behind: at every batch the import
    does all the work it may do early (kb.ingest.writers.SqliteWriter.spare), as the real
    build's queue lets it while full (kb.matcher.background)."""

    revision = "lagging"

    def __init__(self) -> None:
        self.spared = 0
        self.usable = True

    def rows(self, rows: list[dict[str, Any]], meanwhile: Any = None) -> None:
        while self.usable and meanwhile is not None and meanwhile():
            self.spared += 1

    def invalid(self) -> None:
        self.usable = False  # as the real build: given up, no more waiting

    def end(self) -> None:
        pass

    def committing(self, conn: Any) -> None:
        pass


def test_a_first_load_indexed_while_it_waits_for_the_build_finds_what_one_indexed_at_the_end(
    tmp_path: Path, records: list[Any]
) -> None:
    """The full-text entries a first load writes while it waits for the matcher build are
    those it would write after its last row: the same records found, ranked and scored
    alike, FTS5's own check passing. A record repeated later in the same file, after its
    first copy was indexed, is found by its later text only."""
    from kb.ingest import import_sources

    changed = dict(records[0], documentation="Zanzibarian quokkas changed it later.")
    path = write_jsonl(tmp_path / "in.jsonl", [*records, dict(records[3]), changed])
    # The first copy's documentation, as a phrase: no longer the record's text.
    old_text = '"' + " ".join(re.findall(r"[A-Za-z]+", records[0]["documentation"])[:6]) + '"'
    slug = '"' + records[0]["slug"] + '"'
    builds = {"beside": _LaggingBuild(), "after": None}
    found: dict[str, list[Any]] = {}
    for name, build in builds.items():
        db = tmp_path / f"{name}.sqlite3"
        with KnowledgeBase(str(db)) as kb:
            report = import_sources(kb.engine, [str(path)], batch_size=7, feed=build)
            assert (report.inserted, report.repeated) == (len(records), 2)
        with contextlib.closing(sqlite3.connect(db)) as conn:
            conn.execute("INSERT INTO records_fts(records_fts, rank) VALUES ('integrity-check', 1)")
            found[name] = [
                conn.execute(
                    "SELECT r.id, round(f.rank, 9) FROM records_fts AS f "
                    "JOIN records AS r ON r.key = f.rowid WHERE records_fts MATCH ? "
                    "ORDER BY f.rank, r.id",
                    (query,),
                ).fetchall()
                for query in ("error", '"must be"', "cache", "value", "quokkas", old_text, slug)
            ]
    lagging = builds["beside"]
    assert isinstance(lagging, _LaggingBuild)
    assert lagging.spared >= 5  # the rows of five batches at least were indexed early
    assert found["beside"] == found["after"]
    assert [row[0] for row in found["after"][4]] == [records[0]["id"]]
    assert records[0]["id"] not in [row[0] for row in found["after"][5]]
    assert [row[0] for row in found["after"][6]] == [records[0]["id"]]
