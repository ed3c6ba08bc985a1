"""Properties over generated input (hypothesis), bounded so CI runs them in seconds: any valid
record imported and then exported comes back unchanged; any bytes at all, as an import file,
end in a documented exit code and never a traceback; the streaming JSON reader, fed a
little at a time, reads exactly what `json` reads and fails only with InputError. (Issue 13.)"""

from __future__ import annotations

import contextlib
import gzip
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# Bounded: a fixed number of examples, no example database written into the checkout.
BOUNDED = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
FUZZ = settings(BOUNDED, max_examples=200)

# Any text a record may hold: every character but the lone surrogates (rejected on purpose,
# test_bad_records.py), controls, NUL, bidi and astral characters included.
TEXT = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=40)
SLUG = st.from_regex(r"\A[a-z0-9](?:[a-z0-9-]{0,10}[a-z0-9])?\Z")
TAG = st.from_regex(r"\A[a-z][a-z0-9]{0,5}(-[a-z0-9]{1,5}){0,2}\Z")
NAME = st.from_regex(r"\A[A-Za-z0-9_.-]{1,12}\Z").filter(lambda s: s not in (".", ".."))
LINE = st.none() | st.integers(1, 2**31 - 1)
JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(st.characters(exclude_categories=("Cs",)), max_size=8), inner)
    ),
    max_leaves=12,
)
RESERVED = {"record", "errors", "files", "datasetVersion"}  # what makes a value not a record


@st.composite
def records(draw: Any) -> dict[str, Any]:
    """A record upstream's schema (and kb's leniencies) accept, unknown fields included."""
    start = draw(LINE)
    line = draw(LINE if start is None else st.integers(start, 2**31 - 1))
    end = draw(LINE if start is None else st.integers(start, 2**31 - 1))
    record = {
        "repo": f"{draw(NAME)}/{draw(NAME)}",
        "slug": draw(SLUG),
        "errorCode": draw(st.none() | TEXT),
        "errorMessage": draw(TEXT),
        "messagePattern": draw(TEXT),
        "errorType": draw(
            st.sampled_from(["exception", "error_code", "console", "http", "validation", "panic"])
        ),
        "errorClass": draw(st.none() | TEXT),
        "httpStatus": draw(st.none() | st.integers(100, 599)),
        "severity": draw(st.sampled_from(["critical", "error", "warning", "info"])),
        "filePath": draw(TEXT),
        "lineNumber": line,
        "sourceCode": draw(st.none() | st.lists(TEXT, max_size=5).map("\n".join)),
        "sourceCodeStart": start,
        "sourceCodeEnd": end,
        "githubUrl": "https://github.com/" + draw(st.from_regex(r"\A[a-z0-9/#.-]{0,30}\Z")),
        "documentation": draw(TEXT),
        "triggerScenarios": draw(TEXT),
        "commonSituations": draw(TEXT),
        "solutions": draw(st.lists(TEXT, max_size=4)),
        "exampleFix": draw(st.none() | st.text(max_size=40).filter(_no_surrogate)),
        "handlingStrategy": draw(
            st.none()
            | st.sampled_from(["try-catch", "type-guard", "validation", "retry", "fallback"])
        ),
        "validationCode": draw(st.none() | TEXT),
        "typeGuard": draw(st.none() | TEXT),
        "tryCatchPattern": draw(st.none() | TEXT),
        "preventionTips": draw(st.lists(TEXT, max_size=3)),
        "tags": draw(st.lists(TAG, max_size=4)),
        "backgroundTag": draw(st.none() | TAG),
        "analyzedSha": draw(TEXT),
        "analyzedAt": draw(
            st.from_regex(
                r"\A20[0-9]{2}-(0[1-9]|1[0-2])-([01][1-9]|2[0-8])T[01][0-9]:[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?Z\Z"
            )
        ),
        "schemaVersion": 2,
    }
    unknown = draw(
        st.dictionaries(
            st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=10).filter(
                lambda key: key not in record and key not in RESERVED and key != "id"
            ),
            JSON_VALUES,
            max_size=3,
        )
    )
    return {**record, **unknown}


def _no_surrogate(text: str) -> bool:
    return not any("\ud800" <= c <= "\udfff" for c in text)


