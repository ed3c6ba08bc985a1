"""The best records of a query that finds many, ranked by FTS5's bm25 as kb/search.py's one
statement ranks them, reading from the records table only those that can be among the best.

That statement joins every record found to the records table, for the id that breaks ties
and for the message that ranks a record holding the query whole first: at a million
records the join costs about 4.5 us a record, 60 of the 109 ms of "should be a" (13,273
records). Here FTS5 alone scores the records (rowid and bm25), a second FTS5 query finds
those whose message holds the query's words side by side, scored in the same walk by kb's
own bm25 where it can (the text of the best of them is read, to see that it holds the query
as kb.query.phrase_held says), and only the records scoring at most the limit-th score are
read (every tie with it too, so the id still breaks ties as before).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kb.ranking import FUNCTION, Ranker, Slots

# kb's own bm25 scores every record that holds a broad query's phrase in the walk that finds
# them, where FTS5's bm25 would walk the ranked words' records again after it: 2-3 us a record
# since it reads only the columns that hold each phrase. At a million records, 2026-12-04, the
# same answers: "ValueError one of" (30,053 holders) 172 against 242 ms when it scored the
# first 10,000 and FTS5's bm25 the rest, "is not" (69,240) 478 against 616, `"is not" value`
# 457 against 684, "is not supported" 85 against 99; "must be" 450 against 420 the one loss.
# Below this many records found, the one statement is the faster: the second walk of the
# query's words costs more than the joins it saves. At a million records, warm, FTS5's bm25
# (kb_bm25 off), the statement against this module, 2026-12-02: "ValueError be defined"
# (1,726 records) 108 against 142 ms, "ValueError input features" (2,158) 128 against 147;
# "prompt batch size" (4,207) 80 against 42, "should be a" (13,273) 217 against 141, "the
# first argument" (21,840) 224 against 134.
BROAD_RECORDS: Final = 3_000
# The records holding the phrase word for word whose text is read at once, best first: the
# first read finds the limit in the usual case (a message that holds the words side by side
# holds their text), and each read is one look-up of that many keys.
TEXT_CHUNK: Final = 64
# No score is above this: the threshold of a query that finds fewer records than the limit.
NO_THRESHOLD: Final = 1e308


@dataclass(frozen=True)
class Held:
    """The records whose message holds the query's phrase (kb.query.phrase_held): those of
    `worded` (an FTS5 expression: the phrase word for word in the message column) whose
    message also holds it as `text` (SQL on `records r`, with its parameters)."""

    worded: str
    text: tuple[str, list[Any]]


# The records that hold a phrase, (key, score) best first; None where the walk could not run.
HeldScores = Callable[[str], list[tuple[int, float]] | None]


def best_records(
    run: Callable[..., list[tuple[Any, ...]]],
    *,
    columns: str,
    rank: str,
    ranked: str,
    expression: str,
    held: Held | None,
    limit: int,
    held_scores: HeldScores | None = None,
) -> list[tuple[Any, ...]]:
    """The best `limit` records of the FTS5 `expression`, ordered as `ORDER BY <holds the
    phrase first>, rank, r.id`: `columns` of `records r` (r.id first), then the `rank` (an
    FTS5 bm25 call, on the `ranked` expression: the same, or one that matches more records).
    `held`: the records that hold the phrase; None for no phrase. `held_scores`, given
    `held.worded`, scores its records as `rank` would in the walk that finds them (kb's own
    bm25, kb.ranking), where FTS5's bm25 must walk the ranked expression's records again."""
    found: list[tuple[Any, ...]] = []
    if limit <= 0:
        return found
    if held is not None:  # its records are the expression's
        found = _best_holding(run, columns, rank, ranked, held, limit, held_scores)
        if len(found) >= limit:
            return [row[:-1] for row in found[:limit]]
    # every record that holds the phrase was found above: the rest come after them
    keys = [row[-1] for row in found]
    rest, params = "records_fts MATCH ?", [ranked]
    if ranked != expression:
        # `+` keeps SQLite from asking FTS5 for each of those rowids in turn (a seek of every
        # word for each), where one walk of the expression's record lists finds them all
        rest += " AND +records_fts.rowid IN (SELECT rowid FROM records_fts WHERE "
        rest += "records_fts MATCH ?)"
        params.append(expression)
    if keys:
        rest += f" AND records_fts.rowid NOT IN ({', '.join('?' * len(keys))})"
    found += _best(run, columns, rank, rest, [*params, *keys], limit - len(found))
    return [row[:-1] for row in found]


def _best_holding(
    run: Callable[..., list[tuple[Any, ...]]],
    columns: str,
    rank: str,
    ranked: str,
    held: Held,
    limit: int,
    held_scores: HeldScores | None = None,
) -> list[tuple[Any, ...]]:
    """The best `limit` of the records that hold the phrase, as `_best` gives them (every
    one, when fewer hold it). FTS5 finds and scores those that hold it word for word; their
    text is read best first, TEXT_CHUNK at a time, until `limit` hold it and the next score
    is worse than the limit-th's."""
    scores = _held_scores(run, rank, ranked, held.worded, held_scores)
    if not scores:
        return []
    text_sql, text_params = held.text
    holders: dict[int, float] = {}
    threshold: float | None = None
    for start in range(0, len(scores), TEXT_CHUNK):
        chunk = scores[start : start + TEXT_CHUNK]
        if not chunk or (threshold is not None and chunk[0][1] > threshold):
            break
        marks = ", ".join("?" * len(chunk))
        holding = {
            row[0]
            for row in run(
                f"SELECT r.key FROM records r WHERE r.key IN ({marks}) AND {text_sql}",
                [*(key for key, _ in chunk), *text_params],
            )
        }
        holders.update((key, score) for key, score in chunk if key in holding)
        if len(holders) >= limit:
            threshold = sorted(holders.values())[limit - 1]
    chosen = {
        key: score for key, score in holders.items() if threshold is None or score <= threshold
    }
    if not chosen:
        return []
    marks = ", ".join("?" * len(chosen))
    rows = run(f"SELECT {columns}, r.key FROM records r WHERE r.key IN ({marks})", list(chosen))
    best = sorted((chosen[row[-1]], row[0], row) for row in rows)[:limit]
    return [(*row[:-1], score, row[-1]) for score, _, row in best]


