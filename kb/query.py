"""The user's query as search syntax: its terms and "quoted phrases", FTS5 and tsquery
expressions for each way of matching them (all, all but one, any), which of its words are too
common to rank by, and the ORDER BY terms that rank exact phrases and agreeing modules first.
Nothing the user typed becomes query syntax.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from kb.spelling import WORD_RE

TS_CONFIG: Final = "kb_english"  # kb/models.py PG_TEXT_CONFIG
MAX_QUERY_CHARS: Final = 2000  # longer input is cut: nobody types more, a paste may be huge
MAX_TERMS: Final = 40  # FTS cost grows with terms; the first 40 words carry the meaning
# A query (or a "quoted phrase") found whole in a record's message ranks that record first;
# below this many characters a "phrase" is a word, which bm25 ranks well on its own.
MIN_PHRASE_CHARS: Final = 4
TERM_RE: Final = re.compile(r'"([^"]*)"?|(\S+)')
# The characters of a word, in a GLOB's class, for a message SQLite's lower() made lower
# case: ASCII letters and digits, "_", and every character past ASCII (lower() leaves their
# case alone). FTS5's unicode61 splits words at "_" too, so a message holding a phrase with
# a word character either side holds it in FTS5's words as well (kb.broad relies on it).
GLOB_WORD: Final = "0-9a-z_\u0080-\U0010ffff"

# bm25 ranks a query's records without the words that at least this share of the records hold
# (the records must still hold them): FTS5's idf, log((N - n + 0.5) / (n + 0.5)), is floored at
# 1e-6 from n = N / 2, so such a word moves no score, while bm25 first counts the records that
# hold each word, a walk of the whole doclist of "the", "of", "in" or "not" (every record).
COMMON_SHARE: Final = 0.5
# A word's share is estimated from SAMPLE_RUNS runs of SAMPLE_RUN consecutive records spread over
# the table (all of them in a smaller knowledge base): 2,048 records, under a millisecond a word.
SAMPLE_RUNS: Final = 16
SAMPLE_RUN: Final = 128
# Shares kept per knowledge-base revision in a process (a server's, a benchmark's), at most this
# many words of at most this many revisions.
CACHED_WORDS: Final = 50_000
CACHED_REVISIONS: Final = 4
_SHARES: dict[str, dict[str, float]] = {}
_COUNTS: dict[str, dict[str, float]] = {}  # PhraseCounts', per revision, as _SHARES
# A count below this is a walk of under a millisecond at a million records: not worth a line
# in the cache folder's file (which every new process reads).
PERSISTED_MIN: Final = 1000
COMMON_FILES: Final = "common-words-{}.json"
COUNT_FILES: Final = "phrase-counts-{}.json"
RECORDS_KEY: Final = "\x00records"  # the records counted, beside the shares (no term has a NUL)
LOADED_KEY: Final = "\x00loaded"  # the counts in the cache folder are in the shares


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
    one ("any"), or all but one ("most", as fts_expression does for FTS5)."""
    phrases = [websearch_phrase(term) for term in terms]
    one = f"websearch_to_tsquery('{TS_CONFIG}', ?)"
    if mode == "all" or len(phrases) == 1:
        return one, [" ".join(phrases)]
    if mode == "any":
        return one, [" or ".join(phrases)]
    groups = [[p for j, p in enumerate(phrases) if j != skip] for skip in range(len(phrases))]
    sql = " || ".join(f"({one})" for _ in groups)
    return f"({sql})", [" ".join(group) for group in groups]


def fts_expression(terms: Sequence[str], mode: str) -> str:
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


def rank_slots(
    terms: Sequence[str], mode: str, common: frozenset[str]
) -> tuple[list[int], list[str]]:
    """kb's own bm25 (kb.ranking) on `fts_expression(terms, mode)`, ranking as FTS5's bm25
    ranks: for each phrase of the expression, in FTS5's order, the slot it counts for (-1:
    none), and the term of each slot. Where `fts_rank_expression` gives an expression, its
    words are the slots (a word in several groups of "most" counts once, a common word not at
    all); else every phrase of the expression is a slot of its own."""
    if mode in ("all", "any") or len(terms) == 1:
        positions = list(range(len(terms)))
    else:  # "most": the groups, each all the terms but one
        positions = [j for skip in range(len(terms)) for j in range(len(terms)) if j != skip]
    if fts_rank_expression(terms, mode, common) is None:
        return list(range(len(positions))), [terms[j] for j in positions]
    slot_of: dict[int, int] = {}
    for j, term in enumerate(terms):
        if term not in common:
            slot_of[j] = len(slot_of)
    return [slot_of.get(j, -1) for j in positions], [terms[j] for j in slot_of]