def test_any_valid_record_imported_then_exported_is_unchanged(tmp_path: Path) -> None:
    from kb import KnowledgeBase

    ids = itertools.count(1)
    with KnowledgeBase(str(tmp_path / "kb.sqlite3")) as kb:

        @settings(BOUNDED, max_examples=40)
        @given(st.lists(records(), min_size=1, max_size=3))
        def round_trip(batch: list[dict[str, Any]]) -> None:
            batch = [{"id": f"{next(ids):016x}", **record} for record in batch]
            path = tmp_path / "batch.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in batch), encoding="utf-8")
            report = kb.import_sources([str(path)])
            assert report.errors == [], report.errors
            stored = kb.get_many([r["id"] for r in batch])
            exported = {r["id"]: r for r in map(json.loads, _exported(kb))}
            for record in batch:
                assert stored[record["id"]] == record
                assert exported[record["id"]] == record

        round_trip()


# Texts near a lone surrogate's spellings: the surrogates themselves, a typed backslash and
# "u", "d", hex digits; with any other character now and then (joined from a list: st.text
# leaves the surrogates out, whatever its alphabet).
SURROGATE_TEXT = st.lists(
    st.sampled_from(["\\", "u", "d", "8", "f", "c", "\ud800", "\udbff", "\udc80", "\udfff"])
    | st.characters(),
    max_size=12,
).map("".join)


@FUZZ
@given(
    st.sampled_from(["documentation", "solutions", "tags-free note", "unknown key"]),
    SURROGATE_TEXT,
    st.data(),
)
def test_a_record_is_refused_exactly_when_a_text_in_it_holds_a_lone_surrogate(
    place: str, text: str, data: Any
) -> None:
    """Whatever the text and wherever it is, the quick check (the content hash's payload) and
    the walk over every value agree: refused iff a lone surrogate is in it, and the field
    named is where it is."""
    from kb.records import FieldError, parse_record

    record = data.draw(records())
    record["id"] = "0123456789abcdef"
    record["documentation"] = "ok"
    if place == "documentation":
        record["documentation"] = "ok " + text
        field = "documentation"
    elif place == "solutions":
        record["solutions"] = ["ok", "fix " + text]
        field = "solutions[1]"
    elif place == "tags-free note":
        record["note"] = {"deep": [text]}
        field = "note.deep[0]"
    else:
        record["k" + text] = 1
        field = "k" + text
    try:
        parse_record(record)
    except FieldError as exc:
        assert not _no_surrogate(text), (exc.field, exc.reason)
        assert exc.field == field
        assert "lone surrogate" in exc.reason
    else:
        assert _no_surrogate(text)


def _exported(kb: Any) -> list[str]:
    import io

    out = io.StringIO()
    kb.export(out)
    return out.getvalue().splitlines()


def _run_import(invoke: Any, path: Path) -> None:
    result = invoke("import", str(path), "--json")
    assert result.exit_code in (0, 1, 2), result.stderr
    assert "Traceback" not in result.stderr
    if result.exit_code != 2:
        json.loads(result.stdout)  # the summary is whole JSON


@FUZZ
@given(st.binary(max_size=2048), st.booleans())
def test_any_bytes_as_an_import_file_end_in_a_documented_exit_code(
    invoke: Any, tmp_path: Path, data: bytes, gzipped: bool
) -> None:
    path = tmp_path / "fuzz.json"
    path.write_bytes(gzip.compress(data) if gzipped else data)
    _run_import(invoke, path)


JSONISH = st.text(alphabet='[]{}",:\\ \n\t0123456789.eE+-truefalsn\u00e9\ud83d', max_size=200)


@FUZZ
@given(JSONISH)
def test_any_json_like_text_as_an_import_file_ends_in_a_documented_exit_code(
    invoke: Any, tmp_path: Path, text: str
) -> None:
    path = tmp_path / "fuzz.json"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    _run_import(invoke, path)


