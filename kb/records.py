"""The dataset schema (DATASET.md, schemaVersion 2): parse and validate one record.

A record arrives as a dict in the dataset's camelCase keys and leaves as a `Record` of
snake_case values plus the unknown fields it carried, which are kept and given back on export.
Compact `index.json` rows become stub records: enough to match, documentation to follow.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, NamedTuple

from kb.digest import Parts, digest_of, is_json_digest, legacy_digest
from kb.weburl import is_url

SCHEMA_VERSION: Final = 2

# The rules below are upstream's (ErrLookup's zod `ErrorEntry`, packages/schema/src/error.ts),
# except where a comment says kb is lenient on purpose; the README's table lists each field.
ID_RE: Final = re.compile(r"[0-9a-f]{16}")
REPO_RE: Final = re.compile(r"[^/\s]+/[^/\s]+")
SLUG_RE: Final = re.compile(r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?")
TAG_RE: Final = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
# zod's `z.string().datetime()`: UTC with a Z, seconds required, any fraction, no offset.
TIMESTAMP_RE: Final = re.compile(r"\d{4}-\d\d-\d\dT([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?Z")
SOURCE_CODE_MAX_LINES: Final = 40  # upstream's limit on the window around the raise
# The largest integer a column holds on every database kb runs on (PostgreSQL's INTEGER); JSON
# allows any, and one past 2^63 used to stop a whole import in the driver.
MAX_INTEGER: Final = 2**31 - 1
LONE_SURROGATE_RE: Final = re.compile(r"[\ud800-\udfff]")
ERROR_TYPES: Final = frozenset(
    {"exception", "error_code", "console", "http", "validation", "panic"}
)
SEVERITIES: Final = frozenset({"critical", "error", "warning", "info"})
HANDLING_STRATEGIES: Final = frozenset(
    {"try-catch", "type-guard", "validation", "retry", "fallback"}
)


class FieldError(ValueError):
    """One field of one record is wrong; `field` names it in the dataset's key."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


Check = Callable[[str, Any], Any]


def _string(nonempty: bool = False) -> Check:
    def check(key: str, value: Any) -> Any:
        if not isinstance(value, str):
            raise FieldError(key, f"expected a string, got {_type_name(value)}")
        if nonempty and not value:  # upstream's min(1): a single space passes
            raise FieldError(key, "must not be empty")
        return value

    return check


