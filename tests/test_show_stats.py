"""`kb show` and `kb stats`: the whole record for a person, a ticket or a program."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RECORDS40, SEED, seed_record
from tests.test_import import write_jsonl

pytestmark = pytest.mark.databases  # each test on SQLite and on PostgreSQL


def test_show_text_has_every_part_of_the_record(invoke: Any) -> None:
    invoke("import", str(SEED))
    result = invoke("show", "46a1fcb95e0d367e")
    assert result.exit_code == 0
    out = result.stdout
    record = seed_record()
    assert out.startswith("Unknown KV cache group kind '{kind}' in backend_per_kind.")
    for expected in [
        "ValueError · vllm-project/vllm · validation · error",
        "Raised at vllm/config/attention.py:169",
        record["githubUrl"],
        "What it means",
        "When it happens",
        "Common situations",
        "Solutions\n  1. Use one of the valid kinds",
        "  3. Ensure backend values",
        "Example fix\n    # before\n    CompilationConfig(backend_per_kind={'full': 'FLASHATTN'})",
        "Prevention tips\n  - Derive kind names",
        "Tags: configuration, attention-backend, kv-cache, vllm",
    ]:
        assert expected in out, expected
    assert "\x1b" not in out  # NO_COLOR is set by the test fixture


def test_show_json_is_the_record_in_dataset_keys(invoke: Any) -> None:
    invoke("import", str(SEED))
    result = invoke("show", "46a1fcb95e0d367e", "--format", "json")
    assert json.loads(result.stdout) == seed_record()


def test_show_markdown_is_ready_for_a_ticket(invoke: Any) -> None:
    invoke("import", str(SEED))
    out = invoke("show", "46a1fcb95e0d367e", "--format", "markdown").stdout
    assert out.startswith("## ValueError: Unknown KV cache group kind '\\{kind\\}'")
    assert "**Raised at:** [vllm/config/attention.py:169](<https://github.com/" in out
    assert "### Solutions\n\n1. Use one of the valid kinds" in out
    assert "### Example fix\n\n```\n# before\n" in out


def test_show_by_slug_repo_slug_and_code(invoke: Any, tmp_path: Path) -> None:
    record = seed_record()
    other = dict(record, id="0123456789abcdef", repo="someone/fork", errorCode="E_KIND")
    write_jsonl(tmp_path / "in.jsonl", [record, other])
    invoke("import", str(tmp_path / "in.jsonl"))
    ambiguous = invoke("show", record["slug"])
    assert ambiguous.exit_code == 2
    assert f"Error: '{record['slug']}' names 2 records" in ambiguous.stderr
    assert f"  0123456789abcdef  someone/fork/{record['slug']}" in ambiguous.stderr
    one = invoke("show", f"someone/fork/{record['slug']}", "--format", "json")
    assert json.loads(one.stdout)["id"] == "0123456789abcdef"
    by_code = invoke("show", "E_KIND", "--format", "json")
    assert json.loads(by_code.stdout)["repo"] == "someone/fork"


def test_show_unknown_id_exits_1_with_a_next_step(invoke: Any) -> None:
    invoke("import", str(SEED))
    result = invoke("show", "ffffffffffffffff")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "Error: no record has the id, slug or code 'ffffffffffffffff'",
        "Try `kb search` with words from the message.",
    ]


def test_terminal_control_sequences_from_the_dataset_never_reach_the_output(
    invoke: Any, tmp_path: Path, database: str
) -> None:
    # PostgreSQL cannot store a NUL (the importer rejects that record there: test_import)
    nul = "\x00" if database == "sqlite" else "\x01"
    hostile = dict(
        seed_record(),
        errorMessage="boom \x1b]0;pwned\x07\x1b[2J\x1b[31mred\x9b1m",
        documentation=f"line{nul} one\x1b[A\x08\x7f",
        solutions=["\x1b[6nreport"],
        exampleFix="x = 1\x1b[0m\r\ny = 2",
    )
    write_jsonl(tmp_path / "in.jsonl", [hostile])
    invoke("import", str(tmp_path / "in.jsonl"))
    for fmt in ("text", "markdown"):
        out = invoke("show", hostile["id"], "--format", fmt).stdout
        assert not any(ch in out for ch in "\x1b\x07\x00\x01\x08\x7f\x9b\r"), fmt
        assert "boom red" in out and "pwned" not in out
    raw = invoke("show", hostile["id"], "--format", "json").stdout
    assert "\x1b" not in raw and json.loads(raw)["errorMessage"] == hostile["errorMessage"]


def test_stats_json_counts_by_repo_type_severity_and_imports(invoke: Any) -> None:
    invoke("import", str(RECORDS40))
    invoke("import", str(SEED))
    figures = json.loads(invoke("stats", "--json").stdout)
    assert figures["records"] == 41
    assert sum(figures["by_repo"].values()) == 41
    assert figures["by_repo"]["vllm-project/vllm"] >= 1
    assert sum(figures["by_type"].values()) == sum(figures["by_severity"].values()) == 41
    assert figures["imports"] == 2
    assert figures["last_imports"][0]["inserted"] == 1
    text = invoke("stats").stdout
    assert text.startswith("Records  41 in ")


def test_db_current_on_a_missing_file_says_so_and_creates_nothing(
    invoke: Any, tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere" / "kb.sqlite3"
    result = invoke("db", "current", db=missing)
    assert result.exit_code == 3
    assert f"Error: no database at {missing}" in result.stderr
    assert not missing.parent.exists()


def test_show_suggests_what_a_near_miss_or_a_beginning_may_mean(invoke: Any) -> None:
    invoke("import", str(RECORDS40))
    record = seed_record()
    invoke("import", str(SEED))
    slug = record["slug"]  # unknown-kv-cache-group-kind-kind-in-backend-pe
    for key in (slug[:20], slug.replace("cache", "cahce")):
        result = invoke("show", key)
        assert result.exit_code == 1
        lines = result.stderr.splitlines()
        assert lines[:2] == [
            f"Error: no record has the id, slug or code {key!r}",
            "Did you mean:",
        ]
        assert lines[2].startswith(f"  {record['id']}  {record['repo']}/{slug}  ")
        assert "vllm/config/attention.py:169" in lines[2]
    # A unique beginning of an id is that record, as in git.
    shown = invoke("show", record["id"][:8], "--format", "json")
    assert json.loads(shown.stdout)["id"] == record["id"]


def test_an_ambiguous_slug_in_one_repository_lists_what_tells_the_records_apart(
    invoke: Any, tmp_path: Path
) -> None:
    record = seed_record()
    twin = dict(
        record,
        id="0123456789abcdef",
        filePath="vllm/config/compile.py",
        lineNumber=88,
        sourceCodeStart=80,
        sourceCodeEnd=96,
    )
    write_jsonl(tmp_path / "in.jsonl", [record, twin])
    invoke("import", str(tmp_path / "in.jsonl"))
    result = invoke("show", f"{record['repo']}/{record['slug']}")
    assert result.exit_code == 2
    assert "  0123456789abcdef  vllm-project/vllm/" in result.stderr
    assert "vllm/config/compile.py:88 Unknown KV cache group kind" in result.stderr
    assert "vllm/config/attention.py:169 Unknown KV cache group kind" in result.stderr
    assert result.stderr.rstrip().endswith("Use the id to pick one.")