@settings(FUZZ, max_examples=100)
@given(st.data())
def test_a_valid_file_with_a_few_bytes_changed_ends_in_a_documented_exit_code(
    invoke: Any, tmp_path: Path, data: Any
) -> None:
    from tests.conftest import RECORDS40

    original = bytearray(RECORDS40.read_bytes()[:6000])
    if data.draw(st.booleans()):  # the array layout too
        lines = [json.loads(line) for line in original.decode().splitlines()[:-1]]
        original = bytearray(json.dumps(lines).encode())
    for _ in range(data.draw(st.integers(1, 8))):
        at = data.draw(st.integers(0, len(original) - 1))
        original[at] = data.draw(st.sampled_from(b'[]{}",:\\\x00\xff0 \n'))
    cut = data.draw(st.integers(1, len(original)))
    path = tmp_path / "mutated.json"
    path.write_bytes(bytes(original[:cut]))
    _run_import(invoke, path)


class Trickle:
    """Text handed out `step` characters at a time, whatever is asked for."""

    def __init__(self, text: str, step: int) -> None:
        self.text, self.step, self.at = text, step, 0

    def read(self, size: int = -1, /) -> str:
        chunk = self.text[self.at : self.at + self.step]
        self.at += len(chunk)
        return chunk


@settings(FUZZ, max_examples=100)
@given(st.lists(st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=4)), st.integers(1, 9))
def test_the_streaming_reader_reads_what_json_reads_at_every_chunk_boundary(
    elements: list[dict[str, Any]], step: int
) -> None:
    from kb.ingest.reading import ArrayElement, JsonStream

    text = json.dumps(elements, indent=step % 3 or None)
    events = list(JsonStream(Trickle(text, step), "t.json").events())
    assert all(isinstance(e, ArrayElement) for e in events)
    assert [e.value for e in events] == json.loads(text)  # type: ignore[union-attr]


@FUZZ
@given(JSONISH.filter(_no_surrogate), st.integers(1, 9))
def test_the_streaming_reader_fails_only_with_input_error(text: str, step: int) -> None:
    from kb.errors import InputError
    from kb.ingest.reading import JsonStream

    with contextlib.suppress(InputError):
        list(JsonStream(Trickle(text, step), "t.json").events())


# ---- the matcher and the log reader --------------------------------------------------------

WORD = st.from_regex(r"\A[a-z]{1,10}\Z")
# Values a placeholder takes: identifiers, numbers, paths.
VALUE = st.from_regex(r"\A[A-Za-z0-9_./-]{1,16}\Z")
NOISE_LINE = st.builds(
    "2026-03-14T08:00:{:02d}Z INFO  [{}] {}".format,
    st.integers(0, 59),
    WORD,
    st.lists(WORD, max_size=12).map(" ".join),
)


def _render(record: dict[str, Any], values: list[str]) -> str:
    """The record's message with `values` in its placeholders, after its class."""
    from kb.patterns import message_pieces

    pieces = message_pieces(record["errorMessage"])
    free = iter(values * len(pieces))
    message = "".join(next(free) if piece is None else piece for piece in pieces)
    return f"{record['errorClass']}: {message}" if record.get("errorClass") else message


def _found_at(report: Any, record_id: str, line: int) -> bool:
    return any(m.line == line and record_id in (m.id, *m.duplicates) for m in report.matches)


@pytest.fixture(scope="module")
def matcher_fixture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, list[dict[str, Any]]]:
    """The matcher fixture's records indexed, and those whose message, rendered with plain
    values and alone in a log, is found: the ones a noisy log must not lose."""
    from kb.matcher import build_index, sources_from_records
    from tests.conftest import FIXTURES

    with open(FIXTURES / "matcher" / "records.jsonl", encoding="utf-8") as fh:
        fixture = [json.loads(line) for line in fh]
    index = build_index(sources_from_records(fixture), tmp_path_factory.mktemp("c"), "props")
    found = [
        r
        for r in fixture
        if "\n" not in r["errorMessage"]
        and _found_at(index.match(_render(r, ["value_1"]) + "\n"), r["id"], 1)
    ]
    assert len(found) >= 15, [r["id"] for r in found]
    return index, found


@settings(BOUNDED, max_examples=40)
@given(data=st.data())
def test_a_rendered_message_in_random_noise_is_found_on_its_line(
    matcher_fixture: tuple[Any, list[dict[str, Any]]], data: Any
) -> None:
    index, found = matcher_fixture
    record = data.draw(st.sampled_from(found))
    values = data.draw(st.lists(VALUE, min_size=1, max_size=3))
    before = data.draw(st.lists(NOISE_LINE, max_size=30))
    after = data.draw(st.lists(NOISE_LINE, max_size=30))
    log = "\n".join([*before, _render(record, values), *after]) + "\n"
    report = index.match(log)
    assert _found_at(report, record["id"], len(before) + 1), (
        [(m.line, m.id) for m in report.matches],
        log,
    )


