"""What a search's filters and the class names among its words mean in stored values:
`--repo pandas` is pandas-dev/pandas, `--error-class keyerror` is KeyError, a qualified
class (django.core.exceptions.ImproperlyConfigured) is its last name with its module's
records first; each becomes SQL on `records r` (a `Scope`) that kb.search adds to its
statements.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kb.distinct import any_case, short_named
from kb.query import module_first
from kb.search_types import Filters, Resolved

# A qualified class name as people paste it from a traceback: modules, then a capitalised name
# (django.core.exceptions.ImproperlyConfigured); records keep the last name only.
QUALIFIED_CLASS_RE: Final = re.compile(r"((?:[A-Za-z_][A-Za-z0-9_]*\.)+)([A-Z][A-Za-z0-9_]*)")
# A word that could name an exception class as records keep it (the last name only).
CLASS_WORD_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
INNER_CAPITAL_RE: Final = re.compile(r"(?<=.)[A-Z]")  # ValueError, not Error or Unable


@dataclass
class Scope:
    """Filters as SQL on `records r`: WHERE conditions, and ORDER BY terms that go before the
    rank (records that agree with a qualified name's module first)."""

    conditions: list[str] = field(default_factory=list)
    params: list[Any] = field(default_factory=list)
    order: list[tuple[str, list[Any]]] = field(default_factory=list)
    resolved: list[Resolved] = field(default_factory=list)

    def where(self, *first: str) -> str:
        return where_clause([*first, *self.conditions])


def where_clause(conditions: Sequence[str]) -> str:
    return (" WHERE " + " AND ".join(conditions)) if conditions else ""


class Scoping:
    """Filters resolved against the stored values (`run`: a kb.sql.Runner's rows), the
    case-insensitive and short-name lists kept per `revision` in `cache` (kb.distinct)."""

    def __init__(
        self,
        run: Callable[..., list[tuple[Any, ...]]],
        revision: str = "",
        cache: Path | None = None,
    ) -> None:
        self.run = run
        self.revision, self.cache = revision, cache

    def scope(self, filters: Filters) -> Scope:
        """The filters as SQL, each by the stored values it means (see `Resolved`)."""
        scope = Scope()
        for name, column, typed in (
            ("repo", "repo", filters.repo),
            ("errorClass", "error_class", filters.error_class),
            ("errorCode", "error_code", filters.code),
            ("errorType", "error_type", filters.error_type),
            ("severity", "severity", filters.severity),
        ):
            if typed:
                if column == "repo":
                    values = self._repos(typed)
                elif column == "error_class":
                    values = self._classes(typed, scope)
                else:
                    values = self._stored("records", column, typed)
                self._narrow(scope, Resolved(name, typed, values or (typed,)), f"r.{column}")
        if filters.tag:
            values = self._stored("record_tags", "tag", filters.tag) or (filters.tag,)
            marks = ", ".join("?" * len(values))
            scope.conditions.append(
                "EXISTS (SELECT 1 FROM record_tags t WHERE t.record_key = r.key "
                f"AND t.tag IN ({marks}))"
            )
            scope.params += values
            scope.resolved.append(Resolved("tags", filters.tag, values))
        return scope

    @staticmethod
    def _narrow(scope: Scope, resolved: Resolved, column: str) -> None:
        scope.conditions.append(f"{column} IN ({', '.join('?' * len(resolved.values))})")
        scope.params += resolved.values
        scope.resolved.append(resolved)

    def _stored(self, table: str, column: str, typed: str) -> tuple[str, ...]:
        """The stored values equal to what was typed but for case. Index look-ups first: the
        value as typed (the usual case), then in lower, upper and capitalised case (tags and
        repositories are lower case); only when none is stored, a scan of the column."""
        variants = list(dict.fromkeys((typed, typed.lower(), typed.upper(), typed.capitalize())))
        marks = ", ".join("?" * len(variants))
        rows = self.run(
            f"SELECT DISTINCT {column} FROM {table} WHERE {column} IN ({marks})", variants
        )
        if not rows:
            return any_case(self.run, table, column, typed, self.revision, self.cache)
        return tuple(sorted(str(row[0]) for row in rows))

    def _repos(self, typed: str) -> tuple[str, ...]:
        """A repository by its name whatever the case, else by its short name (`pandas` for
        pandas-dev/pandas): every repository of that name, when several share it."""
        exact = self._stored("records", "repo", typed)
        if exact or "/" in typed:
            return exact
        return short_named(self.run, "records", "repo", typed, self.revision, self.cache)

    def _classes(self, typed: str, scope: Scope) -> tuple[str, ...]:
        """An error class whatever the case, or by its qualified name: records keep the last
        name (ImproperlyConfigured), and those whose repository or file agrees with the
        module path (django.core.exceptions) come first."""
        exact = self._stored("records", "error_class", typed)
        if exact:
            return exact
        qualified = QUALIFIED_CLASS_RE.fullmatch(typed)
        if qualified is None:
            return ()
        found = self._stored("records", "error_class", qualified.group(2))
        if found:
            scope.order.append(module_first(qualified.group(1).rstrip(".")))
        return found

    def qualified_class(self, terms: list[str], scope: Scope) -> str | None:
        """The first qualified class name among the query's words (pasted from a traceback,
        perhaps with its colon) that names a stored class: it becomes an error-class filter,
        its module ranks agreeing records first, and the term is returned."""
        for term in terms:
            name = term.rstrip(":,;")
            if QUALIFIED_CLASS_RE.fullmatch(name):
                values = self._classes(name, scope)
                if values:
                    self._narrow(scope, Resolved("errorClass", name, values), "r.error_class")
                    return term
        return None

    def without_class_word(self, query: str, terms: Sequence[str]) -> str:
        """The query without its first word where that word is a stored error class as typed
        and words follow it ("ValueError: must be positive", as a traceback's last line
        reads): the message must hold what follows the class to rank first, for a record
        keeps its class apart from its message. The word still selects and ranks records. A
        capitalised word ("Error loading model") is taken for a class only with its colon."""
        first = query.split(maxsplit=1)
        if len(terms) < 2 or len(first) < 2 or terms[0] != first[0]:
            return query
        name = terms[0].rstrip(":")
        if not CLASS_WORD_RE.fullmatch(name) or not (
            name != terms[0] or INNER_CAPITAL_RE.search(name)
        ):
            return query
        sql = "SELECT 1 FROM records r WHERE r.error_class = ? LIMIT 1"
        return first[1] if self.run(sql, [name]) else query