def _int(low: int | None = None, high: int | None = MAX_INTEGER) -> Check:
    def check(key: str, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            raise FieldError(key, f"expected an integer, got {_type_name(value)}")
        if low is not None and value < low:
            raise FieldError(key, f"must be at least {low}, got {value}")
        if high is not None and value > high:
            raise FieldError(key, f"must be at most {high}, got {value}")
        return value

    return check


def _enum(values: frozenset[str]) -> Check:
    def check(key: str, value: Any) -> Any:
        if not isinstance(value, str) or value not in values:
            allowed = ", ".join(sorted(values))
            raise FieldError(key, f"must be one of {allowed}, got {json.dumps(value)[:60]}")
        return value

    return check


def _regex(pattern: re.Pattern[str], what: str) -> Check:
    def check(key: str, value: Any) -> Any:
        _string(nonempty=True)(key, value)
        if not pattern.fullmatch(value):
            raise FieldError(key, f"{what}, got {json.dumps(value)[:60]}")
        return value

    return check


def _string_list(item: Check | None = None) -> Check:
    def check(key: str, value: Any) -> Any:
        if not isinstance(value, list):
            raise FieldError(key, f"expected an array of strings, got {_type_name(value)}")
        for index, element in enumerate(value):
            if not isinstance(element, str):
                raise FieldError(f"{key}[{index}]", f"expected a string, got {_type_name(element)}")
            if item is not None:
                item(f"{key}[{index}]", element)
        return value

    return check


def _timestamp(key: str, value: Any) -> Any:
    _string(nonempty=True)(key, value)
    try:
        if not TIMESTAMP_RE.fullmatch(value):
            raise ValueError(value)
        datetime.fromisoformat(value[:10])  # a real day: no February 30th
    except ValueError:
        example = "2026-07-14T00:00:00Z"
        raise FieldError(
            key, f"not an ISO-8601 UTC timestamp like {example}: {json.dumps(value)[:60]}"
        ) from None
    return value


def _source_code(key: str, value: Any) -> Any:
    _string()(key, value)
    lines = value.count("\n") + 1
    if lines > SOURCE_CODE_MAX_LINES:
        raise FieldError(key, f"must be at most {SOURCE_CODE_MAX_LINES} lines, got {lines}")
    return value


def _url(key: str, value: Any) -> Any:
    _string()(key, value)
    if not is_url(value):
        raise FieldError(key, f"not a valid URL: {json.dumps(value)[:60]}")
    return value


def _nullable(check: Check) -> Check:
    def inner(key: str, value: Any) -> Any:
        return None if value is None else check(key, value)

    return inner


class FieldSpec(NamedTuple):  # a NamedTuple: see kb.matcher.scoring.ScoringConfig
    """One field of a record: its key, its column, its check, whether it must be present."""

    key: str  # the dataset's camelCase key
    column: str  # the snake_case column
    check: Check
    required: bool = True  # must be present (a nullable field must be present, may be null)


_TAG = _regex(TAG_RE, "must be kebab-case like 'kv-cache'")
_ID = _regex(ID_RE, "must be 16 lowercase hex digits")
_REPO = _regex(REPO_RE, "must be 'owner/name'")
_SLUG = _regex(SLUG_RE, "must be lowercase kebab-case like 'err-bad-response'")
_TEXT = _string(nonempty=True)
_LINE = _nullable(_int(1))  # null when upstream's analysis gave no line or source

# Every field of schemaVersion 2, in the order the dataset writes them; export uses this order.
FIELDS: Final[tuple[FieldSpec, ...]] = (
    FieldSpec("id", "id", _ID),
    FieldSpec("repo", "repo", _REPO),
    FieldSpec("slug", "slug", _SLUG),
    FieldSpec("errorCode", "error_code", _nullable(_TEXT)),
    FieldSpec("errorMessage", "error_message", _TEXT),
    FieldSpec("messagePattern", "message_pattern", _TEXT),
    FieldSpec("errorType", "error_type", _enum(ERROR_TYPES)),
    FieldSpec("errorClass", "error_class", _nullable(_TEXT)),
    FieldSpec("httpStatus", "http_status", _nullable(_int(100, 599))),
    FieldSpec("severity", "severity", _enum(SEVERITIES)),
    FieldSpec("filePath", "file_path", _TEXT),
    FieldSpec("lineNumber", "line_number", _LINE),
    FieldSpec("sourceCode", "source_code", _nullable(_source_code)),
    FieldSpec("sourceCodeStart", "source_code_start", _LINE),
    FieldSpec("sourceCodeEnd", "source_code_end", _LINE),
    FieldSpec("githubUrl", "github_url", _url),
    FieldSpec("documentation", "documentation", _TEXT),
    FieldSpec("triggerScenarios", "trigger_scenarios", _TEXT),
    FieldSpec("commonSituations", "common_situations", _TEXT),
    FieldSpec("solutions", "solutions", _string_list(_TEXT)),
    FieldSpec("exampleFix", "example_fix", _nullable(_string())),
    FieldSpec("handlingStrategy", "handling_strategy", _nullable(_enum(HANDLING_STRATEGIES))),
    FieldSpec("validationCode", "validation_code", _nullable(_string())),
    FieldSpec("typeGuard", "type_guard", _nullable(_string())),
    FieldSpec("tryCatchPattern", "try_catch_pattern", _nullable(_string())),
    FieldSpec("preventionTips", "prevention_tips", _string_list(_TEXT)),
    FieldSpec("tags", "tags", _string_list(_TAG)),
    # Absent in records analysed before the field existed: upstream defaults it to null.
    FieldSpec("backgroundTag", "background_tag", _nullable(_TAG), required=False),
    # Upstream requires a 40-hex git sha; kb takes any text on purpose: other producers pin
    # what they analysed otherwise (the shared corpus writes "pypi:torch==2.14.1").
    FieldSpec("analyzedSha", "analyzed_sha", _TEXT),
    FieldSpec("analyzedAt", "analyzed_at", _timestamp),
    FieldSpec("schemaVersion", "schema_version", _int()),
)
KEY_TO_COLUMN: Final = {spec.key: spec.column for spec in FIELDS}
COLUMNS: Final = tuple(spec.column for spec in FIELDS)
_COLUMN_VALUES: Final = operator.itemgetter(*COLUMNS)

# The compact index.json row: key -> (full key, check). Enough to match, not to explain.
COMPACT_FIELDS: Final[dict[str, tuple[str, Check]]] = {
    "id": ("id", _ID),
    "repo": ("repo", _REPO),
    "slug": ("slug", _SLUG),
    "code": ("errorCode", _nullable(_TEXT)),
    "msg": ("errorMessage", _TEXT),
    "pattern": ("messagePattern", _TEXT),
    "type": ("errorType", _enum(ERROR_TYPES)),
    "cls": ("errorClass", _nullable(_TEXT)),
    "tags": ("tags", _string_list(_TAG)),
    "sev": ("severity", _enum(SEVERITIES)),
}
COMPACT_REQUIRED: Final = frozenset({"id", "repo", "msg", "pattern"})


@dataclass
class Record:
    """One validated record: column values, unknown fields, and whether it is a stub."""

    values: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)
    stub: bool = False  # from a compact index row: no documentation yet
    # content_hash(), made once: a record is not changed after it was parsed
    _digest: str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def id(self) -> str:
        return str(self.values["id"])

    def _parts(self) -> Parts:
        return list(_COLUMN_VALUES(self.values)), self.extra, self.stub

    def content_hash(self) -> str:
        """A digest of everything stored (kb.digest), so a re-import can tell unchanged from
        updated."""
        if self._digest is None:
            self._digest = digest_of(self._parts())
        return self._digest

    def has_hash(self, stored: str) -> bool:
        """Whether a stored content_hash is this record's, in the form kb writes now or the
        one it wrote before (kb.digest)."""
        digest = self.content_hash()
        if stored == digest:
            return True
        return (
            is_json_digest(digest)
            and not is_json_digest(stored)
            and stored == legacy_digest(self._parts())
        )

    def to_dataset(self) -> dict[str, Any]:
        """The record in the dataset's own keys and order, unknown fields after."""
        if self.stub:
            out: dict[str, Any] = {}
            for short, (key, _check) in COMPACT_FIELDS.items():
                value = self.values.get(KEY_TO_COLUMN[key])
                if short in COMPACT_REQUIRED or value is not None:
                    out[short] = value
        else:
            out = {spec.key: self.values.get(spec.column) for spec in FIELDS}
        out.update(self.extra)
        return out