def selecting(terms: Sequence[str], mode: str, everywhere: frozenset[str]) -> list[str]:
    """The terms that select records: a word every record holds selects none with "all", and
    none with "most" while two other words are left (a record may lack one of those, never
    it); with "any" it selects them all, so it stays, as it does when nothing else is left."""
    kept = [term for term in terms if term not in everywhere]
    if mode == "any" or not kept or (mode == "most" and len(kept) < 2):
        return list(terms)
    return kept


def fts_rank_expression(terms: Sequence[str], mode: str, common: frozenset[str]) -> str | None:
    """What bm25 may rank the records of `fts_expression(terms, mode)` by, when it costs less:
    the expression without the common words (see COMMON_SHARE), and for "most" an OR of the
    words, each once; None when the query's own expression is the cheapest.

    bm25 scores a record by the phrases of the ranking expression that it matched, and the
    common words' add nothing. With "all" each word counts once. "most" runs only after "all"
    found nothing, so each record lacks one word and matches one group (all but that word):
    again each of its words counts once, which an OR of the other words gives, where the
    groups made bm25 count n * (n - 1) phrases. It must match every record of the query: with
    "most" a record may lack one word, so two must be left; "any" is left as it is."""
    kept = [term for term in terms if term not in common]
    if not kept or mode == "any" or len(terms) == 1:
        return None
    if mode == "all":
        return " AND ".join(fts_phrase(term) for term in kept) if len(kept) < len(terms) else None
    if len(kept) < 2:
        return None
    return " OR ".join(fts_phrase(term) for term in kept)


class CommonWords:
    """Which of a query's terms at least COMMON_SHARE of the records hold, estimated from a
    sample of the FTS5 index (`run` is a kb.sql.Runner's rows), and which every record holds
    (counted, once a sample says so); both kept per knowledge-base revision in the process,
    and the counts in `cache` too, so that a new `kb search` process does not count again."""

    def __init__(
        self,
        run: Callable[..., list[tuple[Any, ...]]],
        revision: str = "",
        cache: Path | None = None,
    ) -> None:
        self.run = run
        self.revision = revision
        self.shares, self.path = _kept(_SHARES, revision, cache, COMMON_FILES)
        self._runs: list[tuple[int, int]] | None = None
        self._sampled = 0

    def of(self, terms: Sequence[str]) -> frozenset[str]:
        """The terms at least COMMON_SHARE of the records hold."""
        shares = self._learn(terms)
        return frozenset(term for term in terms if shares[term] >= COMMON_SHARE)

    def everywhere(self, terms: Sequence[str]) -> frozenset[str]:
        """The terms every record holds: counted, so only where the count is kept (a known
        revision); a word of every sampled record costs one walk of its doclist, once."""
        shares = self._learn(terms)
        return frozenset(term for term in terms if shares[term] == 1.0)

    def _learn(self, terms: Sequence[str]) -> dict[str, float]:
        """The terms' shares, sampled (and counted) where not known yet. The kept shares may
        be a server's threads' too: each read once, none assumed to stay."""
        shares = {term: self.shares.get(term) for term in dict.fromkeys(terms)}
        unknown = [term for term, share in shares.items() if share is None]
        if unknown and len(self.shares) + len(unknown) > CACHED_WORDS:
            self.shares.clear()
        counted: dict[str, float] = {}
        for term in unknown:
            share = self.share(term)
            if share == 1.0:  # every sampled record: count them all, or never say "every"
                share = counted[term] = self._counted(term) if self.revision else 1.0 - 1e-9
            shares[term] = self.shares[term] = share
        if counted and self.path is not None:
            counted[RECORDS_KEY] = self.records()
            _write_counts(self.path, counted, COMMON_FILES)
        return {term: share for term, share in shares.items() if share is not None}

    def estimated(self, terms: Sequence[str]) -> list[float]:
        """How many records hold each term, estimated from the sample (counted for a word
        every sampled record holds)."""
        shares = self._learn(terms)
        records = self.records()
        return [shares.get(term, 0.0) * records for term in terms]

    def _counted(self, term: str) -> float:
        held = count_holding(self.run, term)
        records = self.records()
        return 1.0 if held == records else held / records

    def records(self) -> float:
        records = self.shares.get(RECORDS_KEY)
        if records is None:
            (count,) = self.run("SELECT count(*) FROM records")[0]
            records = self.shares[RECORDS_KEY] = float(count)
        return records

    def share(self, term: str) -> float:
        """The share of the sampled records that hold the term (a word or a phrase)."""
        runs = self._sample_runs()
        if not self._sampled:
            return 0.0
        one = (
            "(SELECT count(*) FROM records_fts WHERE records_fts MATCH ? AND rowid BETWEEN ? AND ?)"
        )
        params = [value for low, high in runs for value in (fts_phrase(term), low, high)]
        (held,) = self.run("SELECT " + " + ".join(one for _ in runs), params)[0]
        return int(held or 0) / self._sampled

    def _sample_runs(self) -> list[tuple[int, int]]:
        """SAMPLE_RUNS ranges of record keys, evenly spread (one range over all of a small
        table), and how many records they hold (keys may have gaps)."""
        if self._runs is None:
            self._runs = key_runs(self.run)
            if self._runs:
                one = "(SELECT count(*) FROM records WHERE key BETWEEN ? AND ?)"
                sql = "SELECT " + " + ".join(one for _ in self._runs)
                (self._sampled,) = self.run(sql, [v for run in self._runs for v in run])[0]
        return self._runs


