"""kb.spelling: the word lists a corrected search scans are the same (words and order) whether
this process collected them from the records, read them from the cache folder, or has no
cache folder at all."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from kb import spelling
from kb.spelling import Speller

ROWS = [
    (
        "unknown-kv-cache-group-kind",
        "ValueError",
        None,
        "vllm-project/vllm",
        "Unknown KV cache group kind {kind}: backend_per_kind",
    ),
    (
        "cuda-out-of-memory",
        "torch.OutOfMemoryError",
        "E0502",
        "pytorch/pytorch",
        "CUDA out of memory. Tried to allocate {size}",
    ),
    (
        "invalid-literal-for-int",
        "ValueError",
        None,
        "python/cpython",
        "invalid literal for int() with base 10: {value} in torch.cuda.memory",
    ),
]


@pytest.fixture()
def run() -> Any:
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE records (slug, error_class, error_code, repo, error_message)")
    con.execute("CREATE TABLE word_lists (revision, kind, data)")  # none shared: collected
    con.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?)", ROWS)
    return lambda sql, *params: con.execute(sql, *params).fetchall()


def _speller(run: Any, cache: Path | None) -> Speller:
    return Speller(run, known=lambda term: False, cache=cache, revision="r1")


def test_word_lists_are_the_same_collected_read_back_or_uncached(run: Any, tmp_path: Path) -> None:
    spelling._LOADED.clear()
    collected = _speller(run, tmp_path)
    words, identifiers = collected.vocabulary(), collected.identifiers()
    assert "cache" in words and "vllm" in words and "valueerror" in words
    # the rule, spelt out: each value's words, and a class or code whole, 3 characters up
    expected = set()
    for slug, error_class, error_code, repo, _message in ROWS:
        for value in (slug, error_class, error_code, repo):
            expected.update(w.lower() for w in re.findall(r"[^\W_]+", value or ""))
        expected.update(v.lower() for v in (error_class, error_code) if v)
    assert words == sorted(w for w in expected if len(w) >= 3 and not w.isdigit())
    assert "backend_per_kind" in identifiers and "torch.cuda.memory" in identifiers
    assert (tmp_path / "vocabulary-r1.txt").is_file()

    spelling._LOADED.clear()  # a new process: the lists come from the cache folder
    read_back = _speller(run, tmp_path)
    assert read_back.vocabulary() == words
    assert read_back.identifiers() == identifiers
    uncached = _speller(run, None)
    assert uncached.vocabulary() == words
    assert uncached.identifiers() == identifiers

    for speller in (collected, read_back, uncached):
        assert speller.correct(["unknwn", "cahce", "backnd_per_kindd"]) == [
            "unknown",
            "cache",
            "backend_per_kind",
        ]
    spelling._LOADED.clear()


def test_identifiers_are_read_from_a_batch_of_messages_as_from_each_alone() -> None:
    """A batch's messages are read joined: every snake_case, dotted or camelCase name of five
    characters or more, none made of the end of one message and the start of the next, a
    repeated message and a missing one changing nothing, and a name found already kept."""
    found = {"already_known"}
    spelling.add_identifiers(
        found,
        [
            "KeyError: 'user_id' not in torch.cuda.is_available()",
            "getAttr failed for value_a",  # ends with a name ...
            "value_b started",  # ... and the next starts with one: two names, not one
            None,
            "KeyError: 'user_id' not in torch.cuda.is_available()",
            "short a_b x.y aB plain words only",  # a_b, x.y and aB are under five characters
        ],
    )
    assert found == {
        "already_known",
        "KeyError",
        "user_id",
        "torch.cuda.is_available",
        "getAttr",
        "value_a",
        "value_b",
    }


@pytest.mark.parametrize("kind", ["identifiers", "vocabulary"])
def test_an_import_leaves_the_word_lists_its_build_collected(
    invoke: Any, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """The build beside an import reads every record anyway: the identifiers and the
    vocabulary it collects are the lists a misspelt search would collect (12 s and 2.7 s at
    1M records), word for word, and that search reads them instead."""
    from kb.config import cache_dir_for
    from kb.knowledge import KnowledgeBase
    from tests.conftest import corpus_records

    records = corpus_records()
    source = tmp_path / "records.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert invoke("import", str(source)).exit_code == 0
    with KnowledgeBase(str(db_path)) as kb:
        revision = kb.revision()
    cache = cache_dir_for(f"sqlite:///{db_path.resolve()}")
    written = (cache / f"{kind}-{revision}.txt").read_text(encoding="utf-8").splitlines()
    con = sqlite3.connect(db_path)
    spelling._LOADED.clear()
    speller = Speller(
        lambda sql, *params: con.execute(sql, *params).fetchall(), known=lambda term: False
    )
    collected = speller.identifiers() if kind == "identifiers" else speller.vocabulary()
    con.close()
    assert written == collected and len(written) > 20
    assert not list(cache.glob(".matcher-import-*"))  # the child's files were all moved

    def collect(self: Speller) -> list[str]:
        raise AssertionError("the list is read from the cache folder, not collected")

    monkeypatch.setattr(Speller, f"_collect_{kind}", collect)
    if kind == "identifiers":
        word = max(written, key=len)
    else:  # a word of a slug (no class or code: those are searched whole)
        word = max((w for w in written if w.isalpha()), key=len)
    misspelt = word[:5] + word[6:]  # a letter left out: no record has it
    result = invoke("search", misspelt, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["didYouMean"] == word
    spelling._LOADED.clear()


@pytest.mark.databases
@pytest.mark.parametrize("first_load", [True, False], ids=["first-load", "update"])
def test_an_import_shares_its_word_lists_through_the_database(
    invoke: Any,
    db_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    first_load: bool,
) -> None:
    """The word lists an import's matcher build collects (beside a first load into SQLite,
    or after the import: an update, or any PostgreSQL import) are stored in the database with
    its index, only the newest revision's: another machine, whose cache folder has none,
    reads them there instead of collecting them from every record, and keeps them in its own
    cache folder."""
    import zlib

    from kb.knowledge import KnowledgeBase
    from kb.sql import SqlAlchemyRunner
    from tests.conftest import corpus_records

    records = corpus_records()
    source = tmp_path / "records.jsonl"
    if not first_load:  # a first import, then an update: the build runs after the import
        source.write_text("".join(json.dumps(r) + "\n" for r in records[:50]))
        assert invoke("import", str(source)).exit_code == 0
        records[0] = {**records[0], "errorMessage": records[0]["errorMessage"] + " zqxv_changed"}
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = invoke("import", str(source))
    assert result.exit_code == 0, result.output
    spelling._LOADED.clear()
    with KnowledgeBase(db_url) as kb, kb.engine.connect() as conn:
        revision = kb.revision()
        run = SqlAlchemyRunner(conn).rows
        stored = run("SELECT revision, kind, data FROM word_lists")
        speller = Speller(run, known=lambda term: False)  # no revision: collected
        collected = {"identifiers": speller.identifiers(), "vocabulary": speller.vocabulary()}
    assert sorted((r, k) for r, k, _ in stored) == [
        (revision, "identifiers"),
        (revision, "vocabulary"),
    ]
    for _revision, kind, data in stored:
        assert zlib.decompress(bytes(data)).decode().splitlines() == collected[kind]
    assert first_load or "zqxv_changed" in collected["identifiers"]

    def collect(self: Speller) -> list[str]:
        raise AssertionError("the list is read from the database, not collected")

    monkeypatch.setattr(Speller, "_collect_identifiers", collect)
    monkeypatch.setattr(Speller, "_collect_vocabulary", collect)
    other_cache = tmp_path / "another-machine"
    monkeypatch.setenv("XDG_CACHE_HOME", str(other_cache))
    spelling._LOADED.clear()
    word = max(collected["identifiers"], key=len)
    misspelt = word[:5] + word[6:]  # a letter left out: no record has it
    result = invoke("search", misspelt, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["didYouMean"] == word
    kept = list(other_cache.glob("kb/*/identifiers-*.txt"))
    assert [p.name for p in kept] == [f"identifiers-{revision}.txt"]
    assert kept[0].read_text(encoding="utf-8").splitlines() == collected["identifiers"]
    spelling._LOADED.clear()
