"""Full-text search over the records, with filters, exact look-ups and "did you mean".

SQLite answers from its FTS5 index (ranked by bm25); other databases get a portable,
slower word search until their own index is wired up. Whatever the user types becomes
quoted FTS phrases and bound parameters, never query syntax or SQL.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Float, and_, exists, false, func, or_, select
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from kb.models import FTS_COLUMNS, RECORD_TAGS, RECORDS
from kb.records import ID_RE

# bm25 weight per FTS column, in FTS_COLUMNS order. The message and code are what people
# paste, so they count most; identifiers (slug, class, repo, path, tags) next; the prose
# (documentation, scenarios, solutions) least, or long generic text would outrank the record
# whose message the user actually quoted.
BM25_WEIGHTS: Final = {
    "slug": 4.0,
    "error_message": 10.0,
    "error_code": 10.0,
    "error_class": 4.0,
    "repo": 3.0,
    "file_path": 3.0,
    "tags": 2.0,
    "documentation": 1.0,
    "trigger_scenarios": 0.7,
    "common_situations": 0.7,
    "solutions": 0.5,
}
assert tuple(BM25_WEIGHTS) == FTS_COLUMNS

MAX_QUERY_CHARS: Final = 2000  # longer input is cut: nobody types more, a paste may be huge
MAX_TERMS: Final = 40  # FTS cost grows with terms; the first 40 words carry the meaning
DEFAULT_LIMIT: Final = 10
SUGGEST_CUTOFF: Final = 80  # rapidfuzz ratio a correction needs; lower suggests nonsense
SUMMARY_CHARS: Final = 160
RELAX_MAX_TERMS: Final = 8  # up to this many words a failed AND retries as "all but one"

TERM_RE: Final = re.compile(r'"([^"]*)"?|(\S+)')
WORD_RE: Final = re.compile(r"[^\W_]+", re.UNICODE)
CONTROL_RE: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


@dataclass(frozen=True)
class Filters:
    repo: str | None = None
    tag: str | None = None
    error_class: str | None = None
    code: str | None = None
    error_type: str | None = None
    severity: str | None = None

    def conditions(self) -> list[ColumnElement[bool]]:
        r = RECORDS.c
        out: list[ColumnElement[bool]] = []
        if self.repo:
            out.append(r.repo == self.repo)
        if self.error_class:
            out.append(r.error_class == self.error_class)
        if self.code:
            out.append(r.error_code == self.code)
        if self.error_type:
            out.append(r.error_type == self.error_type)
        if self.severity:
            out.append(r.severity == self.severity)
        if self.tag:
            t = RECORD_TAGS.c
            out.append(exists().where(and_(t.record_id == r.id, t.tag == self.tag)))
        return out


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
    method: str  # exact | all-words | most-words | any-word | filters | none
    corrected: str | None = None  # the query actually run, when "did you mean" changed it
    suggestions: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "results": [result.as_dict() for result in self.results],
            "total": self.total,
            "query": self.query,
            "method": self.method,
            "didYouMean": self.corrected,
        }


def terms_of(query: str) -> list[str]:
    """The user's words and "quoted phrases", each as plain text, punctuation-only dropped."""
    out = []
    for match in TERM_RE.finditer(query[:MAX_QUERY_CHARS]):
        term = (match.group(1) if match.group(1) is not None else match.group(2)).strip()
        if term and WORD_RE.search(term):
            out.append(term)
    return out[:MAX_TERMS]


def fts_phrase(term: str) -> str:
    """One term as an FTS5 string: the tokenizer splits it the way it split the records, so
    `backend_per_kind`, `torch.cuda` and `a/b.py` become phrases of adjacent words."""
    return '"' + term.replace('"', '""') + '"'


def summary_of(documentation: str | None) -> str:
    text = " ".join((documentation or "").split())
    cut = re.search(r"(?<=[.!?])\s", text)
    if cut and cut.start() <= SUMMARY_CHARS:
        text = text[: cut.start()]
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


_RESULT_COLUMNS = (
    RECORDS.c.id,
    RECORDS.c.repo,
    RECORDS.c.slug,
    RECORDS.c.error_message,
    RECORDS.c.error_class,
    RECORDS.c.error_code,
    RECORDS.c.documentation,
)


def _result(row: Any, score: float) -> SearchResult:
    return SearchResult(
        id=row.id,
        score=score,
        repo=row.repo,
        slug=row.slug,
        error_message=row.error_message,
        error_class=row.error_class,
        error_code=row.error_code,
        summary=summary_of(row.documentation),
    )


