"""The distinct values of the columns search filters and resolves by (error classes,
repositories, codes, tags), read once per knowledge-base revision and kept in this process and
in the cache folder: a value typed in another case, or a repository by its short name, is found
among them instead of by a scan of the column (1M records: 139 ms for error_class, on every
search of a dotted name that is no class as typed)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from kb.spelling import kept_text

# (cache folder, revision, table, column) -> the values; a server's threads share it. Small:
# 827 classes, 56 repositories and 7,983 tags at a million records.
_KEPT: dict[tuple[str, str, str, str], list[str]] = {}
KEPT_LISTS: Final = 16  # past this many (other revisions, other databases), start again

Rows = Callable[..., list[tuple[Any, ...]]]


def values(run: Rows, table: str, column: str, revision: str, cache: Path | None) -> list[str]:
    """Every distinct value of `table.column` that holds no line break (the list is kept a
    value a line; `any_case` and `short_named` scan for what holds one)."""
    if not revision:  # no revision to key on: read them each time
        return _collect(run, table, column)
    key = (str(cache), revision, table, column)
    kept = _KEPT.get(key)
    if kept is not None:
        return kept
    if len(_KEPT) >= KEPT_LISTS:
        _KEPT.clear()
    if cache is None:
        found = _KEPT[key] = _collect(run, table, column)
        return found
    text = kept_text(
        cache,
        f"values-{table}.{column}",
        revision,
        lambda: "\n".join(_collect(run, table, column)),
    )
    found = _KEPT[key] = text.split("\n") if text else []
    return found


def _collect(run: Rows, table: str, column: str, *, with_breaks: bool = False) -> list[str]:
    rows = run(f"SELECT DISTINCT {column} FROM {table} WHERE {column} IS NOT NULL")
    return sorted(str(value) for (value,) in rows if with_breaks or "\n" not in str(value))


def _candidates(
    run: Rows, table: str, column: str, typed: str, revision: str, cache: Path | None
) -> list[str]:
    if "\n" in typed:  # only a value with a line break can match: read them all
        return _collect(run, table, column, with_breaks=True)
    return values(run, table, column, revision, cache)


def any_case(
    run: Rows, table: str, column: str, typed: str, revision: str, cache: Path | None
) -> tuple[str, ...]:
    """The stored values equal to `typed` but for case (any letter's case, not only ASCII's
    as SQLite's lower())."""
    wanted = typed.lower()
    found = _candidates(run, table, column, typed, revision, cache)
    return tuple(value for value in found if value.lower() == wanted)


def short_named(
    run: Rows, table: str, column: str, typed: str, revision: str, cache: Path | None
) -> tuple[str, ...]:
    """The stored values that end with "/" and `typed`, whatever the case (a repository by
    its short name: pandas for pandas-dev/pandas)."""
    ending = "/" + typed.lower()
    found = _candidates(run, table, column, typed, revision, cache)
    return tuple(value for value in found if value.lower().endswith(ending))
