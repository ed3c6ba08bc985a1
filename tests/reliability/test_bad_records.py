"""One bad record never loses the file: values JSON allows but kb cannot store (a lone
surrogate, an integer past 64 bits or past Python's 4,300 digits, nesting a thousand deep)
are rejected one record at a time, with a clear reason, and the good records beside them are
stored; nothing stored can later break `match`, `show` or `export`. (Issue 13, defect 6.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import corpus_records

pytestmark = pytest.mark.databases  # each test on SQLite and on PostgreSQL


def good_records() -> list[dict[str, Any]]:
    return corpus_records(3)


BAD_VALUES: dict[str, tuple[str, str, str]] = {
    # name: (raw JSON replacing one field's value, the field, the reason's start)
    "lone surrogate in a text": ('"bad \\ud800 text"', "documentation", "not valid Unicode"),
    "lone surrogate in a list": ('["ok", "\\udfff"]', "solutions[1]", "not valid Unicode"),
    "lone surrogate in an unknown field": ('{"x": "\\ud800"}', "note.x", "not valid Unicode"),
    "integer of 2^63": ("9223372036854775808", "lineNumber", "must be at most"),
    "integer past 4300 digits": ("1" * 5000, "lineNumber", "not valid JSON"),
    "nested 1,000 deep": ("[" * 1000 + "]" * 1000, "documentation", "not valid JSON"),
}


def raw_with(record: dict[str, Any], field: str, raw: str) -> str:
    """The record as JSON text with one field's value replaced by raw JSON."""
    marker = "__RAW_VALUE__"
    return json.dumps({**record, field: marker}).replace(f'"{marker}"', raw)


@pytest.mark.parametrize("case", sorted(BAD_VALUES))
@pytest.mark.parametrize("layout", ["jsonl", "array"])
def test_a_record_with_a_value_kb_cannot_store_is_rejected_alone(
    invoke: Any, tmp_path: Path, case: str, layout: str
) -> None:
    raw, field, reason = BAD_VALUES[case]
    first, second, third = good_records()
    stored_field = field.split("[")[0].split(".")[0]
    bad = raw_with(second, stored_field, raw)
    texts = [json.dumps(first), bad, json.dumps(third)]
    path = tmp_path / f"in.{'jsonl' if layout == 'jsonl' else 'json'}"
    path.write_text("\n".join(texts) if layout == "jsonl" else "[" + ",\n".join(texts) + "]")
    result = invoke("import", str(path), "--json")
    assert result.exit_code == 1, result.output
    summary = json.loads(result.stdout)
    assert (summary["inserted"], summary["rejected"]) == (2, 1)
    [error] = summary["errors"]
    assert error["line"] == (2 if layout == "jsonl" else 1)
    assert error["reason"].startswith(reason), error
    if not error["reason"].startswith("not valid JSON"):
        assert error["field"] == field
    # What was stored can be matched, shown and exported.
    assert invoke("export").exit_code == 0
    assert invoke("show", first["id"], "--format", "json").exit_code == 0
    assert invoke("match", "-", input="nothing to see\n").exit_code == 1


def test_a_huge_integer_in_a_repository_row_is_rejected_alone(invoke: Any, tmp_path: Path) -> None:
    rows = [
        {
            "repo": f"o/r{i}",
            "description": None,
            "language": None,
            "stars": 2**70 if i == 1 else 5,
            "defaultBranch": "main",
            "analyzedSha": "x",
            "analyzedAt": "2026-11-29T20:00:00Z",
            "errorCount": 0,
        }
        for i in range(3)
    ]
    path = tmp_path / "repos.json"
    path.write_text(json.dumps(rows))
    summary = json.loads(invoke("import", str(path), "--json").stdout)
    assert summary["repositories"] == 2
    assert summary["errors"][0]["field"] == "stars"


def test_a_repeated_id_in_one_import_is_a_warning_not_an_update(
    invoke: Any, tmp_path: Path
) -> None:
    first, second, _ = good_records()
    changed = {**first, "documentation": "a second copy"}
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in (first, second, changed)))
    result = invoke("import", str(path), "--json")
    assert result.exit_code == 0
    summary = json.loads(result.stdout)
    assert (summary["inserted"], summary["updated"], summary["unchanged"]) == (2, 0, 0)
    assert (
        f"warning: {path}:3: id {first['id']}: appears again in this import "
        f"(first at {path}:1); the later copy is kept" in result.stderr
    )
    assert (
        json.loads(invoke("show", first["id"], "--format", "json").stdout)["documentation"]
        == "a second copy"
    )


class Trickle:
    """A text stream that hands out a few characters at a time, whatever is asked for: every
    chunk boundary of the reader is tried."""

    def __init__(self, text: str, step: int) -> None:
        self.text, self.step, self.at = text, step, 0

    def read(self, size: int = -1, /) -> str:
        chunk = self.text[self.at : self.at + self.step]
        self.at += len(chunk)
        return chunk


@pytest.mark.parametrize("step", [1, 2, 3, 5, 8, 64])
def test_a_refused_value_is_skipped_exactly_across_chunk_boundaries(step: int) -> None:
    from kb.ingest.reading import ArrayElement, JsonStream, Unparsable

    deep = '{"s": "a ] } \\" [ {", "d": ' + "[" * 1200 + '"x\\\\"' + "]" * 1200 + "}"
    text = '[{"a": 1},\n' + deep + ",\n" + "9" * 5000 + ',\n{"b": "]\\n"}\n]'
    events = list(JsonStream(Trickle(text, step), "t.json").events())
    assert [type(e) for e in events] == [ArrayElement] * 4
    values = [e.value for e in events]  # type: ignore[union-attr]
    assert values[0] == {"a": 1} and values[3] == {"b": "]\n"}
    assert isinstance(values[1], Unparsable) and "nested too deep" in values[1].reason
    assert isinstance(values[2], Unparsable) and "4,300 digits" in values[2].reason