def key_runs(
    run: Callable[..., list[tuple[Any, ...]]], runs: int = SAMPLE_RUNS, size: int = SAMPLE_RUN
) -> list[tuple[int, int]]:
    """sample_runs over the records' keys as they are now."""
    # two subqueries: SQLite finds min() or max() alone from the key, both by a scan
    low, high = run("SELECT (SELECT min(key) FROM records), (SELECT max(key) FROM records)")[0]
    return sample_runs(low, high, runs, size)


def sample_runs(
    low: int | None, high: int | None, runs: int = SAMPLE_RUNS, size: int = SAMPLE_RUN
) -> list[tuple[int, int]]:
    """`runs` ranges of `size` keys evenly spread from `low` to `high` (the records' least
    and greatest key), or one range of all of them where they are fewer; none for none."""
    if low is None or high is None:
        return []
    if high - low + 1 <= runs * size:
        return [(low, high)]
    step = (high - low + 1) // runs
    return [(start, start + size - 1) for start in (low + i * step for i in range(runs))]


class PhraseCounts:
    """How many records hold each term (a word or a phrase), counted exactly once per
    knowledge-base revision: kept in the process, and in `cache` those that cost a walk worth
    saving (PERSISTED_MIN), for the next `kb search` process. kb.ranking's idf."""

    def __init__(
        self,
        run: Callable[..., list[tuple[Any, ...]]],
        revision: str = "",
        cache: Path | None = None,
    ) -> None:
        self.run = run
        self.counts, self.path = _kept(_COUNTS, revision, cache, COUNT_FILES)

    def of(self, terms: Sequence[str]) -> list[int]:
        """Each term's count, in order: kept, else counted now."""
        unknown = [term for term in dict.fromkeys(terms) if term not in self.counts]
        if unknown and len(self.counts) + len(unknown) > CACHED_WORDS:
            self.counts.clear()
        saved: dict[str, float] = {}
        for term in unknown:
            held = count_holding(self.run, term)
            self.counts[term] = held
            if held >= PERSISTED_MIN:
                saved[term] = held
        if saved and self.path is not None:
            _write_counts(self.path, saved, COUNT_FILES)
        return [int(self.counts[term]) for term in terms]


def count_holding(run: Callable[..., list[tuple[Any, ...]]], term: str) -> int:
    """The records that hold the term: a walk of its words' record lists."""
    sql = "SELECT count(*) FROM records_fts WHERE records_fts MATCH ?"
    (held,) = run(sql, [fts_phrase(term)])[0]
    return int(held)


def _kept(
    stores: dict[str, dict[str, float]], revision: str, cache: Path | None, files: str
) -> tuple[dict[str, float], Path | None]:
    """The values kept in this process for `revision` (of at most CACHED_REVISIONS), the
    cache folder's file of them (named by `files`; None without a cache or a revision) read
    into them once, and that file."""
    if revision and revision not in stores and len(stores) >= CACHED_REVISIONS:
        stores.clear()
    kept = stores.setdefault(revision, {}) if revision else {}
    path = cache / files.format(revision) if cache and revision else None
    if path is not None and LOADED_KEY not in kept:
        kept.update(_read_counts(path))
        kept[LOADED_KEY] = 1.0
    return kept, path


def _read_counts(path: Path) -> dict[str, float]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(value, dict):
        return {}
    return {str(k): float(v) for k, v in value.items() if isinstance(v, int | float)}


