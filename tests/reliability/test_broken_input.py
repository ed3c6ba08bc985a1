"""Broken input gets a clear message and the documented exit code, never a traceback, and the
good records beside it are stored: random bytes, invalid UTF-8, a 1 MB line, an empty file, a
folder or FIFO where a file was expected, a gzip cut short, a gzip bomb, JSON nested 100,000
deep, a record with every field of the wrong type. (Issue 13; test_bad_records.py has the
values no database can hold, test_hostile_sources.py the misbehaving servers.)"""

from __future__ import annotations

import gzip
import json
import random
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import corpus_records


def stored(invoke: Any) -> int:
    return int(json.loads(invoke("stats", "--json").stdout)["records"])


def assert_clean(result: Any) -> None:
    assert "Traceback" not in result.output and "Traceback" not in result.stderr


def good_lines(n: int = 3) -> list[str]:
    return [json.dumps(r) for r in corpus_records(n)]


# ----------------------------------------------------------------------------- whole files


@pytest.mark.parametrize("gzipped", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("seed", range(4))
def test_random_bytes_are_refused_whole_with_exit_2(
    invoke: Any, tmp_path: Path, seed: int, gzipped: bool
) -> None:
    data = random.Random(seed).randbytes(4096)
    path = tmp_path / ("random.bin.gz" if gzipped else "random.bin")
    path.write_bytes(gzip.compress(data) if gzipped else data)
    result = invoke("import", str(path))
    assert_clean(result)
    assert result.exit_code == 2, result.stderr
    assert result.stderr.startswith(f"Error: {path}")
    assert stored(invoke) == 0


@pytest.mark.parametrize("content", [b"", b"\n\n  \n", gzip.compress(b"")], ids=["0", "ws", "gz"])
def test_an_empty_file_imports_nothing_and_says_so(
    invoke: Any, tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(content)
    result = invoke("import", str(path))
    assert_clean(result)
    assert result.exit_code == 0, result.stderr
    assert "0 records read from 1 file(s)" in result.stderr


def test_invalid_utf8_in_one_record_rejects_that_record_alone(invoke: Any, tmp_path: Path) -> None:
    first, second, third = (line.encode() for line in good_lines())
    broken = second.replace(b'"documentation": "', b'"documentation": "bad \xff\xfe bytes ', 1)
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join([first, broken, third]) + b"\n")
    result = invoke("import", str(path), "--json")
    assert_clean(result)
    assert result.exit_code == 1, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["inserted"], summary["rejected"]) == (2, 1)
    [error] = summary["errors"]
    assert (error["line"], error["field"]) == (2, "documentation")
    assert error["reason"].startswith("not valid UTF-8"), error


def test_a_file_that_starts_with_bytes_that_are_not_utf8_says_so(
    invoke: Any, tmp_path: Path
) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes("é".encode("latin-1") + b"{}")
    result = invoke("import", str(path))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: {path}:1: not UTF-8 text")


def test_a_one_megabyte_line_of_junk_is_rejected_alone(invoke: Any, tmp_path: Path) -> None:
    first, _, third = good_lines()
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join([first, "{" + "x" * (1 << 20), third]) + "\n")
    result = invoke("import", str(path), "--json")
    assert_clean(result)
    assert result.exit_code == 1
    summary = json.loads(result.stdout)
    assert (summary["inserted"], summary["rejected"]) == (2, 1)
    assert summary["errors"][0]["reason"].startswith("not valid JSON")


def test_a_one_megabyte_field_is_stored_and_shown_whole_in_json(
    invoke: Any, tmp_path: Path
) -> None:
    record = corpus_records(1)[0]
    record["documentation"] = "long " * (1 << 18)
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(record) + "\n")
    assert invoke("import", str(path)).exit_code == 0
    shown = invoke("show", record["id"], "--format", "json")
    assert json.loads(shown.stdout)["documentation"] == record["documentation"]


@pytest.mark.parametrize("layout", ["jsonl", "array", "whole file"])
def test_json_nested_100000_deep_is_rejected_alone(
    invoke: Any, tmp_path: Path, layout: str
) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    first, _, third = good_lines()
    path = tmp_path / "in.json"
    if layout == "jsonl":
        path.write_text("\n".join([first, deep, third]))
    elif layout == "array":
        path.write_text(f"[{first},\n{deep},\n{third}]")
    else:
        path.write_text(deep)
    result = invoke("import", str(path), "--json")
    assert_clean(result)
    if layout == "whole file":  # no record at all: the file is not one kb reads
        assert result.exit_code in (1, 2), result.stderr
        assert stored(invoke) == 0
        return
    assert result.exit_code == 1, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["inserted"], summary["rejected"]) == (2, 1)


