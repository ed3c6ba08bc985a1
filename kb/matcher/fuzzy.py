"""Near misses: a log line that no pattern matched, compared with the message templates, for
messages reworded between versions. Imported only when a near miss is tried (rapidfuzz and
kb.patterns are not needed otherwise).

Two shortlists find the templates worth aligning: character similarity (rapidfuzz, for a few
words changed) and bm25 over the templates' words (for a sentence added or dropped, a long
message cut short: the rare words still agree where the characters do not). Each template on
them, and any record the caller names (the traceback's raise sites), is then aligned with the
line, its placeholders free to hold any value.
"""

from __future__ import annotations

import heapq
import math
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from operator import itemgetter
from typing import Final

from rapidfuzz import fuzz, process
from rapidfuzz.distance import Indel

from kb.matcher.cache import TEMPLATE_MIN_CHARS, CacheReader, normalize_template, words_of
from kb.matcher.evidence import Alignment
from kb.matcher.scoring import ScoringConfig
from kb.matcher.templates import TemplateStore, length_window
from kb.patterns import message_pieces

GAP: Final = "\x00"  # stands for a placeholder in a template being aligned with a log line
# bm25's usual constants: term-frequency saturation and length normalisation.
BM25_K1: Final = 1.2
BM25_B: Final = 0.75
# A cut message (kb.logline.cut_message) is lined up with the template's first part, tried at
# these shares of the message's length (words added or dropped before the cut move it)...
CUT_SHARES: Final = (0.75, 0.9, 1.0, 1.1, 1.25, 1.45)
# ... and shortlisted by its similarity with the templates' first parts of this share of its
# length (a reworded start is a little longer or shorter).
CUT_PREFIX_SHARE: Final = 1.1
# ... where a placeholder stands for a value of about this many characters.
GAP_VALUE_CHARS: Final = 10
# The closest templates by characters are looked for among those long enough (and short enough)
# to score this much, then this, ..., then the shortlist's cut-off, until enough do: a reworded
# message scores 80-100 with its template, and the twelfth closest at a million records scored
# 55-95 on the drift development set's message-only pastes (most of them 70-90).
WINDOW_SCORES: Final = (90.0, 80.0, 70.0)
# For coverage, characters agree only in runs this long (a letter in common says nothing).
MIN_RUN: Final = 3
# The words (and placeholders) of a template or line, for coverage counted in whole words.
WORD_TOKEN_RE: Final = re.compile(r"\w+|\x00")


@dataclass(frozen=True, slots=True)
class NearMiss:
    """A template close to a log line: how they line up, and the records of the template."""

    alignment: Alignment
    records: tuple[int, ...]