def own_held_scores(
    ranker: Ranker,
    counts: Callable[[Sequence[str]], list[int]],
    slots: tuple[list[int], list[str]],
    phrases: int,
    total: int,
) -> HeldScores:
    """Scores of the records that hold the phrases by kb's own bm25 (kb.ranking) in the walk
    of kb.query.held_word_for_word's expression: the query's expression, whose phrases take
    the ranking's `slots` (kb.query.rank_slots; `counts` gives their terms' record counts),
    then one phrase for each of the `phrases`, which rank nothing; of a query that finds
    `total` records, the most it may score. None where the ranker cannot run."""
    phrase_slots, slot_terms = slots

    def scores(worded: str) -> list[tuple[int, float]] | None:
        phrase_slots_all = (*phrase_slots, *[-1] * phrases)
        counted = Slots(phrase_slots_all, tuple(counts(slot_terms)), total)
        sql = (
            f"SELECT rowid, {FUNCTION}(records_fts, {counted.literal()}) AS rank "
            "FROM records_fts WHERE records_fts MATCH ? ORDER BY rank"
        )
        rows = ranker.rows(sql, [worded])
        if rows is None:
            return None
        return [(int(key), float(score)) for key, score in rows]

    return scores


def _held_scores(
    run: Callable[..., list[tuple[Any, ...]]],
    rank: str,
    ranked: str,
    worded: str,
    held_scores: HeldScores | None,
) -> list[tuple[Any, ...]]:
    """The records of `worded` with their scores, best first: in the walk that finds them
    where `held_scores` can (one walk, not two: "AssertionError be not", 1,291 records of
    52,899, 52 against 83 ms at a million records, 2026-12-03), else found, then scored by
    FTS5's bm25."""
    found = held_scores(worded) if held_scores is not None else None
    if found is not None:
        return list(found)
    # The holders first, on their own: where none holds the phrase (the usual case for a
    # query of common words, and always for a word the speller corrected), the walk of the
    # ranked expression is saved; 13 of the 14 ms of "inuts_embeds" at a million.
    keys = _rowids(run, worded)
    if not keys:
        return []
    # the keys as one JSON array (SQLite's JSON functions, built in since 3.38): any number
    return run(
        f"SELECT records_fts.rowid, {rank} AS rank FROM records_fts WHERE records_fts "
        "MATCH ? AND +records_fts.rowid IN (SELECT value FROM json_each(?)) ORDER BY rank",
        [ranked, json.dumps(keys)],
    )


def _rowids(run: Callable[..., list[tuple[Any, ...]]], expression: str) -> list[int]:
    """The keys of the records an FTS5 expression finds, none scored or read."""
    return [
        key
        for (key,) in run("SELECT rowid FROM records_fts WHERE records_fts MATCH ?", [expression])
    ]


def _best(
    run: Callable[..., list[tuple[Any, ...]]],
    columns: str,
    rank: str,
    where: str,
    params: Sequence[Any],
    limit: int,
) -> list[tuple[Any, ...]]:
    """The best `limit` of the records `where` selects by (rank, id): `columns`, the rank
    and the key. The scores are kept once (keys and scores alone); the records scoring at
    most the limit-th score are read and sorted."""
    sql = (
        f"WITH s AS MATERIALIZED (SELECT records_fts.rowid AS key, {rank} AS rank "
        f"FROM records_fts WHERE {where}) "
        f"SELECT {columns}, s.rank, s.key FROM s JOIN records r ON r.key = s.key "
        "WHERE s.rank <= coalesce((SELECT rank FROM s ORDER BY rank LIMIT 1 OFFSET ?), ?) "
        "ORDER BY s.rank, r.id LIMIT ?"
    )
    return run(sql, [*params, limit - 1, NO_THRESHOLD, limit])