class Searcher:
    def __init__(self, conn: Connection, cache: Path | None = None, revision: str = "") -> None:
        self.conn = conn
        self.fts = conn.dialect.name == "sqlite"
        self.cache = cache  # where the vocabulary for "did you mean" is kept between runs
        self.revision = revision

    def search(
        self, query: str | None, filters: Filters = Filters(), limit: int = DEFAULT_LIMIT
    ) -> SearchResponse:
        # Control characters mean nothing in a query, and a NUL would end SQLite's string.
        query = CONTROL_RE.sub(" ", (query or "")[:MAX_QUERY_CHARS]).strip() or None
        if query is None:
            return self._filtered(filters, limit)
        exact = self._exact(query, filters, limit)
        if exact is not None:
            return exact
        terms = terms_of(query)
        if not terms:
            return SearchResponse([], 0, query, "none")
        found = self._words(terms, filters, limit, "all")
        if found.total:
            found.query = query
            return found
        corrected = self._correct(terms)
        if corrected != terms:
            found = self._words(corrected, filters, limit, "all")
            if found.total:
                found.query = query
                found.corrected = " ".join(corrected)
                return found
        if len(terms) > 1:
            tries = [
                (candidate, mode)
                for mode in ("most", "any")
                for candidate in dict.fromkeys((tuple(corrected), tuple(terms)))
            ]
            for candidate, mode in tries:
                if mode == "most" and len(candidate) > RELAX_MAX_TERMS:
                    continue
                found = self._words(candidate, filters, limit, mode)
                if found.total:
                    found.query = query
                    found.corrected = " ".join(candidate) if list(candidate) != terms else None
                    return found
        return SearchResponse(
            [], 0, query, "none", suggestions=[" ".join(corrected)] if corrected != terms else []
        )

    # ------------------------------------------------------------------ the ways to find

    def _filtered(self, filters: Filters, limit: int) -> SearchResponse:
        conditions = filters.conditions()
        where = and_(*conditions) if conditions else None
        count = select(func.count()).select_from(RECORDS)
        rows = select(*_RESULT_COLUMNS).order_by(RECORDS.c.repo, RECORDS.c.slug, RECORDS.c.id)
        if where is not None:
            count, rows = count.where(where), rows.where(where)
        total = self.conn.execute(count).scalar_one()
        results = [_result(row, 1.0) for row in self.conn.execute(rows.limit(limit))]
        return SearchResponse(results, int(total), None, "filters")

    def _exact(self, query: str, filters: Filters, limit: int) -> SearchResponse | None:
        """An id, a slug (or repo/slug) or an error code goes straight to its records."""
        r = RECORDS.c
        options: list[ColumnElement[bool]] = [r.slug == query, r.error_code == query]
        if ID_RE.fullmatch(query.lower()):
            options.append(r.id == query.lower())
        if "/" in query:
            repo, _, slug = query.rpartition("/")
            options.append(and_(r.repo == repo, r.slug == slug))
        statement = (
            select(*_RESULT_COLUMNS)
            .where(or_(*options), *filters.conditions())
            .order_by(r.repo, r.id)
        )
        rows = self.conn.execute(statement.limit(limit + 1)).all()
        if not rows:
            return None
        total = len(rows)
        if total > limit:
            total = self.conn.execute(
                select(func.count())
                .select_from(RECORDS)
                .where(or_(*options), *filters.conditions())
            ).scalar_one()
        return SearchResponse([_result(row, 1.0) for row in rows[:limit]], total, query, "exact")

    def _words(
        self, terms: Sequence[str], filters: Filters, limit: int, mode: str
    ) -> SearchResponse:
        """Records with all the words, all but one of them ("most"), or any one."""
        method = f"{mode}-words" if mode != "any" else "any-word"
        if self.fts:
            return self._fts(terms, filters, limit, mode, method)
        return self._like(terms, filters, limit, mode == "all", method)

    def _fts(
        self, terms: Sequence[str], filters: Filters, limit: int, mode: str, method: str
    ) -> SearchResponse:
        from sqlalchemy import column, literal_column, table

        expression = self._expression(terms, mode)
        fts = table("records_fts", column("rowid"))
        weights = ", ".join(str(w) for w in BM25_WEIGHTS.values())
        rank = literal_column(f"bm25(records_fts, {weights})", type_=Float).label("rank")
        matched = literal_column("records_fts").op("MATCH", is_comparison=True)(expression)
        joined = fts.join(RECORDS, RECORDS.c.key == fts.c.rowid)
        conditions = [matched, *filters.conditions()]
        total = self.conn.execute(
            select(func.count()).select_from(joined).where(*conditions)
        ).scalar_one()
        if not total:
            return SearchResponse([], 0, None, method)
        rows = self.conn.execute(
            select(*_RESULT_COLUMNS, rank)
            .select_from(joined)
            .where(*conditions)
            .order_by(rank, RECORDS.c.id)
            .limit(limit)
        )
        # bm25 is negative, lower is better; -bm25 / (1 - bm25) maps it into (0, 1).
        results = [_result(row, -row.rank / (1.0 - row.rank)) for row in rows]
        return SearchResponse(results, int(total), None, method)

    @staticmethod
    def _expression(terms: Sequence[str], mode: str) -> str:
        """FTS5 syntax for the terms, each a quoted phrase. "most" is all-but-one (any one
        word may be the stray), which ranks far fewer rows than a plain OR of common words."""
        phrases = [fts_phrase(term) for term in terms]
        if mode == "all" or len(phrases) == 1:
            return " AND ".join(phrases)
        if mode == "any":
            return " OR ".join(phrases)
        groups = [
            "(" + " AND ".join(p for j, p in enumerate(phrases) if j != skip) + ")"
            for skip in range(len(phrases))
        ]
        return " OR ".join(groups)

    def _like(
        self, terms: Sequence[str], filters: Filters, limit: int, every: bool, method: str
    ) -> SearchResponse:
        r = RECORDS.c
        searched = (r.error_message, r.slug, r.error_code, r.error_class, r.repo, r.documentation)
        per_term = []
        for term in terms:
            pattern = "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            per_term.append(or_(*(c.ilike(pattern, escape="\\") for c in searched)))
        matched = and_(*per_term) if every else or_(*per_term) if per_term else false()
        conditions = [matched, *filters.conditions()]
        total = self.conn.execute(
            select(func.count()).select_from(RECORDS).where(*conditions)
        ).scalar_one()
        rows = self.conn.execute(
            select(*_RESULT_COLUMNS).where(*conditions).order_by(r.repo, r.id).limit(limit)
        )
        return SearchResponse([_result(row, 0.5) for row in rows], int(total), None, method)

    # ------------------------------------------------------------------ did you mean

    def _known(self, term: str) -> bool:
        if not self.fts:
            return True
        from sqlalchemy import text

        row = self.conn.execute(
            text("SELECT 1 FROM records_fts WHERE records_fts MATCH :e LIMIT 1"),
            {"e": fts_phrase(term)},
        ).first()
        return row is not None

    def _correct(self, terms: Sequence[str]) -> list[str]:
        """Each unknown plain word replaced by the nearest word of the vocabulary."""
        unknown = [t for t in terms if " " not in t and WORD_RE.fullmatch(t) and not self._known(t)]
        if not unknown:
            return list(terms)
        vocabulary = self.vocabulary()
        from rapidfuzz import fuzz, process

        fixed: dict[str, str] = {}
        for term in unknown:
            best = process.extractOne(
                term.lower(), vocabulary, scorer=fuzz.ratio, score_cutoff=SUGGEST_CUTOFF
            )
            if best is not None:
                fixed[term] = best[0]
        return [fixed.get(term, term) for term in terms]

    def vocabulary(self) -> list[str]:
        """Words people search by: slug words, classes, codes and repository names.

        Built once per knowledge-base revision and kept in the cache folder: collecting it
        reads every record, which is most of a corrected search's time."""
        if self.cache is None:
            return self._collect_vocabulary()
        path = self.cache / f"vocabulary-{self.revision}.txt"
        try:
            return path.read_text(encoding="utf-8").splitlines()
        except OSError:
            pass
        words = self._collect_vocabulary()
        try:
            self.cache.mkdir(parents=True, exist_ok=True)
            for old in self.cache.glob("vocabulary-*.txt"):
                old.unlink(missing_ok=True)
            temporary = path.with_suffix(f".tmp{os.getpid()}")
            temporary.write_text("\n".join(words), encoding="utf-8")
            os.replace(temporary, path)
        except OSError:
            pass  # a read-only cache only costs speed
        return words

    def _collect_vocabulary(self) -> list[str]:
        words: set[str] = set()
        r = RECORDS.c
        rows = self.conn.execute(select(r.slug, r.error_class, r.error_code, r.repo).distinct())
        for row in rows:
            words.update(_words_of(row))
        return sorted(word for word in words if len(word) >= 3 and not word.isdigit())


def _words_of(row: Any) -> Iterable[str]:
    slug, error_class, error_code, repo = row
    for value in (slug, error_class, error_code, repo):
        if value:
            yield from (word.lower() for word in WORD_RE.findall(value))
    for whole in (error_class, error_code):
        if whole:
            yield whole.lower()
