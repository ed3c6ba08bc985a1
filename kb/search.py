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

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from kb.broad import (
    BROAD_RECORDS,
    HELD_FIRST,
    Held,
    HeldScores,
    RestScores,
    best_records,
    own_held_scores,
    own_rest_scores,
    side_by_side,
    text_first,
)
from kb.query import (
    MAX_QUERY_CHARS,
    CommonWords,
    PhraseCounts,
    fts_expression,
    fts_phrase,
    fts_rank_expression,
    held_word_for_word,
    message_phrases,
    order_by,
    phrase_first,
    phrase_held,
    rank_slots,
    selecting,
    terms_of,
    tsquery,
)
from kb.ranking import (
    BM25_WEIGHTS,
    OwnRanking,
    Ranker,
    Slots,
    most_scored,
    ranking_statement,
    sure_to_finish,
    worth_trying,
)
from kb.records import ID_RE
from kb.scope import Scope, Scoping
from kb.search_other import like_search, tsv_search
from kb.search_types import (
    RESULT_COLUMNS,
    Filters,
    Resolved,
    SearchResponse,
    SearchResult,
    ranked_response,
    result_of,
    summary_of,
)
from kb.spelling import WORD_RE, Speller
from kb.sql import Runner

# The values it takes and gives are kb.search_types', named here too (`from kb.search import
# Filters`): the search's callers need no second module.
__all__ = [
    "BM25_WEIGHTS",
    "Filters",
    "Resolved",
    "SearchResponse",
    "SearchResult",
    "Searcher",
    "summary_of",
]

DEFAULT_LIMIT: Final = 10
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
CONTROL_RE: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]+")
# The most records a walk started before the count may score (exact as a double: the C
# function reads the cap as one).
MAX_CAP: Final = 1 << 53


def _words(slot_terms: Sequence[str]) -> list[str]:
    """The ranked terms' words as typed, each once: a one-word term's estimate is then the
    one the sample already made."""
    return list(dict.fromkeys(w for t in slot_terms for w in WORD_RE.findall(t)))