def record_id_of(obj: object) -> str | None:
    """The id of a raw record if it has a usable one, for error messages."""
    if isinstance(obj, Mapping):
        value = obj.get("id")
        if isinstance(value, str) and value:
            return value[:40]
    return None


# The fast path below checks the same rules as FIELDS, inlined, for the common all-valid record;
# any doubt falls back to the field-by-field loop, which names the first bad field exactly.
_PAIRS: Final = tuple((spec.key, spec.column) for spec in FIELDS if spec.required)
_ALL_PAIRS: Final = tuple((spec.key, spec.column) for spec in FIELDS)
_OPTIONAL: Final = tuple((spec.key, spec.column) for spec in FIELDS if not spec.required)
_NONEMPTY: Final = (
    "error_message",
    "message_pattern",
    "file_path",
    "documentation",
    "trigger_scenarios",
    "common_situations",
    "analyzed_sha",
)
_NULLABLE_NONEMPTY: Final = ("error_code", "error_class")
_NULLABLE_TEXT: Final = (
    "example_fix",
    "validation_code",
    "type_guard",
    "try_catch_pattern",
)
_LINES: Final = ("line_number", "source_code_start", "source_code_end")
_GITHUB: Final = "https://github.com/"  # a valid host: any printable rest makes a valid URL
_valid_timestamps: set[str] = set()  # analyzedAt repeats across a dataset: parse each once