def _write_counts(path: Path, counted: dict[str, float], files: str) -> None:
    """Add counts to the revision's file (other revisions' files, named by `files`, removed);
    a read-only cache only costs speed."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for old in path.parent.glob(files.format("*")):
            if old != path:
                old.unlink(missing_ok=True)
        temporary = path.with_suffix(f".tmp{os.getpid()}")
        temporary.write_text(json.dumps({**_read_counts(path), **counted}), encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        pass


def like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def order_by(order: Sequence[tuple[str, list[Any]]]) -> tuple[str, list[Any]]:
    """ORDER BY terms that go before the rank, with their parameters."""
    return "".join(f"{sql}, " for sql, _ in order), [p for _, params in order for p in params]


def message_phrases(query: str) -> list[str]:
    """What a record's message must hold whole to rank first: every "quoted phrase" of the
    query, else the query itself; lower case, spaces made single, none shorter than
    MIN_PHRASE_CHARS."""
    quoted = [m.group(1) for m in TERM_RE.finditer(query) if m.group(1) is not None]
    phrases = [" ".join(p.lower().split()) for p in (quoted or [query])]
    return [p for p in phrases if len(p) >= MIN_PHRASE_CHARS]


def phrase_held(phrases: Sequence[str], dialect: str = "sqlite") -> tuple[str, list[Any]]:
    """SQL on `records r` that is true where the message holds every phrase as whole words
    (not "should be a" in "should be able"), whatever the case, and its parameters: a GLOB
    on SQLite, a regular expression on PostgreSQL, a LIKE (text anywhere) elsewhere."""
    if dialect == "postgresql":
        sql = " AND ".join("lower(r.error_message) ~ ?" for _ in phrases)
        return sql, [_word_regex(p) for p in phrases]
    if dialect != "sqlite":
        sql = " AND ".join("lower(r.error_message) LIKE ? ESCAPE '\\'" for _ in phrases)
        return sql, [f"%{like_escape(p)}%" for p in phrases]
    # The LIKE first: it skips to the phrase's first letter, where the GLOB's class tries
    # every place. Spaces around the message: a phrase at its start or end has a non-word
    # beside it too.
    sql = " AND ".join(
        "lower(r.error_message) LIKE ? ESCAPE '\\' "
        "AND (' ' || lower(r.error_message) || ' ') GLOB ?"
        for _ in phrases
    )
    return sql, [value for p in phrases for value in (f"%{like_escape(p)}%", _word_glob(p))]


def held_word_for_word(phrases: Sequence[str], within: str) -> str | None:
    """The FTS5 expression of the records of `within` whose message holds every phrase's
    words side by side: every record phrase_held holds (its words are FTS5's tokens, side
    by side), and a few more (other punctuation between them, other endings); None for a
    phrase with no word. The whole phrase, common words at its ends too: leaving them out
    made the walk cheaper ("the first argument" 66 against 55 ms at a million records) but
    found more records, every one of them scored, where few or none hold the whole phrase
    ("prompt embeds and": 16,720 scored for 2,434 that hold its words, none its text; 160
    against 82 ms; "option expects a" 158 against 92; p95 of 84 queries 69.6 against 58.7
    ms, 2026-12-04)."""
    if not phrases or not all(WORD_RE.search(p) for p in phrases):
        return None
    worded = " AND ".join("{error_message} : " + fts_phrase(p) for p in phrases)
    return f"({within}) AND {worded}"


def _is_word(char: str) -> bool:
    return not char.isascii() or char.isalnum() or char == "_"


def _word_glob(phrase: str) -> str:
    """The GLOB of a lower-case message (spaces around it) that holds the phrase whole: a
    character that is no GLOB_WORD beside each end that is a word's."""
    text = re.sub(r"[*?\[]", lambda m: f"[{m.group()}]", phrase)
    before = f"*[^{GLOB_WORD}]" if _is_word(phrase[0]) else "*"
    after = f"[^{GLOB_WORD}]*" if _is_word(phrase[-1]) else "*"
    return before + text + after


def _word_regex(phrase: str) -> str:
    """PostgreSQL's regular expression of a message that holds the phrase whole."""
    before = "(^|[^[:alnum:]_])" if _is_word(phrase[0]) else ""
    after = "($|[^[:alnum:]_])" if _is_word(phrase[-1]) else ""
    return before + re.escape(phrase) + after


def phrase_first(phrases: Sequence[str], dialect: str = "sqlite") -> list[tuple[str, list[Any]]]:
    """Records whose message holds the query whole (or every "quoted phrase" of it, see
    message_phrases and phrase_held) rank first: a quoted message should find its record
    above related ones."""
    if not phrases:
        return []
    sql, params = phrase_held(phrases, dialect)
    return [(f"(CASE WHEN {sql} THEN 0 ELSE 1 END)", params)]


def module_first(module: str) -> tuple[str, list[Any]]:
    """Records raised in the module's file (django/core/exceptions.py) first, then those of its
    package's repository (django/django, or a file under django/), then the rest."""
    path = like_escape(module.lower().replace(".", "/"))
    package = like_escape(module.split(".")[0].lower())
    sql = (
        "(CASE WHEN lower(r.file_path) LIKE ? ESCAPE '\\' THEN 0 "
        "WHEN lower(r.file_path) LIKE ? ESCAPE '\\' OR lower(r.repo) LIKE ? ESCAPE '\\' "
        "OR lower(r.repo) LIKE ? ESCAPE '\\' THEN 1 ELSE 2 END)"
    )
    return sql, [f"{path}%", f"{package}/%", f"{package}/%", f"%/{package}"]
