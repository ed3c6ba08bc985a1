"""Full-text search over the records, with filters, exact look-ups and "did you mean".

SQLite answers from its FTS5 index (ranked by bm25), PostgreSQL from a weighted `tsvector`
column with a GIN index (ranked by ts_rank; kb/models.py makes both), any other database from a
portable, slower word search. Whatever the user types becomes quoted phrases and bound
parameters, never query syntax or SQL.

The SQL here is plain text with `?` parameters run through a `kb.sql.Runner`, so the same
searcher works on a SQLAlchemy connection and, for a cold `kb search`, on the standard
library's sqlite3 without importing SQLAlchemy at all.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kb.records import ID_RE
from kb.sql import Runner
from kb.text import clip

# The FTS5 columns, in the order of the index (kb/models.py FTS_COLUMNS, checked by a test).
# bm25 weight per column: the message and code are what people paste, so they count most;
# identifiers (slug, class, repo, path, tags) next; the prose (documentation, scenarios,
# solutions) least, or long generic text would outrank the record whose message was quoted.
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

# PostgreSQL has four weights, not a weight per column (kb/models.py groups the columns):
# {D, C, B, A} = the prose, repository/path/tags, slug/class, message/code, in the proportions
# of BM25_WEIGHTS (0.5-1 : 2-3 : 4 : 10).
TS_RANK_WEIGHTS: Final = "{0.07, 0.25, 0.4, 1.0}"
# ts_rank's normalisation: 1 divides by 1 + log(the record's length in words), as bm25 favours
# short fields; 32 maps the rank into (0, 1) as rank / (rank + 1), like the bm25 score here.
TS_RANK_NORMALIZATION: Final = 1 | 32
TS_CONFIG: Final = "kb_english"  # kb/models.py PG_TEXT_CONFIG

MAX_QUERY_CHARS: Final = 2000  # longer input is cut: nobody types more, a paste may be huge
MAX_TERMS: Final = 40  # FTS cost grows with terms; the first 40 words carry the meaning
DEFAULT_LIMIT: Final = 10
SUGGEST_CUTOFF: Final = 80  # rapidfuzz ratio a correction needs; lower suggests nonsense
SUMMARY_CHARS: Final = 160
RELAX_MAX_TERMS: Final = 8  # up to this many words a failed AND retries as "all but one"

# Related records for a log line (kb match's suggestions for lines no record explains): its
# longest words but these, at most RELATED_TERMS of them, all of them, else all but one, else
# any one. Common words would rank every record alike (and cost the most to rank).
RELATED_TERMS: Final = 6
STOP_WORDS: Final = frozenset({
    "the", "and", "for", "are", "was", "were", "not", "but", "with", "from", "that", "this",
    "these", "those", "into", "onto", "has", "have", "had", "been", "being", "can", "could",
    "should", "would", "will", "shall", "may", "might", "must", "does", "did", "doing", "done",
    "than", "then", "there", "their", "they", "them", "its", "our", "your", "you", "any",
    "all", "some", "such", "only", "also", "very", "more", "most", "other", "when", "what",
    "which", "while", "who", "whom", "why", "how", "where", "here", "just", "got", "get",
    "set", "use", "used", "using",
})  # fmt: skip
TERM_RE: Final = re.compile(r'"([^"]*)"?|(\S+)')
WORD_RE: Final = re.compile(r"[^\W_]+", re.UNICODE)
CONTROL_RE: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]+")
RESULT_COLUMNS: Final = (
    "r.id, r.repo, r.slug, r.error_message, r.error_class, r.error_code, r.documentation"
)


@dataclass(frozen=True)
class Filters:
    repo: str | None = None
    tag: str | None = None
    error_class: str | None = None
    code: str | None = None
    error_type: str | None = None
    severity: str | None = None

    def sql(self) -> tuple[list[str], list[Any]]:
        """WHERE conditions on `records r`, and their parameters."""
        conditions: list[str] = []
        params: list[Any] = []
        for column, value in (
            ("repo", self.repo),
            ("error_class", self.error_class),
            ("error_code", self.code),
            ("error_type", self.error_type),
            ("severity", self.severity),
        ):
            if value:
                conditions.append(f"r.{column} = ?")
                params.append(value)
        if self.tag:
            conditions.append(
                "EXISTS (SELECT 1 FROM record_tags t WHERE t.record_key = r.key AND t.tag = ?)"
            )
            params.append(self.tag)
        return conditions, params


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


def websearch_phrase(term: str) -> str:
    """One term as a quoted phrase of its words for websearch_to_tsquery: the words only (as
    the tsvector column was made of them), so nothing the user typed is query syntax."""
    return '"' + " ".join(WORD_RE.findall(term)) + '"'


def tsquery(terms: Sequence[str], mode: str) -> tuple[str, list[str]]:
    """PostgreSQL's query for the terms (SQL with `?` parameters): every phrase ("all"), any
    one ("any"), or all but one ("most", as _expression does for FTS5)."""
    phrases = [websearch_phrase(term) for term in terms]
    one = f"websearch_to_tsquery('{TS_CONFIG}', ?)"
    if mode == "all" or len(phrases) == 1:
        return one, [" ".join(phrases)]
    if mode == "any":
        return one, [" or ".join(phrases)]
    groups = [[p for j, p in enumerate(phrases) if j != skip] for skip in range(len(phrases))]
    sql = " || ".join(f"({one})" for _ in groups)
    return f"({sql})", [" ".join(group) for group in groups]


def summary_of(documentation: str | None) -> str:
    text = " ".join((documentation or "").split())
    cut = re.search(r"(?<=[.!?])\s", text)
    if cut and cut.start() <= SUMMARY_CHARS:
        text = text[: cut.start()]
    return clip(text, SUMMARY_CHARS)


def _result(row: tuple[Any, ...], score: float) -> SearchResult:
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


def _where(conditions: Sequence[str]) -> str:
    return (" WHERE " + " AND ".join(conditions)) if conditions else ""


class Searcher:
    def __init__(self, runner: Runner, cache: Path | None = None, revision: str = "") -> None:
        self.run = runner.rows
        self.fts = runner.fts
        self.tsvector = runner.dialect == "postgresql"
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

    def related(self, text: str, limit: int = 3) -> list[SearchResult]:
        """Records that share a log line's words, best first: what `kb match` suggests for a
        line no record explains. Its longest uncommon words (RELATED_TERMS), all of them,
        else all but one, else any one; no spelling correction (a log says what it says)."""
        text = CONTROL_RE.sub(" ", text[:MAX_QUERY_CHARS])
        words = [
            word
            for word in dict.fromkeys(w.lower() for w in WORD_RE.findall(text))
            if len(word) > 2 and word not in STOP_WORDS and not word.isdigit()
        ]
        terms = sorted(words, key=len, reverse=True)[:RELATED_TERMS]
        if not terms:
            return []
        for mode in ("all", "most", "any"):
            if mode == "most" and len(terms) < 3:
                continue
            if self.fts:
                # the message column only: a log line is a message, and the prose's common
                # words cost the most to rank
                expression = "{error_message} : (" + self._expression(terms, mode) + ")"
                found = self._fts_expression(expression, Filters(), limit, mode)
            else:
                found = self._words(terms, Filters(), limit, mode)
            if found.results:
                return found.results
        return []

    # ------------------------------------------------------------------ the ways to find

    def _filtered(self, filters: Filters, limit: int) -> SearchResponse:
        conditions, params = filters.sql()
        where = _where(conditions)
        (total,) = self.run(f"SELECT count(*) FROM records r{where}", params)[0]
        rows = self.run(
            f"SELECT {RESULT_COLUMNS} FROM records r{where} ORDER BY r.repo, r.slug, r.id LIMIT ?",
            [*params, limit],
        )
        return SearchResponse([_result(row, 1.0) for row in rows], int(total), None, "filters")

    def _exact(self, query: str, filters: Filters, limit: int) -> SearchResponse | None:
        """An id, a slug (or repo/slug) or an error code goes straight to its records."""
        options = ["r.slug = ?", "r.error_code = ?"]
        params: list[Any] = [query, query]
        if ID_RE.fullmatch(query.lower()):
            options.append("r.id = ?")
            params.append(query.lower())
        if "/" in query:
            repo, _, slug = query.rpartition("/")
            options.append("(r.repo = ? AND r.slug = ?)")
            params += [repo, slug]
        conditions, filter_params = filters.sql()
        where = _where(["(" + " OR ".join(options) + ")", *conditions])
        params += filter_params
        rows = self.run(
            f"SELECT {RESULT_COLUMNS} FROM records r{where} ORDER BY r.repo, r.id LIMIT ?",
            [*params, limit + 1],
        )
        if not rows:
            return None
        total = len(rows)
        if total > limit:
            (total,) = self.run(f"SELECT count(*) FROM records r{where}", params)[0]
        results = [_result(row, 1.0) for row in rows[:limit]]
        return SearchResponse(results, int(total), query, "exact")

    def _words(
        self, terms: Sequence[str], filters: Filters, limit: int, mode: str
    ) -> SearchResponse:
        """Records with all the words, all but one of them ("most"), or any one."""
        method = f"{mode}-words" if mode != "any" else "any-word"
        if self.fts:
            return self._fts(terms, filters, limit, mode, method)
        if self.tsvector:
            return self._tsv(terms, filters, limit, mode, method)
        return self._like(terms, filters, limit, mode == "all", method)

    def _fts(
        self, terms: Sequence[str], filters: Filters, limit: int, mode: str, method: str
    ) -> SearchResponse:
        return self._fts_expression(self._expression(terms, mode), filters, limit, method)

    def _fts_expression(
        self, expression: str, filters: Filters, limit: int, method: str
    ) -> SearchResponse:
        conditions, params = filters.sql()
        where = _where(["records_fts MATCH ?", *conditions])
        params = [expression, *params]
        joined = "records_fts JOIN records r ON r.key = records_fts.rowid"
        (total,) = self.run(f"SELECT count(*) FROM {joined}{where}", params)[0]
        if not total:
            return SearchResponse([], 0, None, method)
        weights = ", ".join(str(w) for w in BM25_WEIGHTS.values())
        rows = self.run(
            f"SELECT {RESULT_COLUMNS}, bm25(records_fts, {weights}) AS rank FROM {joined}{where} "
            "ORDER BY rank, r.id LIMIT ?",
            [*params, limit],
        )
        # bm25 is negative, lower is better; -bm25 / (1 - bm25) maps it into (0, 1).
        results = [_result(row, -row[7] / (1.0 - row[7])) for row in rows]
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

    def _tsv(
        self, terms: Sequence[str], filters: Filters, limit: int, mode: str, method: str
    ) -> SearchResponse:
        """PostgreSQL: the same words, modes and filters as _fts, on the tsvector column."""
        query_sql, query_params = tsquery(terms, mode)
        conditions, filter_params = filters.sql()
        where = _where(["r.search_vector @@ q.query", *conditions])
        joined = f"records r, (SELECT {query_sql} AS query) q"
        params = [*query_params, *filter_params]
        (total,) = self.run(f"SELECT count(*) FROM {joined}{where}", params)[0]
        if not total:
            return SearchResponse([], 0, None, method)
        rank = f"ts_rank('{TS_RANK_WEIGHTS}', r.search_vector, q.query, {TS_RANK_NORMALIZATION})"
        rows = self.run(
            f"SELECT {RESULT_COLUMNS}, {rank} AS rank FROM {joined}{where} "
            "ORDER BY rank DESC, r.id LIMIT ?",
            [*params, limit],
        )
        results = [_result(row, float(row[7])) for row in rows]
        return SearchResponse(results, int(total), None, method)

    def _like(
        self, terms: Sequence[str], filters: Filters, limit: int, every: bool, method: str
    ) -> SearchResponse:
        """The portable fallback: every (or any) word somewhere in the main text columns."""
        searched = ("error_message", "slug", "error_code", "error_class", "repo", "documentation")
        per_term: list[str] = []
        params: list[Any] = []
        for term in terms:
            escaped = term.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            per_term.append(
                "(" + " OR ".join(f"lower(r.{c}) LIKE ? ESCAPE '\\'" for c in searched) + ")"
            )
            params += [f"%{escaped}%"] * len(searched)
        conditions, filter_params = filters.sql()
        matched = "(" + (" AND " if every else " OR ").join(per_term) + ")"
        where = _where([matched, *conditions])
        params += filter_params
        (total,) = self.run(f"SELECT count(*) FROM records r{where}", params)[0]
        rows = self.run(
            f"SELECT {RESULT_COLUMNS} FROM records r{where} ORDER BY r.repo, r.id LIMIT ?",
            [*params, limit],
        )
        return SearchResponse([_result(row, 0.5) for row in rows], int(total), None, method)

    # ------------------------------------------------------------------ did you mean

    def _known(self, term: str) -> bool:
        if self.tsvector:
            query_sql, params = tsquery([term], "all")
            sql = f"SELECT 1 FROM records r WHERE r.search_vector @@ {query_sql} LIMIT 1"
            return bool(self.run(sql, params))
        if not self.fts:
            return True
        sql = "SELECT 1 FROM records_fts WHERE records_fts MATCH ? LIMIT 1"
        return bool(self.run(sql, [fts_phrase(term)]))

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
        for row in self.run("SELECT DISTINCT slug, error_class, error_code, repo FROM records"):
            words.update(_words_of(row))
        return sorted(word for word in words if len(word) >= 3 and not word.isdigit())


def _words_of(row: tuple[Any, ...]) -> Iterable[str]:
    slug, error_class, error_code, repo = row
    for value in (slug, error_class, error_code, repo):
        if value:
            yield from (word.lower() for word in WORD_RE.findall(value))
    for whole in (error_class, error_code):
        if whole:
            yield whole.lower()