class NearMissSearch:
    """The cache's message templates, loaded once, and the search over them."""

    def __init__(self, reader: CacheReader) -> None:
        self._reader = reader
        self._store = reader.fuzzy_templates()
        self._patterns = self._store.patterns

    def lookup(
        self,
        query: str,
        config: ScoringConfig,
        *,
        cut: bool = False,
        records: Iterable[int] = (),
    ) -> list[NearMiss]:
        """The best few templates for a log line normalised by normalize_template, best first.
        `cut`: the line was cut short (its end is not the message's end); `records`: more
        records to align besides the shortlists' (those the traceback points at).

        "Unknown transport: amqps2. Did you mean amqps?" reads as "No such transport:
        {transport}.  Did you mean {alt}?" with two words changed once the placeholders are
        free, which plain similarity (the values count as differences) puts below the cutoff."""
        short = len(query) < TEMPLATE_MIN_CHARS  # only the named records are worth aligning
        shortlisted = [] if short else self._shortlist(query, config, cut)
        self._reader.load_patterns(self._patterns[i] for i in shortlisted)
        groups: dict[tuple[int, ...], None] = {}
        for i in shortlisted:
            groups[self._reader.pattern(self._patterns[i]).records] = None
        for rec_idx in records:
            if not any(rec_idx in group for group in groups):
                groups[(rec_idx,)] = None
        self._reader.load_records(group[0] for group in groups if group)
        every: list[tuple[str, Alignment, tuple[int, ...]]] = []
        for group in groups:
            if not group:
                continue
            template = gap_template(self._reader.record(group[0]).error_message)
            aligned = cut_alignment(template, query) if cut else align(template, query)
            every.append((template, aligned, group))
        scored: list[NearMiss] = []
        for template, aligned, group in every:
            if max(aligned.gap, aligned.partial) * 100 < config.fuzzy_align_cutoff:
                continue
            # how far it reads the line better than any other wording (a distinct best)
            rival = max((a.rank for t, a, _g in every if t != template), default=0.0)
            scored.append(NearMiss(aligned._replace(margin=aligned.rank - rival), group))
        scored.sort(key=lambda near: (-near.alignment.rank, -near.alignment.plain))
        named = set(records)  # the traceback's own records stay, however they rank
        kept = scored[: config.fuzzy_kept]
        return kept + [n for n in scored[config.fuzzy_kept :] if named & set(n.records)]

    def _shortlist(self, query: str, config: ScoringConfig, cut: bool) -> list[int]:
        """Template places worth aligning: the closest by characters, then the best by bm25
        over the words."""
        found = dict.fromkeys(
            closest(
                self._store,
                query,
                limit=config.fuzzy_shortlist,
                cutoff=config.fuzzy_shortlist_cutoff,
                cut=cut,
            )
        )
        for i in self._by_words(query, config.fuzzy_word_shortlist):
            found[i] = None
        return list(found)

    def _by_words(self, query: str, limit: int) -> list[int]:
        """The templates that share the line's rarer words, best first by bm25 (words too
        common to be listed add nothing: they would rank most templates alike)."""
        count = len(self._store)
        if not count or limit <= 0:
            return []
        # A word counts once a template, so a template's score is the sum of its words' idf
        # times a factor of its length alone: summed word by word, the factor once a template
        # (at a million records a line's listed words held 82,000 places: 160 ms, now 75).
        idfs: defaultdict[int, float] = defaultdict(float)
        for _word, df, rows in self._reader.template_words(words_of(query)):
            if rows is None:
                continue
            idf = math.log(1.0 + (count - df + 0.5) / (df + 0.5))
            for i in rows:
                idfs[i] += idf
        lengths, average = self._store.lengths, self._store.average_chars
        scores = (
            (
                i,
                total
                * (BM25_K1 + 1)
                / (1 + BM25_K1 * (1 - BM25_B + BM25_B * lengths[i] / average)),
            )
            for i, total in idfs.items()
        )
        # the best `limit`, ties in the order the places were first met (as a stable sort)
        return [i for i, _score in heapq.nlargest(limit, scores, key=itemgetter(1))]


def closest(store: TemplateStore, query: str, *, limit: int, cutoff: float, cut: bool) -> list[int]:
    """The places of the templates closest to the line by characters: the best `limit` by
    fuzz.ratio, at least `cutoff`, ties by place, as one comparison with every template gives
    them. Only the templates whose length lets them reach each of WINDOW_SCORES (then the
    cut-off) are compared, in turn, until enough reach it: those farther in length score less.
    `cut`: the line was cut short, and is compared with the templates' first parts."""
    # a cut line is unlike the whole template, but like its start ("You have to specify the
    # number of GPUs you woul...")
    if limit <= 0:
        return []
    width = round(len(query) * CUT_PREFIX_SHARE) if cut else None
    found: list[tuple[float, int]] = []  # (score, place)
    compared: tuple[int, int] | None = None  # the positions compared so far
    for least in (*(score for score in WINDOW_SCORES if score > cutoff), cutoff):
        start, stop = store.positions(*length_window(len(query), least, width))
        parts = [(start, stop)] if compared is None else [(start, compared[0]), (compared[1], stop)]
        for first, end in parts:
            choices = store.texts(first, end)
            if width is not None:
                choices = [template[:width] for template in choices]
            # a template under the limit-th score found so far cannot be among the best
            best = sorted((score for score, _place in found), reverse=True)
            floor = best[limit - 1] if len(best) >= limit else cutoff
            near = process.extract(
                query, choices, scorer=fuzz.ratio, score_cutoff=floor, limit=None
            )
            if near:  # their places read as one stretch
                low = min(i for _choice, _score, i in near)
                places = store.places(first + low, first + max(i for _c, _s, i in near) + 1)
                found += [(score, places[i - low]) for _choice, score, i in near]
        compared = (start, stop)
        if sum(score >= least for score, _place in found) >= limit:
            break
    found.sort(key=lambda entry: (-entry[0], entry[1]))
    return [place for _score, place in found[:limit]]


def gap_template(error_message: str) -> str:
    """The message template normalised like a query, each placeholder kept as one GAP."""
    text = "".join(GAP if piece is None else piece for piece in message_pieces(error_message))
    return normalize_template(text)


