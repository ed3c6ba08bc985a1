"""The values a search takes and gives: the filters as the user typed them, the stored values
each resolved to, and the results, best first, with the response around them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final

from kb.text import clip

SUMMARY_CHARS: Final = 160
# The columns of `records r` a result is made of (`result_of` reads them in this order).
RESULT_COLUMNS: Final = (
    "r.id, r.repo, r.slug, r.error_message, r.error_class, r.error_code, r.documentation"
)


@dataclass(frozen=True)
class Filters:
    """The filters as the user typed them; `Searcher` finds the stored values they mean."""

    repo: str | None = None
    tag: str | None = None
    error_class: str | None = None
    code: str | None = None
    error_type: str | None = None
    severity: str | None = None


@dataclass(frozen=True)
class Resolved:
    """What one filter (or a qualified class name in the query) meant: the stored values it
    matched, whatever the case, by short name or by the last part of a dotted name."""

    name: str  # the dataset's key: repo, tags, errorClass, errorCode, errorType, severity
    typed: str
    values: tuple[str, ...]


@dataclass
class SearchResult:
    id: str
    score: float
    repo: str
    slug: str
    error_message: str
    error_class: str | None
    error_code: str | None
    summary: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "score": round(self.score, 6),
            "repo": self.repo,
            "slug": self.slug,
            "errorMessage": self.error_message,
            "errorClass": self.error_class,
            "errorCode": self.error_code,
            "summary": self.summary,
        }


@dataclass
class SearchResponse:
    results: list[SearchResult]
    total: int
    query: str | None
    method: str  # exact | all-words | most-words | any-word | error-class | filters | none
    corrected: str | None = None  # the query actually run, when "did you mean" changed it
    suggestions: list[str] = field(default_factory=list)
    resolved: list[Resolved] = field(default_factory=list)  # what each filter matched

    def as_dict(self) -> dict[str, Any]:
        return {
            "results": [result.as_dict() for result in self.results],
            "total": self.total,
            "query": self.query,
            "method": self.method,
            "didYouMean": self.corrected,
            "filters": {item.name: list(item.values) for item in self.resolved},
        }


def summary_of(documentation: str | None) -> str:
    text = " ".join((documentation or "").split())
    cut = re.search(r"(?<=[.!?])\s", text)
    if cut and cut.start() <= SUMMARY_CHARS:
        text = text[: cut.start()]
    return clip(text, SUMMARY_CHARS)


def result_of(row: tuple[Any, ...], score: float) -> SearchResult:
    record_id, repo, slug, message, error_class, error_code, documentation = row[:7]
    return SearchResult(
        id=record_id,
        score=score,
        repo=repo,
        slug=slug,
        error_message=message,
        error_class=error_class,
        error_code=error_code,
        summary=summary_of(documentation),
    )


def ranked_response(rows: list[tuple[Any, ...]], total: int, method: str) -> SearchResponse:
    """The response of ranked rows (RESULT_COLUMNS, then the bm25 score)."""
    # bm25 is negative, lower is better; -bm25 / (1 - bm25) maps it into (0, 1).
    results = [result_of(row, -row[7] / (1.0 - row[7])) for row in rows]
    return SearchResponse(best_first(results), int(total), None, method)


def best_first(results: list[SearchResult]) -> list[SearchResult]:
    """Scores that never rise down the list: a record ranked up (an exact phrase, an agreeing
    module) gets the best score of those it passed, so a program sorting by score agrees."""
    for above, below in zip(reversed(results[:-1]), reversed(results[1:]), strict=True):
        above.score = max(above.score, below.score)
    return results
