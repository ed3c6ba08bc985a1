"""The dataset schema (DATASET.md, schemaVersion 2): parse and validate one record.

A record arrives as a dict in the dataset's camelCase keys and leaves as a `Record` of
snake_case values plus the unknown fields it carried, which are kept and given back on export.
Compact `index.json` rows become stub records: enough to match, documentation to follow.
"""

from __future__ import annotations

import hashlib
import json
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

SCHEMA_VERSION: Final = 2

ID_RE: Final = re.compile(r"[0-9a-f]{16}")
REPO_RE: Final = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
TAG_RE: Final = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
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
        if nonempty and not value.strip():
            raise FieldError(key, "must not be empty")
        return value

    return check


def _int(low: int | None = None, high: int | None = None) -> Check:
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
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise FieldError(key, f"not an ISO-8601 timestamp: {json.dumps(value)[:60]}") from None
    return value


def _url(key: str, value: Any) -> Any:
    _string(nonempty=True)(key, value)
    if not value.startswith(("https://", "http://")):
        raise FieldError(key, "must be an http(s) URL")
    return value


def _nullable(check: Check) -> Check:
    def inner(key: str, value: Any) -> Any:
        return None if value is None else check(key, value)

    return inner


@dataclass(frozen=True)
class FieldSpec:
    key: str  # the dataset's camelCase key
    column: str  # the snake_case column
    check: Check
    required: bool = True  # must be present (a nullable field must be present, may be null)


_TAG = _regex(TAG_RE, "must be kebab-case like 'kv-cache'")

# Every field of schemaVersion 2, in the order the dataset writes them; export uses this order.
FIELDS: Final[tuple[FieldSpec, ...]] = (
    FieldSpec("id", "id", _regex(ID_RE, "must be 16 lowercase hex digits")),
    FieldSpec("repo", "repo", _regex(REPO_RE, "must be 'owner/name'")),
    FieldSpec("slug", "slug", _string(nonempty=True)),
    FieldSpec("errorCode", "error_code", _nullable(_string(nonempty=True))),
    FieldSpec("errorMessage", "error_message", _string(nonempty=True)),
    FieldSpec("messagePattern", "message_pattern", _string(nonempty=True)),
    FieldSpec("errorType", "error_type", _enum(ERROR_TYPES)),
    FieldSpec("errorClass", "error_class", _nullable(_string(nonempty=True))),
    FieldSpec("httpStatus", "http_status", _nullable(_int(100, 599))),
    FieldSpec("severity", "severity", _enum(SEVERITIES)),
    FieldSpec("filePath", "file_path", _string(nonempty=True)),
    FieldSpec("lineNumber", "line_number", _int(0)),
    FieldSpec("sourceCode", "source_code", _nullable(_string())),
    FieldSpec("sourceCodeStart", "source_code_start", _int(0)),
    FieldSpec("sourceCodeEnd", "source_code_end", _int(0)),
    FieldSpec("githubUrl", "github_url", _url),
    FieldSpec("documentation", "documentation", _string(nonempty=True)),
    FieldSpec("triggerScenarios", "trigger_scenarios", _string(nonempty=True)),
    FieldSpec("commonSituations", "common_situations", _string(nonempty=True)),
    FieldSpec("solutions", "solutions", _string_list()),
    FieldSpec("exampleFix", "example_fix", _nullable(_string())),
    FieldSpec("handlingStrategy", "handling_strategy", _nullable(_enum(HANDLING_STRATEGIES))),
    FieldSpec("validationCode", "validation_code", _nullable(_string())),
    FieldSpec("typeGuard", "type_guard", _nullable(_string())),
    FieldSpec("tryCatchPattern", "try_catch_pattern", _nullable(_string())),
    FieldSpec("preventionTips", "prevention_tips", _string_list()),
    FieldSpec("tags", "tags", _string_list(_TAG)),
    FieldSpec("backgroundTag", "background_tag", _nullable(_TAG)),
    FieldSpec("analyzedSha", "analyzed_sha", _string(nonempty=True)),
    FieldSpec("analyzedAt", "analyzed_at", _timestamp),
    FieldSpec("schemaVersion", "schema_version", _int()),
)
KEY_TO_COLUMN: Final = {spec.key: spec.column for spec in FIELDS}
COLUMNS: Final = tuple(spec.column for spec in FIELDS)
_COLUMN_VALUES: Final = operator.itemgetter(*COLUMNS)

