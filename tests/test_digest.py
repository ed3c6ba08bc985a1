"""The import's fast JSON (kb.jsontext) reads what the json module reads, and its record digest
(kb.digest) tells unchanged from updated across the change of digest form."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select, update

from kb.digest import DIGEST_CHARS, DIGEST_PREFIX
from kb.jsontext import loads
from kb.knowledge import KnowledgeBase
from kb.models import RECORDS
from kb.records import COLUMNS, parse_record
from tests.conftest import corpus_records
from tests.test_import import write_jsonl


def same(a: Any, b: Any) -> bool:
    """Equal value for value and type for type (1 is not 1.0 or True; -0.0 is not 0.0; nan
    is nan)."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )
    if type(a) is list:
        return len(a) == len(b) and all(map(same, a, b))
    if type(a) is dict:
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


_texts = st.text(st.characters(codec=None, exclude_categories=()), max_size=12)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)  # past 64 bits both ways
    | st.floats(allow_nan=True, allow_infinity=True)
    | _texts
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_texts, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(value=_values, ascii_only=st.booleans())
def test_json_text_is_read_value_for_value_as_the_json_module_reads_it(
    value: Any, ascii_only: bool
) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)  # lone surrogates, NaN, 2**80 included
    assert same(loads(text), json.loads(text))


@pytest.mark.parametrize(
    "text",
    ['{"a": 1,', '{"a": "x\ty"}', '{"a": 01}', "[1] [2]", '{"a": nan}', "", '{"a": "\\ud800'],
)
def test_json_text_that_is_not_json_fails_as_the_json_module_fails(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as ours:
        loads(text)
    with pytest.raises(json.JSONDecodeError) as theirs:
        json.loads(text)
    assert (ours.value.msg, ours.value.pos) == (theirs.value.msg, theirs.value.pos)


def old_digest(record: dict[str, Any]) -> str:
    """The digest kb stored before the JSON form, computed here as it was: SHA-256 of the repr
    of (the column values in the table's order, the unknown fields, whether a stub)."""
    parsed = parse_record(record)
    parts = ([parsed.values[c] for c in COLUMNS], parsed.extra, False)
    return hashlib.sha256(repr(parts).encode("utf-8", "surrogatepass")).hexdigest()


def stored_hashes(db_url: str) -> dict[str, str]:
    with KnowledgeBase(db_url) as kb, kb.engine.connect() as conn:
        return dict(conn.execute(select(RECORDS.c.id, RECORDS.c.content_hash)).all())  # type: ignore[arg-type]


@pytest.mark.databases  # PostgreSQL too: the digest fits its VARCHAR(64)
def test_records_digested_the_old_way_are_unchanged_when_imported_again(
    db_url: str, tmp_path: Path
) -> None:
    records = corpus_records()[:12]
    records[0] = dict(records[0], extraInfo={"n": 2**70, "f": 0.1})  # unknown fields too
    path = write_jsonl(tmp_path / "in.jsonl", records)
    with KnowledgeBase(db_url) as kb:
        assert kb.import_sources([str(path)]).inserted == 12
    now = stored_hashes(db_url)
    assert all(h.startswith(DIGEST_PREFIX) and len(h) == DIGEST_CHARS for h in now.values())
    # a knowledge base kb filled before the digest changed: the old form in every row
    with KnowledgeBase(db_url) as kb, kb.engine.begin() as conn:
        for record in records:
            conn.execute(
                update(RECORDS)
                .where(RECORDS.c.id == record["id"])
                .values(content_hash=old_digest(record))
            )
    changed = [dict(r) for r in records]
    changed[5]["documentation"] = "Rewritten documentation."
    write_jsonl(path, changed)
    with KnowledgeBase(db_url) as kb:
        report = kb.import_sources([str(path)])
    assert (report.inserted, report.updated, report.unchanged) == (0, 1, 11)
    after = stored_hashes(db_url)
    rewritten = after[records[5]["id"]]  # the updated record, in the new form
    assert rewritten.startswith(DIGEST_PREFIX) and rewritten != now[records[5]["id"]]
    assert {i: h for i, h in after.items() if i != records[5]["id"]} == {
        r["id"]: old_digest(r) for r in records if r["id"] != records[5]["id"]
    }


def test_a_change_json_would_spell_alike_is_still_an_update(db_url: str, tmp_path: Path) -> None:
    """JSON's encoder writes NaN and Infinity as null: the digest must still see NaN become
    null, and an integer past 64 bits change in its last digit. (SQLite only: PostgreSQL's
    jsonb has no NaN.)"""
    base = corpus_records()[0]
    path = tmp_path / "in.jsonl"
    steps = [float("nan"), None, float("inf"), 2**70, 2**70 + 1, 2**70 + 1]
    seen = []
    for value in steps:
        path.write_text(json.dumps(dict(base, extraInfo=value)) + "\n", encoding="utf-8")
        with KnowledgeBase(db_url) as kb:
            report = kb.import_sources([str(path)])
        seen.append((report.inserted, report.updated, report.unchanged))
    assert seen == [(1, 0, 0), (0, 1, 0), (0, 1, 0), (0, 1, 0), (0, 1, 0), (0, 0, 1)]