# Any text at all, and text made of the pieces logs are made of (prefixes, frames, escapes,
# line endings, JSON, quotes), so the reader's branches are all reached.
LOG_PIECES = st.sampled_from(
    [
        "\n",
        "\r\n",
        "\r",
        "\x1b[31m",
        "\x1b[0m",
        "\\u001b[91m",
        "\ufeff",
        "2026-03-14T08:00:00.000Z ERROR ",
        "api-1  | ",
        "E   ",
        "  ",
        "\t",
        "Traceback (most recent call last):\n",
        '  File "/srv/app/mod.py", line 12, in run\n',
        "    at Object.<anonymous> (/app/index.js:10:5)\n",
        "ValueError: ",
        "KeyError: \"'x'\"",
        "raised ValueError('bad')",
        '{"level": "error", "message": "ValueError: bad\\n  more"}',
        "...",
        "…",
        "x" * 80,
        "│",
        "'",
        '"',
        "\\",
    ]
)
LOG_TEXT = st.text(max_size=300) | st.lists(LOG_PIECES | st.text(max_size=8), max_size=40).map(
    "".join
)


@FUZZ
@given(LOG_TEXT, st.integers(1, 64), st.booleans())
def test_the_log_reader_never_raises_and_numbers_lines_in_order(
    text: str, block_bytes: int, as_bytes: bool
) -> None:
    from kb import logline, logtext

    source: str | bytes = text.encode("utf-8", "surrogatepass") if as_bytes else text
    numbers: list[tuple[int, int]] = []
    for block in logtext.blocks(source, block_bytes=block_bytes):
        for i, line in enumerate(block.lines):
            numbers.append((block.line_no(i), block.end_line_no(i)))
            logline.strip_prefix(line)
            logline.level_of(line)
            logline.exception_of(line)
            logline.raised_line(line)
            logline.repr_exception(line)
            logline.parse_frame(line)
            logline.cut_message(line)
            logline.unrepr_message(line)
    assert all(first <= last for first, last in numbers)
    assert [first for first, _ in numbers] == sorted(first for first, _ in numbers)
    assert all(last <= text.count("\n") + text.count("\r") + 1 for _, last in numbers)


REGEX_PIECES = st.sampled_from(
    [
        "(.+?)",
        "(.*)",
        "(?<name>\\w+)",
        "\\k<name>",
        "(?=x)",
        "(?!x)",
        "(?<=x)",
        "[a-z]",
        "[^\\]]",
        "\\d+",
        "\\u{1F600}",
        "\\u00e9",
        "\\/",
        "\\",
        "(",
        ")",
        "[",
        "]",
        "{2,}",
        "+",
        "*",
        "?",
        "|",
        "^",
        "$",
        ".",
        "\\.",
        "\\n",
        "Error: ",
        " is not supported",
        "{x}",
    ]
)
REGEX_TEXT = st.text(max_size=60) | st.lists(REGEX_PIECES | st.text(max_size=6), max_size=20).map(
    "".join
)


@FUZZ
@given(REGEX_TEXT, REGEX_TEXT)
def test_the_pattern_translator_never_raises(message_pattern: str, error_message: str) -> None:
    """`prepare` takes any pattern (an invalid one falls back to the message, with a warning)
    and what it gives runs in RE2 or is marked invalid."""
    from kb import patterns
    from kb.regex import compile_re2
    from kb.relax import relax

    prepared = patterns.prepare(message_pattern, error_message)
    assert prepared.engine in ("re2", "guarded", "invalid")
    assert (prepared.regex is None) == (prepared.engine == "invalid" and not prepared.keys)
    if prepared.engine == "re2" and prepared.regex is not None:
        compile_re2(prepared.regex)  # what is marked re2 compiles in RE2
    patterns.translate_js(message_pattern)
    if prepared.regex is not None:
        relax(prepared.regex)
        patterns.backtracking_unbounded(prepared.regex)