class Searcher:
    def __init__(
        self,
        runner: Runner,
        cache: Path | None = None,
        revision: str = "",
        ranker: Ranker | None = None,
    ) -> None:
        self.run = runner.rows
        self.fts = runner.fts
        self.tsvector = runner.dialect == "postgresql"
        self.cache, self.revision = cache, revision
        self.scoping = Scoping(self.run, revision, cache)  # filters, and classes among words
        # "did you mean": its word lists kept in `cache` between runs, per revision
        self.speller = Speller(self.run, self._known, cache, revision)
        self.common = CommonWords(self.run, revision, cache)  # words bm25 need not rank by
        # kb's own bm25 (kb.ranking) on the same file, with the phrases' counts kept here,
        # counted on the ranker's connection where there is one (its page cache then holds
        # what the ranking reads next)
        self.ranker = ranker
        self.counts = PhraseCounts(self._counting_rows, revision, cache)
        # the best holders of a phrase walked while another thread counted (_beside_count)
        self._prefetched: dict[tuple[str, bool, int | None], list[tuple[int, float]]] = {}
        self._helds: dict[str, Held] = {}  # and their sample's answer, by kb.broad's phrase

    def _counting_rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        found = self.ranker.rows(sql, params) if self.ranker is not None else None
        return found if found is not None else self.run(sql, params)

    def search(
        self, query: str | None, filters: Filters = Filters(), limit: int = DEFAULT_LIMIT
    ) -> SearchResponse:
        # Control characters mean nothing in a query, and a NUL would end SQLite's string.
        query = CONTROL_RE.sub(" ", (query or "")[:MAX_QUERY_CHARS]).strip() or None
        scope = self.scoping.scope(filters)
        found = self._search(query, scope, limit)
        found.resolved = scope.resolved
        return found

    def _search(self, query: str | None, scope: Scope, limit: int) -> SearchResponse:
        if query is None:
            return self._filtered(scope, limit)
        exact = self._exact(query, scope, limit)
        if exact is not None:
            return exact
        terms = terms_of(query)
        qualified = self.scoping.qualified_class(terms, scope)
        if qualified is not None:
            terms = [term for term in terms if term != qualified]
            query_words = query.replace(qualified, " ", 1)
            if not terms:
                found = self._filtered(scope, limit, "error-class")
                found.query = query
                return found
        elif not terms:
            return SearchResponse([], 0, query, "none")
        else:
            query_words = self.scoping.without_class_word(query, terms)
        phrases = message_phrases(query_words)
        found = self._words(terms, scope, phrases, limit, "all")
        if found.total:
            found.query = query
            return found
        corrected = self.speller.correct(terms)
        if corrected != terms:
            found = self._words(corrected, scope, phrases, limit, "all")
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
                found = self._words(candidate, scope, phrases, limit, mode)
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
                expression = "{error_message} : (" + fts_expression(terms, mode) + ")"
                found = self._fts_expression(expression, Scope(), limit, mode)
            else:
                found = self._words(terms, Scope(), [], limit, mode)
            if found.results:
                return found.results
        return []

    # ------------------------------------------------------------------ the ways to find

    def _filtered(self, scope: Scope, limit: int, method: str = "filters") -> SearchResponse:
        where = scope.where()
        (total,) = self.run(f"SELECT count(*) FROM records r{where}", scope.params)[0]
        order, order_params = order_by(scope.order)
        rows = self.run(
            f"SELECT {RESULT_COLUMNS} FROM records r{where} "
            f"ORDER BY {order}r.repo, r.slug, r.id LIMIT ?",
            [*scope.params, *order_params, limit],
        )
        return SearchResponse([result_of(row, 1.0) for row in rows], int(total), None, method)

    def _exact(self, query: str, scope: Scope, limit: int) -> SearchResponse | None:
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
        where = scope.where("(" + " OR ".join(options) + ")")
        params += scope.params
        rows = self.run(
            f"SELECT {RESULT_COLUMNS} FROM records r{where} ORDER BY r.repo, r.id LIMIT ?",
            [*params, limit + 1],
        )
        if not rows:
            return None
        total = len(rows)
        if total > limit:
            (total,) = self.run(f"SELECT count(*) FROM records r{where}", params)[0]
        results = [result_of(row, 1.0) for row in rows[:limit]]
        return SearchResponse(results, int(total), query, "exact")

    def _words(
        self,
        terms: Sequence[str],
        scope: Scope,
        phrases: Sequence[str],
        limit: int,
        mode: str,
    ) -> SearchResponse:
        """Records with all the words, all but one of them ("most"), or any one; those whose
        message holds the `phrases` first (kb.query.phrase_first), then those the scope's
        order puts first (agreeing modules), then by rank."""
        method = f"{mode}-words" if mode != "any" else "any-word"
        if self.fts:
            typed_common = self.common.of(terms)
            terms = selecting(terms, mode, self.common.everywhere(terms))
            expression = fts_expression(terms, mode)
            common = typed_common & frozenset(terms)  # selecting only leaves terms out
            ranked = fts_rank_expression(terms, mode, common)
            slots = rank_slots(terms, mode, common)
            own = self._own_ranking(terms, mode, common, slots)
            return self._fts_expression(
                expression,
                scope,
                limit,
                method,
                ranked,
                own,
                phrases=phrases,
                slots=slots,
            )
        dialect = "postgresql" if self.tsvector else "other"
        order = [*phrase_first(phrases, dialect), *scope.order]
        if self.tsvector:
            return tsv_search(self.run, terms, scope, order, limit, mode, method)
        return like_search(self.run, terms, scope, order, limit, mode == "all", method)

    def _own_ranking(
        self,
        terms: Sequence[str],
        mode: str,
        common: frozenset[str],
        slots: tuple[list[int], list[str]],
    ) -> OwnRanking | None:
        """What kb's own bm25 needs to rank the query (kb.query.rank_slots), and how many
        records it may score before FTS5's bm25 is the cheaper: as many as FTS5's would walk
        entries of the ranking's words' record lists, estimated from the sample; None where
        the sample says it would give up (or no ranker). Where the rarest term's records
        (counted, once per revision) do not say the query finds few enough, they are counted
        first (a walk, no scoring), and kb_bm25 runs only if they are: giving up after
        scoring its share cost 78 of the 191 ms of "should be a" (13,273 records, 4,518 it
        may score), and counting first 15-24 ms of "ValueError input features" (2,158 of
        6,340), at a million records."""
        if self.ranker is None:
            return None
        phrase_slots, slot_terms = slots
        words = _words(slot_terms)
        most = most_scored(sum(self.common.estimated(words)), self.ranker.seconds_per_record())
        bound = float("inf")
        if mode == "all":  # the rarest word bounds what it finds ("most" has no tight bound)
            counted = self.counts.counts  # exact where counted already
            estimates = [
                counted.get(term, estimate)
                for term, estimate in zip(terms, self.common.estimated(terms), strict=True)
            ]
            if not worth_trying(min(estimates), most):
                return None
            rarest = min(zip(estimates, terms, strict=True))[1]
            bound = float(self.counts.of([rarest])[0])  # what the query finds at most
        sure = sure_to_finish(bound, most)
        return OwnRanking(
            phrase_slots=phrase_slots,
            slot_terms=slot_terms,
            most=most,
            count_first=not sure,
            found_at_most=bound,
        )

    def _fts_expression(
        self,
        expression: str,
        scope: Scope,
        limit: int,
        method: str,
        ranked: str | None = None,
        own: OwnRanking | None = None,
        phrases: Sequence[str] = (),
        slots: tuple[list[int], list[str]] | None = None,
    ) -> SearchResponse:
        """The records of an FTS5 expression, ranked by bm25 on it, or on `ranked` (the
        expression without its common words, fts_rank_expression) restricted to them, after
        those whose message holds the `phrases` and the scope's order. With `own`, kb's own
        bm25 gives that ranking first, with the total in the same walk; where the query finds
        more records than it may score (kb.ranking), FTS5's bm25 after a count, reading only
        the best records where it finds many (kb.broad), kb's own bm25 scoring the records
        that hold the phrases where FTS5 finds them, on the `slots` of the ranking
        (kb.query.rank_slots)."""
        where = scope.where("records_fts MATCH ?")
        params = [expression, *scope.params]
        joined = "records_fts JOIN records r ON r.key = records_fts.rowid"
        order = [*phrase_first(phrases), *scope.order]
        # Without filters the index alone counts (every row of it is a record): reading each
        # record only to count it took 59 of 60 ms for 4,881 records of "KeyError index" at 1M.
        counted = joined if scope.conditions else "records_fts"
        count = f"SELECT count(*) FROM {counted}{where}"
        total = None
        if own is not None and own.found_at_most == 0:
            total = 0
        elif own is not None and own.count_first:
            total = self._total(count, params, expression, scope, slots)
        if total == 0:
            return SearchResponse([], 0, None, method)
        if own is not None and self.ranker is not None and (total or 0) <= own.most:
            found = self._own_rows(self.ranker, own, f"{joined}{where}", params, order, limit)
            if found is not None:
                return ranked_response(found, found[0][8] if found else 0, method)
        if total is None:
            at_most = own.found_at_most if own is not None else float("inf")
            beside = self._beside_count(at_most, scope, phrases, expression, slots)
            total = self._total(count, params, expression, scope, slots, beside)
        if not total:
            return SearchResponse([], 0, None, method)
        matched, matched_params = "records_fts MATCH ?", [expression]
        if ranked is not None:
            # `+` keeps SQLite from asking FTS5 for each of those rowids in turn (a seek of
            # every word for each), where one walk of the expression's doclists finds them all
            matched += " AND +records_fts.rowid IN (SELECT rowid FROM records_fts WHERE "
            matched += "records_fts MATCH ?)"
            matched_params = [ranked, expression]
        rank = f"bm25(records_fts, {', '.join(str(w) for w in BM25_WEIGHTS.values())})"
        worded = held_word_for_word(phrases, expression)
        broad = total >= BROAD_RECORDS and not scope.conditions and not scope.order
        if broad and (worded is not None or not phrases):
            held = None
            if worded is not None:
                held = self._held(phrases, expression, worded)
            rows = best_records(
                self.run,
                columns=RESULT_COLUMNS,
                rank=rank,
                ranked=ranked or expression,
                expression=expression,
                held=held,
                limit=limit,
                held_scores=self._held_scores(held, slots, len(phrases), total),
                rest_scores=self._rest_scores(slots, expression, total),
            )
            return ranked_response(rows, total, method)
        first, first_params = order_by(order)
        rows = self.run(
            f"SELECT {RESULT_COLUMNS}, {rank} AS rank "
            f"FROM {joined}{scope.where(matched)} ORDER BY {first}rank, r.id LIMIT ?",
            [*matched_params, *scope.params, *first_params, limit],
        )
        return ranked_response(rows, total, method)

    def _total(
        self,
        count: str,
        params: list[Any],
        expression: str,
        scope: Scope,
        slots: tuple[list[int], list[str]] | None,
        beside: Callable[[], None] | None = None,
    ) -> int:
        """The records the expression finds (the `count` statement's). Where it is one term
        of the ranking, alone and unfiltered, that is the term's count, which its idf needs
        too (kb.query.PhraseCounts: the same statement, counted once per revision): one walk
        of it, not two ("ValueError to the" finds '"ValueError"', 511,859 records, 17 ms of
        its walk at a million records; '"does not support"' 22 ms). Else, given `beside`,
        the ranker counts in a thread of its own while `beside` runs here."""
        if not scope.conditions and slots is not None:
            for term in slots[1]:
                if fts_phrase(term) == expression:
                    return self.counts.of([term])[0]
        if beside is not None and self.ranker is not None:
            counted = self.ranker.rows_beside(count, params)
            try:
                beside()
            finally:
                rows = counted.result()
            if rows is not None:
                return int(rows[0][0])
        return int(self.run(count, params)[0][0])

    def _beside_count(
        self,
        found_at_most: float,
        scope: Scope,
        phrases: Sequence[str],
        expression: str,
        slots: tuple[list[int], list[str]] | None,
    ) -> Callable[[], None] | None:
        """What to do while the records are counted, where the query is likely to find many
        (kb.broad's way): the walk of the holders of its phrase by kb_bm25 in C that kb.broad
        asks for first (by its sample: with their text, or the best HELD_FIRST scores first),
        which it then finds here. The two walks take the two cores: "ValueError to be" at a
        million records, a count of 21 ms and that walk of 68, 68 ms against 89 one after the
        other (2026-12-05). None where the
        query cannot go kb.broad's way (filters, an order, no phrase) or finds too few (at
        most `found_at_most`, its rarest term's records), or without kb_bm25 in C (the walk
        would hold Python's lock)."""
        ranker = self.ranker
        if ranker is None or slots is None or not phrases or scope.conditions or scope.order:
            return None
        # the sample's estimate of the rarest ranked word's records, where nothing counted
        rarest = min(self.common.estimated(_words(slots[1])), default=0.0)
        if min(found_at_most, rarest) < BROAD_RECORDS or not ranker.native():
            return None
        worded = held_word_for_word(phrases, expression)
        if worded is None:
            return None
        held = self._held(phrases, expression, worded)
        # The count is not known yet: the records the query finds at most cap the scoring.
        cap = int(min(found_at_most, MAX_CAP))
        scores = own_held_scores(ranker, self.counts.of, slots, len(phrases), cap)

        def walk() -> None:
            # the walk kb.broad asks for first: with the text, or the best scores first
            first = text_first(self.run, held)
            self._helds[worded] = replace(held, read_text_first=first)
            text, most = (held.text, None) if first else (None, HELD_FIRST)
            found = scores(worded, text, most)
            if found is not None:
                self._prefetched[(worded, text is not None, most)] = found

        return walk

    def _held(self, phrases: Sequence[str], expression: str, worded: str) -> Held:
        """The records holding the phrases word for word (`worded`) and their text, for
        kb.broad; found side by side by the index's tokenizer for the sample, where it runs;
        as the walk beside the count left it, with its sample's answer."""
        known = self._helds.pop(worded, None)
        if known is not None:
            return known
        tokenizer = self.ranker.tokenizer() if self.ranker is not None else None
        sampled = side_by_side(phrases, expression, tokenizer) if tokenizer else None
        return Held(worded, phrase_held(phrases), sampled)

    def _held_scores(
        self,
        held: Held | None,
        slots: tuple[list[int], list[str]] | None,
        phrases: int,
        total: int,
    ) -> HeldScores | None:
        """kb's own bm25 for the records that hold the phrase (kb.broad.own_held_scores), for
        a query that finds `total` records; None without a phrase or a ranker."""
        if held is None or self.ranker is None or slots is None:
            return None
        scores = own_held_scores(self.ranker, self.counts.of, slots, phrases, total)

        def prefetched_or_walked(
            worded: str, text: tuple[str, list[Any]] | None, most: int | None
        ) -> list[tuple[int, float]] | None:
            found = self._prefetched.pop((worded, text is not None, most), None)
            return found if found is not None else scores(worded, text, most)

        return prefetched_or_walked

    def _rest_scores(
        self, slots: tuple[list[int], list[str]] | None, expression: str, total: int
    ) -> RestScores | None:
        """kb_bm25 in C for the records that do not hold the phrase (kb.broad.own_rest_scores);
        None without a ranker in C (FTS5's bm25 ranks them then).

        Always, where there is one: it scores a record in 0.4-0.7 us beyond the walk of the
        query's expression, and FTS5's bm25 in 1.0-1.4 us beyond the walk of the ranked
        words' records (at a million records, 2026-12-06: "model", 176,118 records, 207 ms
        against a walk of 8; "RuntimeError" AND "unexpected", 61,875, 68 against 6; "be" AND
        "a", 115,651, 165 against 17). Until then it was asked only where its records cost
        less than FTS5's walk alone, which left the scoring out: of 396 queries (the
        development queries and nine sealed draws already scored), the 21 it then left to
        FTS5 took 0.61-1.02 of their time with it (medians of 27 searches, three rounds in
        turns), the same answers: "RuntimeError with unexpected" 73.5 against 121.1 ms,
        "AssertionError and got" 54.6 against 89.2, "value for project id" 125.2 against
        157.0, "inpt_ids" 32.6 against 46.0."""
        if self.ranker is None or slots is None or not self.ranker.native():
            return None
        return own_rest_scores(self.ranker, self.counts.of, slots, expression, total)

    def _own_rows(
        self,
        ranker: Ranker,
        own: OwnRanking,
        source: str,
        params: list[Any],
        order: list[tuple[str, list[Any]]],
        limit: int,
    ) -> list[tuple[Any, ...]] | None:
        """The best records of `source` (FROM and WHERE) by kb's own bm25, each with the
        total; None when the ranker could not run or gave up."""
        slots = Slots(tuple(own.phrase_slots), tuple(self.counts.of(own.slot_terms)), own.most)
        sql, first_params = ranking_statement(slots, source, RESULT_COLUMNS, order)
        return ranker.rows(sql, [*first_params, *params, limit])

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