def _fast_values(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The record's column values when every field is valid, else None (the caller then runs
    the exact checks)."""
    try:
        v = {column: obj[key] for key, column in _PAIRS}
    except KeyError:
        return None
    for key, column in _OPTIONAL:
        v[column] = obj.get(key)
    for column in _NONEMPTY:
        x = v[column]
        if type(x) is not str or not x:
            return None
    for column in _NULLABLE_NONEMPTY:
        x = v[column]
        if x is not None and (type(x) is not str or not x):
            return None
    for column in _NULLABLE_TEXT:
        x = v[column]
        if x is not None and type(x) is not str:
            return None
    for column in _LINES:
        x = v[column]
        if x is not None and (type(x) is not int or not 1 <= x <= MAX_INTEGER):
            return None
    x = v["source_code"]
    if x is not None and type(x) is not str:
        return None
    if v["schema_version"] != SCHEMA_VERSION or type(v["schema_version"]) is not int:
        return None
    x = v["http_status"]
    if x is not None and (type(x) is not int or not 100 <= x <= 599):
        return None
    x, y, z = v["id"], v["repo"], v["slug"]
    if type(x) is not str or type(y) is not str or type(z) is not str:
        return None
    if not ID_RE.fullmatch(x) or not REPO_RE.fullmatch(y) or not SLUG_RE.fullmatch(z):
        return None
    x, y = v["error_type"], v["severity"]
    if type(x) is not str or type(y) is not str or x not in ERROR_TYPES or y not in SEVERITIES:
        return None
    x = v["handling_strategy"]
    if x is not None and (type(x) is not str or x not in HANDLING_STRATEGIES):
        return None
    if type(v["github_url"]) is not str or type(v["analyzed_at"]) is not str:
        return None
    for column in ("solutions", "prevention_tips", "tags"):
        x = v[column]
        if type(x) is not list or not all(type(e) is str and e for e in x):
            return None
    if not all(TAG_RE.fullmatch(t) for t in v["tags"]):
        return None
    x = v["background_tag"]
    if x is not None and (type(x) is not str or not TAG_RE.fullmatch(x)):
        return None
    return v if beyond_types(v) else None


def beyond_types(v: dict[str, Any]) -> bool:
    """The rules of a full record's values that no type states: the source code's length in
    lines, the link, the timestamp, and the lines' order. Asked after the types were checked
    (by kb.ingest.typed's decoder in C, or by _fast_values above in Python)."""
    x = v["source_code"]
    if x is not None and x.count("\n") >= SOURCE_CODE_MAX_LINES:
        return False
    x = v["github_url"]
    if not ((x.startswith(_GITHUB) and x.isprintable()) or is_url(x)):
        return False
    x = v["analyzed_at"]
    if x not in _valid_timestamps:
        try:
            _timestamp("analyzedAt", x)
        except FieldError:
            return False
        if len(_valid_timestamps) < 1024:
            _valid_timestamps.add(x)
    return _span_error(v) is None


def _span_error(values: dict[str, Any]) -> FieldError | None:
    """Upstream's checks across fields, each made only when both ends are known."""
    line, start, end = values["line_number"], values["source_code_start"], values["source_code_end"]
    if start is not None and end is not None and end < start:
        return FieldError("sourceCodeEnd", "must not be before sourceCodeStart")
    if start is not None and line is not None and line < start:
        return FieldError("lineNumber", "must not be before sourceCodeStart")
    return None


def full_record(values: dict[str, Any]) -> Record:
    """The Record of a full record's valid column values and no unknown fields (_fast_values'
    or kb.ingest.typed's); FieldError for a text holding a lone surrogate."""
    return _unicode_checked(Record(values=values))


def parse_record(obj: object) -> Record:
    """Validate one full record (schemaVersion 2). Raises FieldError naming the first bad field."""
    if type(obj) is dict:
        fast = _fast_values(obj)
        if fast is not None:
            known = len(_PAIRS) + sum(key in obj for key, _column in _OPTIONAL)
            extra = (
                {}
                if len(obj) == known
                else {key: value for key, value in obj.items() if key not in KEY_TO_COLUMN}
            )
            return _unicode_checked(Record(values=fast, extra=extra))
    obj = _as_mapping(obj, "record")
    values = _checked(obj, FIELDS)
    if values["schema_version"] != SCHEMA_VERSION:
        raise FieldError(
            "schemaVersion", f"unsupported version {values['schema_version']} (kb reads 2)"
        )
    error = _span_error(values)
    if error is not None:
        raise error
    extra = {key: value for key, value in obj.items() if key not in KEY_TO_COLUMN}
    return _unicode_checked(Record(values=values, extra=extra))


def _as_mapping(obj: object, what: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise FieldError(what, f"expected a JSON object, got {_type_name(obj)}")
    return obj


def _checked(obj: Mapping[str, Any], specs: tuple[FieldSpec, ...]) -> dict[str, Any]:
    """Every field of `specs` checked, in order: the column values. Raises FieldError naming
    the first bad field; an optional field that is absent is None."""
    values: dict[str, Any] = {}
    for spec in specs:
        if spec.key in obj:
            values[spec.column] = spec.check(spec.key, obj[spec.key])
        elif spec.required:
            raise FieldError(spec.key, "missing")
        else:
            values[spec.column] = None
    return values


def _unicode_checked(record: Record) -> Record:
    """The record, unless a text in it holds a lone surrogate: JSON can spell one ("\\ud800"),
    but it is not Unicode, cannot be stored as UTF-8, and would break every later read."""
    if is_json_digest(record.content_hash()):
        # The digest encoded every text and key as UTF-8, which a lone surrogate cannot be;
        # the walk below over every value cost 3% of an import's CPU (20,000 records).
        return record
    for key, column in _ALL_PAIRS:
        where = _lone_surrogate(record.values.get(column), key)
        if where is not None:
            raise FieldError(*where)
    for key, value in record.extra.items():
        where = _lone_surrogate(value, key) or _lone_surrogate(key, key)
        if where is not None:
            raise FieldError(*where)
    return record


def _lone_surrogate(value: Any, where: str) -> tuple[str, str] | None:
    """(field, reason) for the first lone surrogate in a JSON value, else None."""
    if type(value) is str:
        if value.isascii():
            return None
        found = LONE_SURROGATE_RE.search(value)
        if found is None:
            return None
        code = ord(found.group())
        if 0xDC80 <= code <= 0xDCFF:  # how the reader spells a byte that is not UTF-8
            return where, (
                f"not valid UTF-8: byte 0x{code - 0xDC00:02X} at character {found.start()} "
                f"(or the lone surrogate U+{code:04X})"
            )
        return where, (
            f"not valid Unicode: a lone surrogate (U+{code:04X}) at character {found.start()}"
        )
    if type(value) is list:
        for index, item in enumerate(value):
            inner = _lone_surrogate(item, f"{where}[{index}]")
            if inner is not None:
                return inner
    elif type(value) is dict:
        for key, item in value.items():
            inner = _lone_surrogate(key, where) or _lone_surrogate(item, f"{where}.{key}")
            if inner is not None:
                return inner
    return None


def parse_compact(obj: object) -> Record:
    """Validate one compact `index.json` row into a stub record."""
    if not isinstance(obj, Mapping):
        raise FieldError("record", f"expected a JSON object, got {_type_name(obj)}")
    values: dict[str, Any] = dict.fromkeys(COLUMNS)
    for short, (key, check) in COMPACT_FIELDS.items():
        if short not in obj:
            if short in COMPACT_REQUIRED:
                raise FieldError(short, "missing")
            continue
        values[KEY_TO_COLUMN[key]] = check(short, obj[short])
    if values["tags"] is None:
        values["tags"] = []
    values["solutions"] = []
    values["prevention_tips"] = []
    values["error_type"] = values["error_type"] or "exception"
    values["severity"] = values["severity"] or "error"
    values["schema_version"] = SCHEMA_VERSION
    values["slug"] = values["slug"] or slugify(values["error_code"] or values["error_message"])
    extra = {key: value for key, value in obj.items() if key not in COMPACT_FIELDS}
    return _unicode_checked(Record(values=values, extra=extra, stub=True))


def looks_compact(obj: Mapping[str, Any]) -> bool:
    """A compact index row has `msg` and `pattern` where a full record has longer keys."""
    return "msg" in obj and "pattern" in obj and "errorMessage" not in obj


_SLUG_RE: Final = re.compile(r"[^a-z0-9]+")


def slugify(text: str) -> str:
    """The upstream slug rule: first 50 chars, lower-cased, non [a-z0-9] runs to '-'."""
    return _SLUG_RE.sub("-", text[:50].lower()).strip("-")


# One row of `repos.json` (upstream's `RepoEntry`), with the same leniencies as a record:
# unknown fields kept, analyzedSha any text, sourceFiles absent in older exports.
REPOSITORY_FIELDS: Final[tuple[FieldSpec, ...]] = (
    FieldSpec("repo", "repo", _REPO),
    FieldSpec("description", "description", _nullable(_string())),
    FieldSpec("language", "language", _nullable(_string())),
    FieldSpec("stars", "stars", _int(0)),
    FieldSpec("sourceFiles", "source_files", _nullable(_int(0)), required=False),
    FieldSpec("defaultBranch", "default_branch", _TEXT),
    FieldSpec("analyzedSha", "analyzed_sha", _TEXT),
    FieldSpec("analyzedAt", "analyzed_at", _timestamp),
    FieldSpec("errorCount", "error_count", _int(0)),
)
REPOSITORY_KEYS: Final = frozenset(spec.key for spec in REPOSITORY_FIELDS)


def parse_repository(obj: object) -> tuple[dict[str, Any], dict[str, Any]]:
    """Validate one `repos.json` row: its column values and its unknown fields."""
    obj = _as_mapping(obj, "repository")
    values = _checked(obj, REPOSITORY_FIELDS)
    extra = {key: value for key, value in obj.items() if key not in REPOSITORY_KEYS}
    for key, value in [*values.items(), *extra.items()]:
        where = _lone_surrogate(value, key)
        if where is not None:
            raise FieldError(*where)
    return values, extra
