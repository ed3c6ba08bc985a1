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

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from rapidfuzz import fuzz, process
from rapidfuzz.distance import Indel

from kb.matcher.cache import CacheReader, normalize_template, words_of
from kb.matcher.evidence import ScoringConfig
from kb.patterns import message_pieces

GAP: Final = "\x00"  # stands for a placeholder in a template being aligned with a log line
# bm25's usual constants: term-frequency saturation and length normalisation.
BM25_K1: Final = 1.2
BM25_B: Final = 0.75
# A cut message (kb.logtext.cut_message) is lined up with the template's first part, tried at
# these shares of the message's length (words added or dropped before the cut move it)...
CUT_SHARES: Final = (0.75, 0.9, 1.0, 1.1, 1.25, 1.45)
# ... where a placeholder stands for a value of about this many characters.
GAP_VALUE_CHARS: Final = 10


@dataclass(frozen=True, slots=True)
class NearMiss:
    """A template close to a log line: plain similarity (values count as differences), the
    similarity with its placeholders free to hold any value, how much of the template the line
    shows (less than 1 for a message cut short), and the records of the template."""

    plain: float
    gap: float
    records: tuple[int, ...]
    shown: float = 1.0


class NearMissSearch:
    """The cache's message templates, loaded once, and the search over them."""

    def __init__(self, reader: CacheReader) -> None:
        self._reader = reader
        self._templates, self._patterns = reader.fuzzy_templates()
        count = len(self._templates)
        self._average_chars = (sum(map(len, self._templates)) / count) if count else 1.0

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
        shortlisted = self._shortlist(query, config, cut)
        self._reader.load_patterns(self._patterns[i] for i in shortlisted)
        groups: dict[tuple[int, ...], float] = {}
        for i, plain in shortlisted.items():
            groups[self._reader.pattern(self._patterns[i]).records] = plain
        for rec_idx in records:
            if not any(rec_idx in group for group in groups):
                groups[(rec_idx,)] = 0.0
        self._reader.load_records(group[0] for group in groups if group)
        scored: list[NearMiss] = []
        for group, plain in groups.items():
            if not group:
                continue
            template = gap_template(self._reader.record(group[0]).error_message)
            literal = template.replace(GAP, "")
            if cut:
                gap, shown = cut_similarity(template, query)
                plain = gap if GAP not in template else cut_similarity(literal, query)[0]
            else:
                if not plain:
                    plain = Indel.normalized_similarity(literal, query)
                gap, shown = max(plain, gap_similarity(template, query)), 1.0
            if gap * 100 >= config.fuzzy_align_cutoff:
                scored.append(NearMiss(plain, gap, group, shown))
        scored.sort(key=lambda near: (-near.gap * near.shown, -near.plain))
        named = set(records)  # the traceback's own records stay, however they rank
        kept = scored[: config.fuzzy_kept]
        return kept + [n for n in scored[config.fuzzy_kept :] if named & set(n.records)]

    def _shortlist(self, query: str, config: ScoringConfig, cut: bool) -> dict[int, float]:
        """Template places worth aligning, each with its plain similarity (0 when only the
        words found it): the closest by characters, then the best by bm25 over the words."""
        found: dict[int, float] = {}
        if not cut:  # a cut line is unlike the whole template: only its words can find it
            for _template, score, i in process.extract(
                query,
                self._templates,
                scorer=fuzz.ratio,
                score_cutoff=config.fuzzy_shortlist_cutoff,
                limit=config.fuzzy_shortlist,
            ):
                found[i] = score / 100.0
        for i in self._by_words(query, config.fuzzy_word_shortlist):
            found.setdefault(i, 0.0)
        return found

    def _by_words(self, query: str, limit: int) -> list[int]:
        """The templates that share the line's rarer words, best first by bm25 (words too
        common to be listed add nothing: they would rank most templates alike)."""
        count = len(self._templates)
        if not count or limit <= 0:
            return []
        scores: dict[int, float] = {}
        average = self._average_chars
        for _word, df, rows in self._reader.template_words(words_of(query)):
            if rows is None:
                continue
            idf = math.log(1.0 + (count - df + 0.5) / (df + 0.5))
            for i in rows:
                length = len(self._templates[i]) / average
                weight = idf * (BM25_K1 + 1) / (1 + BM25_K1 * (1 - BM25_B + BM25_B * length))
                scores[i] = scores.get(i, 0.0) + weight
        best = sorted(scores.items(), key=lambda item: -item[1])[:limit]
        return [i for i, _score in best]


def gap_template(error_message: str) -> str:
    """The message template normalised like a query, each placeholder kept as one GAP."""
    text = "".join(GAP if piece is None else piece for piece in message_pieces(error_message))
    return normalize_template(text)


def gap_similarity(template: str, query: str) -> float:
    """Indel similarity of a log line to a template whose placeholders absorb any value.

    Text inserted where the template has a placeholder costs nothing; everything else (words
    changed, added or removed) costs as usual. At most half the line may be such free values,
    so a template of mostly placeholders cannot claim an unrelated line."""
    if GAP not in template or not query:
        return 0.0
    free = cost = 0
    for op in Indel.opcodes(template, query):
        if op.tag == "equal":
            continue
        i1, i2, j1, j2 = op.src_start, op.src_end, op.dest_start, op.dest_end
        source = template[i1:i2]
        # Free only where a value stands in for a placeholder, not where it also replaces
        # the template's own words ("Process {x} died" is not "Process completed").
        at_gap = not source.replace(GAP, "").strip() and (
            GAP in source
            or (i1 > 0 and template[i1 - 1] == GAP)
            or (i2 < len(template) and template[i2] == GAP)
        )
        cost += len(source.replace(GAP, ""))
        if at_gap:
            free += j2 - j1
        else:
            cost += j2 - j1
    if free * 2 > len(query):
        return 0.0
    total = len(template.replace(GAP, "")) + len(query) - free
    return 1.0 - cost / total if total else 0.0


def cut_similarity(template: str, query: str) -> tuple[float, float]:
    """How well a message cut short reads as the start of a template: the best similarity of
    the line to a first part of the template (placeholders free), and the share of the
    template that part is. The rest of the template is simply not shown, so it costs
    nothing; the share says how much the similarity rests on."""
    if not query or not template:
        return 0.0, 0.0
    # each place in the template, as a length in the line (a placeholder's value is longer)
    lengths: list[int] = []
    run = 0
    for char in template:
        run += GAP_VALUE_CHARS if char == GAP else 1
        lengths.append(run)
    best = (0.0, 0.0)
    seen: set[int] = set()
    for share in CUT_SHARES:
        want = len(query) * share
        end = next((i + 1 for i, n in enumerate(lengths) if n >= want), len(template))
        if end in seen:
            continue
        seen.add(end)
        part = template[:end]
        similarity = (
            gap_similarity(part, query) if GAP in part else Indel.normalized_similarity(part, query)
        )
        if similarity > best[0]:
            best = (similarity, min(1.0, lengths[end - 1] / max(1, lengths[-1])))
    return best
