"""Near misses: a log line that no pattern matched, compared with every message template, for
messages reworded between versions. Imported only when a near miss is tried (rapidfuzz and
kb.patterns are not needed otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from rapidfuzz import fuzz, process
from rapidfuzz.distance import Indel

from kb.matcher.cache import CacheReader, normalize_template
from kb.matcher.evidence import ScoringConfig
from kb.patterns import message_pieces

GAP: Final = "\x00"  # stands for a placeholder in a template being aligned with a log line


@dataclass(frozen=True, slots=True)
class NearMiss:
    """A template close to a log line: plain similarity (values count as differences), the
    similarity with its placeholders free to hold any value, and its pattern."""

    plain: float
    gap: float
    pattern: int


class NearMissSearch:
    """The cache's message templates, loaded once, and the search over them."""

    def __init__(self, reader: CacheReader) -> None:
        self._reader = reader
        self._templates, self._patterns = reader.fuzzy_templates()

    def lookup(self, query: str, config: ScoringConfig) -> list[NearMiss]:
        """The best few templates for a log line normalised by normalize_template, best first.

        A wide shortlist by plain similarity, then each rescored with its placeholders free to
        hold any value: "Unknown transport: amqps2. Did you mean amqps?" reads as
        "No such transport: {transport}.  Did you mean {alt}?" with two words changed, which
        plain similarity (the values count as differences) puts below the cutoff."""
        results = process.extract(
            query,
            self._templates,
            scorer=fuzz.ratio,
            score_cutoff=config.fuzzy_shortlist_cutoff,
            limit=config.fuzzy_shortlist,
        )
        scored: list[NearMiss] = []
        for _template, score, i in results:
            p_idx = self._patterns[i]
            records = self._reader.pattern(p_idx).records
            message = self._reader.record(records[0]).error_message if records else None
            template = gap_template(message) if message is not None else ""
            plain = score / 100.0
            gap = max(plain, gap_similarity(template, query))
            if gap * 100 >= config.fuzzy_cutoff:
                scored.append(NearMiss(plain, gap, p_idx))
        scored.sort(key=lambda near: -near.gap)
        return scored[: config.fuzzy_kept]


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
