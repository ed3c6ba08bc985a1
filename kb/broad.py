"""The best records of a query that finds many, ranked by FTS5's bm25 as kb/search.py's one
statement ranks them, reading from the records table only those that can be among the best.

That statement joins every record found to the records table, for the id that breaks ties
and for the message that ranks a record holding the query whole first: at a million
records the join costs about 4.5 us a record, 60 of the 109 ms of "should be a" (13,273
records). Here FTS5 alone scores the records (rowid and bm25), a second FTS5 query finds
those whose message holds the query's words side by side, scored in the same walk by kb's
own bm25 where it can (the text of the best of them is read, to see that it holds the query
as kb.query.phrase_held says; or, where a sample says few of them hold it, every one's text
in that walk, and only those that hold it are scored), and only the records scoring at most
the limit-th score are read (every tie with it too, so the id still breaks ties as before).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kb.query import fts_phrase, key_runs
from kb.ranking import FUNCTION, Ranker, Slots, Tokenizer

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
# Whether the records holding the phrase word for word mostly hold its text too is read from
# a sample of the keys, SAMPLE_RUNS runs of SAMPLE_RUN (kb.query.key_runs): the runs'
# holders, and their text (a look-up each). FTS5 takes about a millisecond to start a phrase
# of common words on each run whatever its length ("n must be an", 1.0 ms for 128 keys or for
# 32,768), so the runs are few and long. The share is nearly all or nearly none: at a million
# records, 2026-12-05, "should be a" 4,945 of 4,967, "is not supported" 14,406 of 14,429,
# "must be" every one of 112,879; "plotly graph" none of 12,645 (the messages say
# plotly.graph_objs), "exactly one of input ids" none of 3,753 (input_ids), "type is not"
# 105 of 1,252. Where fewer than MIN_SAMPLED are in the sample, the phrase's records are
# few (about 1,500 or fewer at a million): scoring them all first costs little either way.
MIN_SAMPLED: Final = 3
SAMPLE_RUNS: Final = 4
SAMPLE_RUN: Final = 512
# Below this share the text is read first, in the walk that finds the records, and only those
# that hold it are scored: every record is then read (a look-up each, 1.5-3 us) but few scored
# (kb's own bm25, 5-7 us each), where scoring first scores all and, finding fewer than the
# limit that hold the text, reads every one as well. At a million records, warm, 2026-12-05:
# "ValueError plotly graph" 110 against 216 ms, "plotly graph objs" 90 against 162,
# "exactly one of input ids" 76 against 98. Above it, scoring first reads the text of the
# best alone (the first chunk usually fills the limit).
TEXT_FIRST_SHARE: Final = 1 / 3
# Where the scores come first, the best this many of them are read at first (SQLite keeps
# the best in its sort, and only they reach Python): the first chunk of text usually fills
# the limit, and every record that can be among the best is among them when the last one
# read scores worse than the limit-th holder; else every score is read, as before. At a
# million records, 2026-12-05, the walk of "ValueError be a" (40,187 holders) with kb_bm25
# in C: 61 ms for the best 256, 76 for every one in order.
HELD_FIRST: Final = 4 * TEXT_CHUNK


@dataclass(frozen=True)
class SideBySide:
    """The records whose message holds the phrases' words side by side, found without their
    positions: `words`, an FTS5 expression of the records whose message holds each word
    somewhere (those and more), and `holds`, true of a message whose tokens hold each
    phrase's side by side, as FTS5 finds them (the index's own tokenizer)."""

    words: str
    holds: Callable[[str], bool]


@dataclass(frozen=True)
class Held:
    """The records whose message holds the query's phrase (kb.query.phrase_held): those of
    `worded` (an FTS5 expression: the phrase word for word in the message column) whose
    message also holds it as `text` (SQL on `records r`, with its parameters). `side_by_side`:
    the same records of `worded` found another way, for the sample (None: FTS5's phrase)."""

    worded: str
    text: tuple[str, list[Any]]
    side_by_side: SideBySide | None = None
    # text_first's answer where it was asked already (the search's walk beside its count)
    read_text_first: bool | None = None


def side_by_side(phrases: Sequence[str], within: str, tokenizer: Tokenizer) -> SideBySide | None:
    """The records of the FTS5 expression `within` whose message holds every phrase's words
    side by side (kb.query.held_word_for_word's), as a SideBySide; None for a phrase with no
    word."""
    words = [tokenizer.words(phrase) for phrase in phrases]
    wanted = [tokenizer.tokens(phrase) for phrase in phrases]
    if not all(words) or not all(wanted):
        return None
    every = " AND ".join(fts_phrase(word) for word in dict.fromkeys(w for ws in words for w in ws))
    expression = f"({within}) AND {{error_message}} : ({every})"

    def holds(message: str) -> bool:
        tokens = tokenizer.tokens(message)
        return all(_side_by_side(tokens, phrase) for phrase in wanted)

    return SideBySide(expression, holds)


def _side_by_side(tokens: list[str], phrase: list[str]) -> bool:
    """Whether `phrase`'s tokens are side by side somewhere in `tokens`."""
    first, width = phrase[0], len(phrase)
    return any(
        token == first and tokens[at : at + width] == phrase for at, token in enumerate(tokens)
    )


# The records of an FTS5 expression (given first), or those of them whose text holds the phrase
# too (SQL on `records r` and its parameters, given second), as (key, score) best first, the
# best `most` of them (given third; None for every one); None where the walk could not run.
HeldScores = Callable[
    [str, tuple[str, list[Any]] | None, int | None], list[tuple[int, float]] | None
]
# The records of the query's expression but those given (first), as (key, score) best first,
# the best `most` of them (second; None for every one); None where the walk could not run.
RestScores = Callable[[Sequence[int], int | None], list[tuple[int, float]] | None]


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
    rest_scores: RestScores | None = None,
) -> list[tuple[Any, ...]]:
    """The best `limit` records of the FTS5 `expression`, ordered as `ORDER BY <holds the
    phrase first>, rank, r.id`: `columns` of `records r` (r.id first), then the `rank` (an
    FTS5 bm25 call, on the `ranked` expression: the same, or one that matches more records).
    `held`: the records that hold the phrase; None for no phrase. `held_scores`, given
    `held.worded`, scores its records as `rank` would in the walk that finds them (kb's own
    bm25, kb.ranking), where FTS5's bm25 must walk the ranked expression's records again;
    `rest_scores` the same for the records that do not hold it."""
    found: list[tuple[Any, ...]] = []
    if limit <= 0:
        return found
    if held is not None:  # its records are the expression's
        found = _best_holding(run, columns, rank, ranked, held, limit, held_scores)
        if len(found) >= limit:
            return [row[:-1] for row in found[:limit]]
    # every record that holds the phrase was found above: the rest come after them
    keys = [row[-1] for row in found]
    if rest_scores is not None:
        best = _best_scored(run, columns, lambda most: rest_scores(keys, most), limit - len(found))
        if best is not None:
            return [row[:-1] for row in found + best]
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
    one, when fewer hold it). FTS5 finds and scores those that hold it word for word; where
    a sample says most of them hold its text, their text is read best first, TEXT_CHUNK at
    a time, until `limit` hold it and the next score is worse than the limit-th's; else the
    text is read in the walk that finds them, and only those holding it are scored."""
    if held.read_text_first if held.read_text_first is not None else text_first(run, held):
        scores = _held_scores(run, rank, ranked, held.worded, held.text, held_scores, None)
        return _read_best(run, columns, dict(scores), limit)
    best = _best_scored(
        run,
        columns,
        lambda most: _held_scores(run, rank, ranked, held.worded, None, held_scores, most),
        limit,
        lambda scores: _holding(run, held, scores, limit),
    )
    return best or []  # FTS5's bm25 scores where kb's own cannot: never None


def _read_best(
    run: Callable[..., list[tuple[Any, ...]]],
    columns: str,
    scores: dict[int, float],
    limit: int,
) -> list[tuple[Any, ...]]:
    """The best `limit` of the records `scores` gives (key to score) by (score, id), as
    `_best` gives them: the records scoring at most the limit-th score are read (every tie
    with it, for the id that breaks ties) and sorted."""
    threshold = sorted(scores.values())[limit - 1] if len(scores) >= limit else None
    chosen = {
        key: score for key, score in scores.items() if threshold is None or score <= threshold
    }
    if not chosen:
        return []
    marks = ", ".join("?" * len(chosen))
    rows = run(f"SELECT {columns}, r.key FROM records r WHERE r.key IN ({marks})", list(chosen))
    best = sorted((chosen[row[-1]], row[0], row) for row in rows)[:limit]
    return [(*row[:-1], score, row[-1]) for score, _, row in best]


def _best_scored(
    run: Callable[..., list[tuple[Any, ...]]],
    columns: str,
    scored: Callable[[int | None], Sequence[tuple[Any, ...]] | None],
    limit: int,
    keep: Callable[[Sequence[tuple[Any, ...]]], dict[int, float]] = dict,
) -> list[tuple[Any, ...]] | None:
    """The best `limit` records by the scores `scored` gives best first (the best so many,
    or every one for None), of those `keep` keeps (all, or those holding the phrase's text),
    as `_best` gives them: the best HELD_FIRST read first, every score only where they do not
    settle the page; None where the scores could not be read."""
    scores = scored(HELD_FIRST)
    if scores is None:
        return None
    kept = keep(scores)
    if len(scores) >= HELD_FIRST and not _settled(kept, scores[-1][1], limit):
        scores = scored(None)
        if scores is None:
            return None
        kept = keep(scores)
    return _read_best(run, columns, kept, limit)


def _settled(kept: dict[int, float], last: float, limit: int) -> bool:
    """Whether the best `limit` records are among those `kept` (key to score) of scores read
    best first, the last of them `last`: every record not read scores `last` or worse, worse
    than the limit-th kept (a tie with it could go either way by id)."""
    return len(kept) >= limit and last > sorted(kept.values())[limit - 1]


def _holding(
    run: Callable[..., list[tuple[Any, ...]]],
    held: Held,
    scores: Sequence[tuple[Any, ...]],
    limit: int,
) -> dict[int, float]:
    """Of the records `scores` gives (key and score, best first), those whose text holds the
    phrase, read TEXT_CHUNK at a time until `limit` hold it and the next chunk's best score
    is worse than the limit-th's: every one that can be among the best."""
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
    return holders


def text_first(run: Callable[..., list[tuple[Any, ...]]], held: Held) -> bool:
    """Whether the text of the records holding the phrase word for word is read in the walk
    that finds them (a sample says few hold the text), else their scores come first."""
    sampled, share = text_share(run, held)
    return sampled >= MIN_SAMPLED and share < TEXT_FIRST_SHARE


def text_share(run: Callable[..., list[tuple[Any, ...]]], held: Held) -> tuple[int, float]:
    """How many records of the sample (SAMPLE_RUNS runs of SAMPLE_RUN keys) hold the phrase
    word for word, and what share of them hold its text too (0.0 for none)."""
    runs = key_runs(run, runs=SAMPLE_RUNS, size=SAMPLE_RUN)
    if not runs:
        return 0, 0.0
    one = "SELECT rowid FROM records_fts WHERE records_fts MATCH ? AND rowid BETWEEN ? AND ?"
    text_sql, text_params = held.text
    sample = f"r.key IN ({' UNION ALL '.join(one for _ in runs)})"
    found = held.side_by_side
    if found is None:
        ((sampled, holding),) = run(
            f"SELECT count(*), total({text_sql}) FROM records r WHERE {sample}",
            [*text_params, *(v for first, last in runs for v in (held.worded, first, last))],
        )
        return int(sampled), float(holding) / sampled if sampled else 0.0
    # FTS5 looks for a phrase's next record past the end of the run it was asked for, to the
    # end of the index where none holds it: a run cost as much as the phrase's whole walk
    # ("arguments must be of type", 3 records at a million: 16 ms a run, 65 for the sample).
    # The records holding its words anywhere stop at the run's end, and the tokens of their
    # messages say which hold them side by side.
    rows = run(
        f"SELECT r.error_message, {text_sql} FROM records r WHERE {sample}",
        [*text_params, *(v for first, last in runs for v in (found.words, first, last))],
    )
    texts = [bool(text) for message, text in rows if found.holds(message or "")]
    return len(texts), sum(texts) / len(texts) if texts else 0.0


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
    `total` records, the most it may score. None where the ranker cannot run. Given the
    text's SQL, only the records that hold it are scored (read in the same walk)."""
    phrase_slots, slot_terms = slots

    def scores(
        worded: str, text: tuple[str, list[Any]] | None, most: int | None
    ) -> list[tuple[int, float]] | None:
        phrase_slots_all = (*phrase_slots, *[-1] * phrases)
        counted = Slots(phrase_slots_all, tuple(counts(slot_terms)), total)
        sql, params = _holders_sql(
            f"{FUNCTION}(records_fts, {counted.literal()}) AS rank", worded, text
        )
        return _own_scores(ranker, sql, params, most)

    return scores


def own_rest_scores(
    ranker: Ranker,
    counts: Callable[[Sequence[str]], list[int]],
    slots: tuple[list[int], list[str]],
    expression: str,
    total: int,
) -> RestScores:
    """Scores of the records of the FTS5 `expression` but those given, by kb's own bm25
    (kb.ranking) in the walk that finds them: the expression's phrases take the ranking's
    `slots` (kb.query.rank_slots; `counts` gives their terms' record counts), so they score
    as FTS5's bm25 on the ranked expression does; of a query that finds `total` records,
    the most it may score."""
    phrase_slots, slot_terms = slots

    def scores(excluded: Sequence[int], most: int | None) -> list[tuple[int, float]] | None:
        counted = Slots(tuple(phrase_slots), tuple(counts(slot_terms)), total)
        sql = (
            f"SELECT records_fts.rowid, {FUNCTION}(records_fts, {counted.literal()}) AS rank "
            "FROM records_fts WHERE records_fts MATCH ?"
        )
        if excluded:
            sql += f" AND records_fts.rowid NOT IN ({', '.join('?' * len(excluded))})"
        return _own_scores(ranker, sql, [expression, *excluded], most)

    return scores


def _own_scores(
    ranker: Ranker, sql: str, params: list[Any], most: int | None
) -> list[tuple[int, float]] | None:
    """The (key, score) rows of the statement `sql` (SELECT key, kb_bm25 AS rank ...) on the
    ranker, best first, the best `most` (None: every one); None where it could not run."""
    rows = ranker.rows(sql + _best_first(most), [*params, *([most] if most else [])])
    if rows is None:
        return None
    return [(int(key), float(score)) for key, score in rows]


def _held_scores(
    run: Callable[..., list[tuple[Any, ...]]],
    rank: str,
    ranked: str,
    worded: str,
    text: tuple[str, list[Any]] | None,
    held_scores: HeldScores | None,
    most: int | None,
) -> list[tuple[Any, ...]]:
    """The records of `worded` (those whose text holds the phrase too, given its SQL) with
    their scores, best first, the best `most` (None: every one): in the walk that finds them
    where `held_scores` can (one walk, not two: "AssertionError be not", 1,291 records of
    52,899, 52 against 83 ms at a million records, 2026-12-03), else found, then scored by
    FTS5's bm25."""
    found = held_scores(worded, text, most) if held_scores is not None else None
    if found is not None:
        return list(found)
    # The holders first, on their own: where none holds the phrase (the usual case for a
    # query of common words, and always for a word the speller corrected), the walk of the
    # ranked expression is saved; 13 of the 14 ms of "inuts_embeds" at a million.
    sql, params = _holders_sql("", worded, text)
    keys = [key for (key,) in run(sql, params)]
    if not keys:
        return []
    # the keys as one JSON array (SQLite's JSON functions, built in since 3.38): any number
    return run(
        f"SELECT records_fts.rowid, {rank} AS rank FROM records_fts WHERE records_fts "
        f"MATCH ? AND +records_fts.rowid IN (SELECT value FROM json_each(?)){_best_first(most)}",
        [ranked, json.dumps(keys), *([most] if most else [])],
    )


def _best_first(most: int | None) -> str:
    """The ORDER BY of the scores, best first, and the LIMIT of the best `most` (a parameter)
    where it is given."""
    return " ORDER BY rank" + (" LIMIT ?" if most else "")


def _holders_sql(
    scored: str, worded: str, text: tuple[str, list[Any]] | None
) -> tuple[str, list[Any]]:
    """The SELECT of the keys (and the `scored` column, if any) of the records of the FTS5
    expression `worded`, or of those of them whose text holds the phrase (`text`: SQL on
    `records r` and its parameters), and its parameters."""
    selected = ", ".join(c for c in ("records_fts.rowid", scored) if c)
    if text is None:
        return f"SELECT {selected} FROM records_fts WHERE records_fts MATCH ?", [worded]
    text_sql, text_params = text
    return (
        f"SELECT {selected} FROM records_fts JOIN records r ON r.key = records_fts.rowid "
        f"WHERE records_fts MATCH ? AND {text_sql}",
        [worded, *text_params],
    )


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
