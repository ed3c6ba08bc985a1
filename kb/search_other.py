"""`kb search`'s words where there is no FTS5: PostgreSQL's tsvector column (ranked by
ts_rank with weights in bm25's proportions), and any other database's LIKE on the main text
columns (the portable fallback). kb.search chooses; SQLite's FTS5 ranking stays there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from kb.query import like_escape, order_by, tsquery
from kb.scope import Scope
from kb.search_types import RESULT_COLUMNS, SearchResponse, best_first, result_of

# PostgreSQL has four weights, not a weight per column (kb/models.py groups the columns):
# {D, C, B, A} = the prose, repository/path/tags, slug/class, message/code, in the proportions
# of kb.ranking.BM25_WEIGHTS (0.5-1 : 2-3 : 4 : 10).
TS_RANK_WEIGHTS: Final = "{0.07, 0.25, 0.4, 1.0}"
# ts_rank's normalisation: 1 divides by 1 + log(the record's length in words), as bm25 favours
# short fields; 32 maps the rank into (0, 1) as rank / (rank + 1), like kb's bm25 score.
TS_RANK_NORMALIZATION: Final = 1 | 32


def tsv_search(
    run: Callable[..., list[tuple[Any, ...]]],
    terms: Sequence[str],
    scope: Scope,
    order: list[tuple[str, list[Any]]],
    limit: int,
    mode: str,
    method: str,
) -> SearchResponse:
    """PostgreSQL: the same words, modes and filters as FTS5's search (kb.search), on the
    tsvector column."""
    query_sql, query_params = tsquery(terms, mode)
    where = scope.where("r.search_vector @@ q.query")
    joined = f"records r, (SELECT {query_sql} AS query) q"
    params = [*query_params, *scope.params]
    (total,) = run(f"SELECT count(*) FROM {joined}{where}", params)[0]
    if not total:
        return SearchResponse([], 0, None, method)
    rank = f"ts_rank('{TS_RANK_WEIGHTS}', r.search_vector, q.query, {TS_RANK_NORMALIZATION})"
    first, first_params = order_by(order)
    rows = run(
        f"SELECT {RESULT_COLUMNS}, {rank} AS rank FROM {joined}{where} "
        f"ORDER BY {first}rank DESC, r.id LIMIT ?",
        [*params, *first_params, limit],
    )
    results = [result_of(row, float(row[7])) for row in rows]
    return SearchResponse(best_first(results), int(total), None, method)


def like_search(
    run: Callable[..., list[tuple[Any, ...]]],
    terms: Sequence[str],
    scope: Scope,
    order: list[tuple[str, list[Any]]],
    limit: int,
    every: bool,
    method: str,
) -> SearchResponse:
    """The portable fallback: every (or any) word somewhere in the main text columns."""
    searched = ("error_message", "slug", "error_code", "error_class", "repo", "documentation")
    per_term: list[str] = []
    params: list[Any] = []
    for term in terms:
        escaped = like_escape(term.lower())
        per_term.append(
            "(" + " OR ".join(f"lower(r.{c}) LIKE ? ESCAPE '\\'" for c in searched) + ")"
        )
        params += [f"%{escaped}%"] * len(searched)
    matched = "(" + (" AND " if every else " OR ").join(per_term) + ")"
    where = scope.where(matched)
    params += scope.params
    (total,) = run(f"SELECT count(*) FROM records r{where}", params)[0]
    first, first_params = order_by(order)
    rows = run(
        f"SELECT {RESULT_COLUMNS} FROM records r{where} ORDER BY {first}r.repo, r.id LIMIT ?",
        [*params, *first_params, limit],
    )
    return SearchResponse([result_of(row, 0.5) for row in rows], int(total), None, method)