def test_a_gzip_cut_short_is_refused_and_nothing_stored(invoke: Any, tmp_path: Path) -> None:
    data = gzip.compress(("\n".join(good_lines(40)) + "\n").encode())
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) * 2 // 3])
    result = invoke("import", str(path))
    assert_clean(result)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: {path}: cannot read")
    assert stored(invoke) == 0


@pytest.mark.parametrize("reader", ["isal", "gzip"])
def test_a_damaged_gzip_is_refused_by_name_and_nothing_stored(
    invoke: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str
) -> None:
    """Bytes flipped inside the deflate stream: one line naming the file, exit 2, nothing
    stored; read by ISA-L (a project dependency) or, where it is missing, by gzip."""
    import sys

    if reader == "gzip":
        for module in ("isal", "isal.igzip", "isal.isal_zlib"):
            monkeypatch.setitem(sys.modules, module, None)  # their import fails, as if missing
    data = gzip.compress(("\n".join(good_lines(40)) + "\n").encode())
    middle = len(data) // 2
    damaged = data[:middle] + bytes(b ^ 0x5A for b in data[middle : middle + 200])
    path = tmp_path / "damaged.jsonl.gz"
    path.write_bytes(damaged + data[middle + 200 :])
    result = invoke("import", str(path))
    assert_clean(result)
    assert result.exit_code == 2, result.stderr
    assert result.stderr.startswith(f"Error: {path}: not a valid gzip file ("), result.stderr
    assert result.stderr.count("\n") == 1
    assert stored(invoke) == 0


@pytest.mark.parametrize("filler", [b"\0", b" ", b"["], ids=["zeros", "spaces", "brackets"])
def test_a_gzip_bomb_is_refused_quickly(invoke: Any, tmp_path: Path, filler: bytes) -> None:
    """A 1 GB expansion in a 1 MB file: refused within seconds, reading a bounded part."""
    member = gzip.compress(filler * (1 << 20), compresslevel=9)  # 1 MB in about 1 KB
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(member * 1024)  # gzip members, one after another: read as one stream
    started = time.monotonic()
    result = invoke("import", str(path))
    elapsed = time.monotonic() - started
    assert_clean(result)
    assert result.exit_code == 2, result.stderr
    assert stored(invoke) == 0
    assert elapsed < 10, f"{elapsed:.1f} s"  # about a second of work; a loaded machine


def test_a_folder_where_a_file_was_expected_is_an_input_error(invoke: Any, tmp_path: Path) -> None:
    folder = tmp_path / "logs.log"
    folder.mkdir()
    result = invoke("match", str(folder))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: {folder}: cannot read")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "r.jsonl").mkdir()  # a folder named like a data file, inside a walk
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"files": [{"path": "data/r.jsonl"}]}))
    result = invoke("import", str(manifest))
    assert_clean(result)
    assert result.exit_code == 2
    assert "data/r.jsonl" in result.stderr


# ----------------------------------------------------------------------------- wrong types

WRONG_VALUES: list[Any] = [{"an": "object"}, ["a", "list"], 1.5, True, "text", 7, None]


def wrong_for(key: str, good: Any) -> list[Any]:
    """Values of another JSON type than the good one."""
    kinds = {bool: "bool", int: "int", float: "float", str: "str", list: "list", dict: "dict"}
    if good is None:  # a nullable text or number: no object, list, fraction or boolean is one
        return [{"an": "object"}, ["a", "list"], 1.5, True]
    kind = kinds[type(good)]
    return [v for v in WRONG_VALUES if kinds.get(type(v), "null") != kind]


FIELDS = sorted(corpus_records(1)[0])


@pytest.mark.parametrize("key", FIELDS)
def test_every_field_of_the_wrong_type_rejects_its_record_naming_the_field(
    invoke: Any, tmp_path: Path, key: str
) -> None:
    first, second, third = corpus_records(3)
    lines = [json.dumps(first)]
    expected_rejected = []
    for value in wrong_for(key, second.get(key)):
        candidate = {**second, key: value}
        lines.append(json.dumps(candidate))
        expected_rejected.append(len(lines))
    lines.append(json.dumps(third))
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = invoke("import", str(path), "--json")
    assert_clean(result)
    summary = json.loads(result.stdout)
    accepted = [e for e in expected_rejected if e not in {x["line"] for x in summary["errors"]}]
    # Nullable fields take null; that is the only wrong-looking value a record may have.
    for line in accepted:
        assert json.loads(lines[line - 1])[key] is None, (key, lines[line - 1][:200])
    for error in summary["errors"]:
        assert error["field"].split("[")[0].split(".")[0] in (key, "record"), error
    assert summary["inserted"] >= 2