# The compact index.json row: key -> (full key, check). Enough to match, not to explain.
COMPACT_FIELDS: Final[dict[str, tuple[str, Check]]] = {
    "id": ("id", _regex(ID_RE, "must be 16 lowercase hex digits")),
    "repo": ("repo", _regex(REPO_RE, "must be 'owner/name'")),
    "slug": ("slug", _string(nonempty=True)),
    "code": ("errorCode", _nullable(_string(nonempty=True))),
    "msg": ("errorMessage", _string(nonempty=True)),
    "pattern": ("messagePattern", _string(nonempty=True)),
    "type": ("errorType", _enum(ERROR_TYPES)),
    "cls": ("errorClass", _nullable(_string(nonempty=True))),
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

    @property
    def id(self) -> str:
        return str(self.values["id"])

    def content_hash(self) -> str:
        """A digest of everything stored, so a re-import can tell unchanged from updated."""
        # repr of plain JSON values is stable and several times cheaper than json.dumps.
        payload = repr((list(_COLUMN_VALUES(self.values)), self.extra, self.stub))
        return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()

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
_PAIRS: Final = tuple((spec.key, spec.column) for spec in FIELDS)
_NONEMPTY: Final = (
    "slug",
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
    "source_code",
    "example_fix",
    "validation_code",
    "type_guard",
    "try_catch_pattern",
)
_COUNTS: Final = ("line_number", "source_code_start", "source_code_end")
_valid_timestamps: set[str] = set()  # analyzedAt repeats across a dataset: parse each once


def _fast_values(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The record's column values when every field is valid, else None (the caller then runs
    the exact checks)."""
    try:
        v = {column: obj[key] for key, column in _PAIRS}
    except KeyError:
        return None
    for column in _NONEMPTY:
        x = v[column]
        if type(x) is not str or not x.strip():
            return None
    for column in _NULLABLE_NONEMPTY:
        x = v[column]
        if x is not None and (type(x) is not str or not x.strip()):
            return None
    for column in _NULLABLE_TEXT:
        x = v[column]
        if x is not None and type(x) is not str:
            return None
    for column in _COUNTS:
        x = v[column]
        if type(x) is not int or x < 0:
            return None
    if v["schema_version"] != SCHEMA_VERSION or type(v["schema_version"]) is not int:
        return None
    x = v["http_status"]
    if x is not None and (type(x) is not int or not 100 <= x <= 599):
        return None
    x, y = v["id"], v["repo"]
    if type(x) is not str or type(y) is not str or not ID_RE.fullmatch(x):
        return None
    if not REPO_RE.fullmatch(y) or not y.strip():
        return None
    x, y = v["error_type"], v["severity"]
    if type(x) is not str or type(y) is not str or x not in ERROR_TYPES or y not in SEVERITIES:
        return None
    x = v["handling_strategy"]
    if x is not None and (type(x) is not str or x not in HANDLING_STRATEGIES):
        return None
    x = v["github_url"]
    if type(x) is not str or not x.strip() or not x.startswith(("https://", "http://")):
        return None
    for column in ("solutions", "prevention_tips", "tags"):
        x = v[column]
        if type(x) is not list or not all(type(e) is str for e in x):
            return None
    if not all(TAG_RE.fullmatch(t) for t in v["tags"]):
        return None
    x = v["background_tag"]
    if x is not None and (type(x) is not str or not TAG_RE.fullmatch(x)):
        return None
    x = v["analyzed_at"]
    if type(x) is not str or x not in _valid_timestamps:
        try:
            _timestamp("analyzedAt", x)
        except FieldError:
            return None
        if len(_valid_timestamps) < 1024:
            _valid_timestamps.add(x)
    if v["source_code_end"] < v["source_code_start"]:
        return None
    if v["line_number"] < v["source_code_start"]:
        return None
    return v


def parse_record(obj: object) -> Record:
    """Validate one full record (schemaVersion 2). Raises FieldError naming the first bad field."""
    if type(obj) is dict:
        fast = _fast_values(obj)
        if fast is not None:
            extra = (
                {}
                if len(obj) == len(FIELDS)
                else {key: value for key, value in obj.items() if key not in KEY_TO_COLUMN}
            )
            return Record(values=fast, extra=extra)
    if not isinstance(obj, Mapping):
        raise FieldError("record", f"expected a JSON object, got {_type_name(obj)}")
    values: dict[str, Any] = {}
    for spec in FIELDS:
        if spec.key not in obj:
            raise FieldError(spec.key, "missing")
        values[spec.column] = spec.check(spec.key, obj[spec.key])
    if values["schema_version"] != SCHEMA_VERSION:
        raise FieldError(
            "schemaVersion", f"unsupported version {values['schema_version']} (kb reads 2)"
        )
    if values["source_code_end"] < values["source_code_start"]:
        raise FieldError("sourceCodeEnd", "must not be before sourceCodeStart")
    if values["line_number"] < values["source_code_start"]:
        raise FieldError("lineNumber", "must not be before sourceCodeStart")
    extra = {key: value for key, value in obj.items() if key not in KEY_TO_COLUMN}
    return Record(values=values, extra=extra)


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
    return Record(values=values, extra=extra, stub=True)


def looks_compact(obj: Mapping[str, Any]) -> bool:
    """A compact index row has `msg` and `pattern` where a full record has longer keys."""
    return "msg" in obj and "pattern" in obj and "errorMessage" not in obj


_SLUG_RE: Final = re.compile(r"[^a-z0-9]+")


def slugify(text: str) -> str:
    """The upstream slug rule: first 50 chars, lower-cased, non [a-z0-9] runs to '-'."""
    return _SLUG_RE.sub("-", text[:50].lower()).strip("-")
