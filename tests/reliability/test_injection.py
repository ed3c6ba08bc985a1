"""No injection: records whose every text is SQL or FTS5 syntax are stored, found, shown and
exported as the text they are, and searching with such text finds them and breaks nothing:
every statement kb runs takes its values as parameters. (Issue 13.)"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import corpus_records

SQL = "x'); DROP TABLE records; --"
FTS = 'NEAR(drop table) AND "unbalanced OR * ^col:val -minus'
CODE = "E' OR '1'='1"
REPO = "o'r;--/n\"a)me"


def sql_record() -> dict[str, Any]:
    record = corpus_records(1)[0]
    record.update(
        id="5e1ec7000000d00d",
        repo=REPO,
        slug="select-star-from-records",
        errorCode=CODE,
        errorClass="Robert'); DROP TABLE Students;--",
        errorMessage=f"Bobby {SQL} tables",
        messagePattern=r"Bobby x'\); DROP TABLE records; -- tables",
        documentation=f"{FTS} and {SQL}",
        solutions=[SQL, FTS, "%_\\ LIKE wildcards"],
        filePath="db/'; DELETE FROM records; --.py",
    )
    return record


@pytest.fixture
def stored(invoke: Any, tmp_path: Path) -> dict[str, Any]:
    record = sql_record()
    path = tmp_path / "sql.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [record, *corpus_records(5)[1:]]) + "\n")
    result = invoke("import", str(path))
    assert result.exit_code == 0, result.stderr
    return record


def tables(db_path: Path) -> set[str]:
    with sqlite3.connect(db_path) as conn:
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    return names


@pytest.mark.parametrize(
    "query",
    [
        [SQL],
        [FTS],
        ["Bobby", "DROP", "TABLE"],
        ['"', "'", "*", "NEAR(", ")", "^", ":", "-", "AND", "OR", "NOT"],
        ["%_\\"],
    ],
    ids=["sql", "fts", "words", "operators", "wildcards"],
)
def test_search_text_that_is_sql_or_fts_syntax_is_only_text(
    invoke: Any, db_path: Path, stored: dict[str, Any], query: list[str]
) -> None:
    before = tables(db_path)
    result = invoke("search", *query, "--json")
    assert result.exit_code in (0, 1), result.stderr
    assert "Traceback" not in result.stderr
    found = json.loads(result.stdout)["results"]
    if query[0] in (SQL, FTS):
        assert found and found[0]["id"] == stored["id"]
    assert tables(db_path) == before
    assert int(json.loads(invoke("stats", "--json").stdout)["records"]) == 5


def test_filters_and_lookups_take_sql_as_values(
    invoke: Any, db_path: Path, stored: dict[str, Any]
) -> None:
    by_code = json.loads(invoke("search", "--code", CODE, "--json").stdout)["results"]
    assert [r["id"] for r in by_code] == [stored["id"]]
    by_repo = json.loads(invoke("search", "--repo", REPO, "--json").stdout)["results"]
    assert [r["id"] for r in by_repo] == [stored["id"]]
    assert json.loads(invoke("search", "--repo", "' OR 1=1 --", "--json").stdout)["results"] == []
    for key in (CODE, f"{REPO}/select-star-from-records", stored["id"]):
        shown = invoke("show", key, "--format", "json")
        assert shown.exit_code == 0, (key, shown.stderr)
        assert json.loads(shown.stdout) == stored
    assert invoke("show", "' OR 1=1 --").exit_code == 1
    exported = [json.loads(line) for line in invoke("export", "--repo", REPO).stdout.splitlines()]
    assert exported == [stored]
    assert "records" in tables(db_path)


def test_a_log_line_that_is_sql_matches_its_record(invoke: Any, stored: dict[str, Any]) -> None:
    result = invoke("match", "--json", input=f"{stored['errorMessage']}\n")
    assert result.exit_code == 0, result.stderr
    assert [m["id"] for m in json.loads(result.stdout)["matches"]] == [stored["id"]]
