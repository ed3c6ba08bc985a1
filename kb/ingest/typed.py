"""A full record's JSON line decoded and validated in one pass, in C.

Most lines of a dataset are one schemaVersion 2 record with upstream's fields and valid
values, flat or wrapped as {"record": ..., "datasetVersion": ...}. msgspec decodes such a
line straight into a typed value whose types, ranges, choices and patterns are the schema's
(kb.records.FIELDS), so no dict of the line is made and only the rules no type states are
checked in Python (kb.records.beyond_types), with the patterns of the tags and repositories,
which repeat, checked once a distinct value. At 150,000 records of the shared corpus,
2026-12-05: 1.25-1.29 s to decode and check, against 0.90-0.96 s to decode into dicts and
1.33 s more for kb.records' own checks of them.

Anything else is read as before (kb.jsontext, then kb.records.parse_record, which names a
bad field exactly): another shape (a compact index row, a repository), an unknown field, a
missing one, a bad value, text only the `json` module reads. So a line's record, and every
rejection's wording, are the same either way; tests/test_typed_records.py holds the two
paths to that.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import Meta

from kb.records import (
    FIELDS,
    ID_RE,
    MAX_INTEGER,
    REPO_RE,
    SLUG_RE,
    TAG_RE,
    FieldError,
    Record,
    beyond_types,
    full_record,
)


def _whole(pattern: re.Pattern[str]) -> str:
    """`pattern` as msgspec applies it (re.search) to match the whole text, as fullmatch does:
    \\Z, not $, which also matches before a final newline."""
    return rf"\A(?:{pattern.pattern})\Z"


_TEXT = Annotated[str, Meta(min_length=1)]
_LINE = Annotated[int, Meta(ge=1, le=MAX_INTEGER)] | None
_TAG = Annotated[str, Meta(pattern=_whole(TAG_RE))]

# Each column's type: kb.records.FIELDS' checks, stated as types (the tests hold each to its
# check). Literal choices are kb.records' ERROR_TYPES, SEVERITIES and HANDLING_STRATEGIES.
TYPES: Final[dict[str, Any]] = {
    "id": Annotated[str, Meta(pattern=_whole(ID_RE))],
    "repo": str,  # owner/name (REPO_RE): _all_known, once per distinct repository
    "slug": Annotated[str, Meta(pattern=_whole(SLUG_RE))],
    "error_code": _TEXT | None,
    "error_message": _TEXT,
    "message_pattern": _TEXT,
    "error_type": Literal["exception", "error_code", "console", "http", "validation", "panic"],
    "error_class": _TEXT | None,
    "http_status": Annotated[int, Meta(ge=100, le=599)] | None,
    "severity": Literal["critical", "error", "warning", "info"],
    "file_path": _TEXT,
    "line_number": _LINE,
    "source_code": str | None,  # its length in lines: beyond_types
    "source_code_start": _LINE,
    "source_code_end": _LINE,
    "github_url": str,  # a link: beyond_types
    "documentation": _TEXT,
    "trigger_scenarios": _TEXT,
    "common_situations": _TEXT,
    "solutions": list[_TEXT],
    "example_fix": str | None,
    "handling_strategy": Literal["try-catch", "type-guard", "validation", "retry", "fallback"]
    | None,
    "validation_code": str | None,
    "type_guard": str | None,
    "try_catch_pattern": str | None,
    "prevention_tips": list[_TEXT],
    "tags": list[str],  # each a tag (TAG_RE): _all_known, once per distinct tag
    "background_tag": _TAG | None,
    "analyzed_sha": _TEXT,
    "analyzed_at": str,  # a timestamp: beyond_types
    "schema_version": Literal[2],  # SCHEMA_VERSION
}
# The required fields first, then the optional ones (absent: None), as kb.records' own fast
# path orders a record's values.
_SPECS: Final = (*(s for s in FIELDS if s.required), *(s for s in FIELDS if not s.required))
ORDER: Final = tuple(spec.column for spec in _SPECS)
_FullRecord: Final[Any] = msgspec.defstruct(
    "FullRecord",
    [
        (spec.column, TYPES[spec.column])
        if spec.required
        else (spec.column, TYPES[spec.column], None)
        for spec in _SPECS
    ],
    rename={spec.column: spec.key for spec in FIELDS},
    forbid_unknown_fields=True,
)
# A record as kb's bundled data and ErrLookup's single-record files wrap it; as in
# kb.ingest.importer, a datasetVersion that is not text is no version.
_Wrapped: Final[Any] = msgspec.defstruct(
    "WrappedRecord",
    [("record", _FullRecord), ("datasetVersion", Any, None)],
    forbid_unknown_fields=True,
)
_astuple: Final = msgspec.structs.astuple
# Whatever the line is not: malformed or not UTF-8 JSON, another shape, a bad value, nesting
# past msgspec's depth.
_NOT_FULL: Final = (msgspec.MsgspecError, UnicodeError, RecursionError)

# A source whose lines are mostly something else (a compact index, repositories, records with
# fields of their own) stops trying once its misses outnumber its records by this many: a
# miss costs one or two failed decodes before the usual one (1-8 us each).
MISSES_AHEAD: Final = 100


def _flat(line: bytes | str) -> tuple[Any, str | None]:
    return _FLAT(line), None


def _wrapped(line: bytes | str) -> tuple[Any, str | None]:
    wrapped = _WRAPPED(line)
    version = wrapped.datasetVersion
    return wrapped.record, version if isinstance(version, str) else None


_FLAT: Final = msgspec.json.Decoder(_FullRecord).decode
_WRAPPED: Final = msgspec.json.Decoder(_Wrapped).decode


class TypedLines:
    """One source's JSON Lines lines tried as full records, flat or wrapped, the form that
    last matched first; given up once the source mostly holds something else."""

    def __init__(self) -> None:
        self.records = 0
        self.misses = 0
        self._forms = [_flat, _wrapped]

    def record(self, line: bytes | str) -> tuple[Record, str | None] | None:
        """The record of one stripped line and its wrapper's datasetVersion, if the line is
        a valid full record with only upstream's fields; None for anything else."""
        if self.misses > self.records + MISSES_AHEAD:
            return None
        for form in self._forms:
            try:
                decoded, version = form(line)
            except _NOT_FULL:
                continue
            record = _record_of(decoded)
            if record is None:
                break  # the shape was right, a value is not: the usual path names it
            if form is not self._forms[0]:
                self._forms.reverse()
            self.records += 1
            return record, version
        self.misses += 1
        return None


# Tags and repositories repeat from record to record (7,983 distinct tags in the shared
# corpus's million records, five or so a record): their patterns are checked here once a
# distinct value, where msgspec called `re` at every one (the 150,000 records' decode took
# 0.62 s without those checks against 0.87 with them, 2026-12-06). At most this many values
# are remembered (a few MB); past it, the rest are checked each time.
KNOWN_VALUES: Final = 100_000
_known_tags: set[str] = set()
_known_repos: set[str] = set()


def _all_known(values: list[str], known: set[str], pattern: re.Pattern[str]) -> bool:
    """Whether every value matches `pattern` whole, those seen before not checked again."""
    for value in values:
        if value not in known:
            if pattern.fullmatch(value) is None:
                return False
            if len(known) < KNOWN_VALUES:
                known.add(value)
    return True


def _record_of(decoded: Any) -> Record | None:
    values = dict(zip(ORDER, _astuple(decoded), strict=True))
    if not (
        _all_known(values["tags"], _known_tags, TAG_RE)
        and _all_known([values["repo"]], _known_repos, REPO_RE)
        and beyond_types(values)
    ):
        return None
    try:
        return full_record(values)
    except FieldError:  # a lone surrogate, which parse_record rejects by name
        return None