def align(template: str, query: str) -> Alignment:
    """How a log line lines up with a template whose placeholders absorb any value.

    Similarity is Indel's (characters in common, in order): plain, with the values counted as
    differences, and with text inserted where the template has a placeholder free. At most
    half the line may be such free values, so a template of mostly placeholders cannot claim
    an unrelated line, and values are free only where the template's own words are not
    replaced too ("Process {x} died" is not "Process completed"). The coverages (how much of
    each side the other explains) count characters agreeing in runs of MIN_RUN or more: a
    letter in common says nothing of a sentence found whole in a longer text."""
    literal = len(template) - template.count(GAP)
    if not query or not literal:
        return Alignment(0.0, 0.0, 0.0, 0.0)
    cost = free = in_runs = 0
    for op in Indel.opcodes(template, query):
        i1, i2, j1, j2 = op.src_start, op.src_end, op.dest_start, op.dest_end
        if op.tag == "equal":
            if i2 - i1 >= MIN_RUN:
                in_runs += i2 - i1
            continue
        source = template[i1:i2]
        at_gap = not source.replace(GAP, "").strip() and (
            GAP in source
            or (i1 > 0 and template[i1 - 1] == GAP)
            or (i2 < len(template) and template[i2] == GAP)
        )
        cost += len(source) - source.count(GAP)
        if at_gap:
            free += j2 - j1
        else:
            cost += j2 - j1
    plain = Indel.normalized_similarity(template.replace(GAP, ""), query)
    total = literal + len(query) - free
    gap = plain
    if GAP in template and free * 2 <= len(query) and total:
        gap = max(plain, 1.0 - cost / total)
    explained = (in_runs + min(free, len(query) // 2)) / len(query)
    words_query, words_template = word_coverage(template, query)
    return Alignment(
        plain=plain,
        gap=gap,
        query_covered=min(1.0, max(explained, words_query)),
        template_covered=max(in_runs / literal, words_template),
        query_chars=len(query),
        template_chars=literal,
    )


def word_coverage(template: str, query: str) -> tuple[float, float]:
    """The coverages of align() counted in whole words, in order: how much of the line the
    template's words explain (a value standing where the template has a placeholder counts,
    up to half the line) and how much of the template's words the line shows. Characters
    alone line up letter by letter across words ("tensor_parallel_size dim expected" takes
    "e", "p", "e" from the template's "expected"), which hides a sentence added or dropped
    around words that agree."""
    ids: dict[str, str] = {GAP: GAP}

    def tokens(text: str) -> tuple[list[str], str]:
        found = WORD_TOKEN_RE.findall(text)
        return found, "".join(ids.setdefault(w, chr(0xE000 + len(ids))) for w in found)

    template_words, template_ids = tokens(template)
    query_words, query_ids = tokens(query)
    query_chars = sum(map(len, query_words))
    template_chars = sum(len(w) for w in template_words if w != GAP)
    if not query_chars or not template_chars:
        return 0.0, 0.0
    agree = free = 0
    for op in Indel.opcodes(template_ids, query_ids):
        i1, i2, j1, j2 = op.src_start, op.src_end, op.dest_start, op.dest_end
        if op.tag == "equal":
            agree += sum(len(w) for w in query_words[j1:j2])
        elif template_ids[i1:i2].strip(GAP) == "" and (
            GAP in template_ids[i1:i2]
            or (i1 > 0 and template_ids[i1 - 1] == GAP)
            or (i2 < len(template_ids) and template_ids[i2] == GAP)
        ):
            free += sum(len(w) for w in query_words[j1:j2])  # values where placeholders are
    explained = agree + min(free, query_chars // 2)
    return min(1.0, explained / query_chars), agree / template_chars


def cut_alignment(template: str, query: str) -> Alignment:
    """How a message cut short lines up with the start of a template: the best alignment with
    a first part of it (the rest is simply not shown, so it costs nothing), with the share of
    the template that part is."""
    if not query or not template:
        return Alignment(0.0, 0.0, 0.0, 0.0)
    # each place in the template, as a length in the line (a placeholder's value is longer)
    lengths: list[int] = []
    run = 0
    for char in template:
        run += GAP_VALUE_CHARS if char == GAP else 1
        lengths.append(run)
    best = Alignment(0.0, 0.0, 0.0, 0.0)
    seen: set[int] = set()
    for share in CUT_SHARES:
        want = len(query) * share
        end = next((i + 1 for i, n in enumerate(lengths) if n >= want), len(template))
        if end in seen:
            continue
        seen.add(end)
        aligned = align(template[:end], query)
        if aligned.gap > best.gap:
            shown = min(1.0, lengths[end - 1] / max(1, lengths[-1]))
            best = aligned._replace(shown=shown, template_covered=0.0)  # the rest is unseen
    return best
