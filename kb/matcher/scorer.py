"""The scorer: the evidence rules weighed for one record at one place in the log.

Independent signals combine by noisy_or; what speaks against a record multiplies the score
down. Every number comes from the ScoringConfig it is given (kb.matcher.scoring).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kb.logline import Frame
from kb.matcher.cache import Record
from kb.matcher.evidence import (
    NOT_SHOWN,
    Alignment,
    Raiser,
    Says,
    TracebackEvidence,
    class_on_line,
    code_base,
    in_package,
    innermost_evidence,
    is_builtin_message,
    is_thin,
    level_factor,
    module_of,
    noisy_or,
    package_on_line,
    pattern_base,
    stack_evidence,
)
from kb.matcher.scoring import DEFAULT_SCORING, ScoringConfig
from kb.matcher.tracebacks import Traceback
from kb.matcher.verify import Hit


@dataclass(slots=True)
class Candidate:
    """A record that may explain a hit, with its score and the evidence behind it."""

    record: Record
    score: float
    method: str
    evidence: list[str]
    hit: Hit
    # The traceback speaks against the record (another module of its library, or another
    # library, raised): a near miss naming the right raise site may yet be found.
    doubted: bool = False
    # A template of one common phrase or mostly placeholders (phrase_literal_chars): never
    # ranked above a specific template that reads the same text.
    phrase: bool = False
    # How many characters of the line agree with the template (a near miss's similarity times
    # the shorter side's length).
    agreeing: float = 0.0

    @property
    def unsupported(self) -> bool:
        """Whether nothing but the words (and the class) speaks for it: no frame, no package."""
        return not any(e.startswith(("frame:", "function:", "package:")) for e in self.evidence)

    @property
    def literal_chars(self) -> int:
        """The matched pattern's literal text (more is more specific; ranks ties)."""
        pattern = self.hit.pattern
        return pattern.literal_chars if self.hit.method == "pattern" and pattern else 0


class Lookups(Protocol):
    """What scoring asks the knowledge base (kb.matcher.cache.CacheReader answers)."""

    def known_file(self, frame: Frame) -> str | None: ...

    def file_functions(self, frame: Frame) -> frozenset[str]: ...

    def known_packages(self) -> frozenset[str]: ...


class Scorer:
    """The rules weighed for one record at one place in the log, by the numbers of `config`;
    `lookups` answers what the rules need of the knowledge base."""

    def __init__(self, lookups: Lookups, config: ScoringConfig = DEFAULT_SCORING) -> None:
        self.lookups = lookups
        self.config = config

    def traceback_evidence(self, record: Record, tb: Traceback | None) -> TracebackEvidence:
        """What the traceback says of `record`: a frame at its raise site, in its function or
        file, in its package; or that the user's code, another library or another module of
        its own library raised the error."""
        if tb is None or not tb.frames:
            return NOT_SHOWN
        cfg = self.config
        found = stack_evidence(
            record.file_path,
            record.line_number,
            tb.stack,
            cfg,
            function=record.function,
            functions=tb.functions,
        )
        if found is not None and found.raiser is Raiser.RECORD_FUNCTION:
            frame = tb.frames[found.frame].frame
            if record.function in self.lookups.file_functions(frame):
                # the frame's own file still raises in a function of that name: its records
                # are the ones the frame points at, not this one of another module
                label = f"package:{record.package}"
                found = TracebackEvidence(Raiser.RECORD_PACKAGE, cfg.package, label)
        if found is not None and in_package(tb.stack[0][0], record.package):
            # The library's own frames go down to the raise: they must show the record's raise
            # site (its line, or its function) or the record is doubted: another raise of the
            # library said this (a same-worded message of another module or function).
            strong = found.raiser is Raiser.RECORD_FUNCTION or found.weight >= cfg.frame_near
            knows_functions = record.function is not None and tb.functions[0] is not None
            if found.raiser is Raiser.RECORD_PACKAGE or (not strong and knows_functions):
                return TracebackEvidence(Raiser.OTHER_MODULE)
        if found is not None:
            return found
        innermost = tb.frames[0].frame  # asked about only now: most records stop above
        known = self.lookups.known_file(innermost) is not None
        return innermost_evidence(innermost.path, record.package, known)

    def score_hit(
        self, hit: Hit, record: Record, tb: Traceback | None, exception: tuple[str, str] | None
    ) -> Candidate | None:
        """A pattern or code hit read as `record`; None when the evidence rules it out (the
        user's own raise, or Python's message without a frame)."""
        cfg = self.config
        evidence: list[str] = []
        weights: list[float] = []
        pattern = hit.pattern if hit.method == "pattern" else None
        if pattern is not None:
            base = pattern_base(pattern.generic, pattern.literal_chars, cfg)
            evidence.append("pattern")
            if hit.whole:
                weights.append(cfg.whole_message)
                evidence.append("whole-message")
        else:
            base = code_base(hit.code or "", cfg)
            evidence.append(f"code:{hit.code or ''}")
        on_line = class_on_line(hit.subject, record.error_class)
        if on_line is Says.AGREES:
            weights.append(cfg.class_on_line if pattern is not None else cfg.class_with_code)
            evidence.append("error-class")
        conflict = on_line is Says.DISAGREES
        raised = self.traceback_evidence(record, tb)
        if raised.label is not None:
            weights.append(raised.weight)
            evidence.append(raised.label)
        else:
            module = module_of(exception[0] if exception else None, hit.subject)
            if module and record.package:
                named = package_on_line(module, record.package, self.lookups.known_packages())
                if named is Says.AGREES:
                    weights.append(cfg.package)
                    evidence.append(f"package:{record.package}")
                conflict = conflict or named is Says.DISAGREES
        score = noisy_or(base, weights)
        doubted = False
        if conflict:
            score *= cfg.class_conflict
        if raised.raiser is Raiser.FOREIGN_LIBRARY:
            # another library raised it: its own raise site may hold a reworded message
            score *= cfg.foreign_library
            doubted = True
        elif raised.raiser is Raiser.OTHER_MODULE:
            score *= cfg.other_module
            doubted = True
        nothing_but_words = on_line is not Says.AGREES and not raised.supports
        if nothing_but_words and hit.level not in cfg.error_levels:
            # Nothing says an exception happened here: an INFO line, or a message's words
            # inside a longer sentence, is more likely chatter than the error.
            score *= level_factor(hit.level, cfg)
            if not hit.whole:
                score *= cfg.partial_message
        if raised.raiser is Raiser.USER_CODE:
            # Raised in the user's own code (the innermost frame is theirs and no frame is in
            # the record's package): their raise, or Python's, not this library's.
            return None
        if pattern is not None and not raised.supports and is_builtin_message(hit.subject):
            return None  # Python's own message: without a frame, no library can claim it
        if pattern is not None and pattern.generic and not raised.supports:
            score = min(score, cfg.generic_cap)
        phrase = pattern is not None and pattern.literal_chars < cfg.phrase_literal_chars
        if phrase and nothing_but_words and "package:" not in evidence[-1]:
            # one common phrase ("{x} not implemented", "Connection refused") and nothing
            # beyond its words: not reported (chatter quotes such phrases all the time)
            score = min(score, cfg.generic_cap)
        if (
            pattern is not None
            and nothing_but_words
            and is_thin(pattern.literal_chars, hit.captures, cfg)
        ):
            score *= cfg.thin_factor  # nothing but the words, and they say little of the text
        return Candidate(
            record, min(score, cfg.max_score), hit.method, evidence, hit, doubted, phrase
        )

    def score_raise_site(
        self,
        record: Record,
        hit: Hit,
        frame: Frame,
        path: str,
        exception: tuple[str, str] | None,
    ) -> Candidate:
        """A record raised at (or a few lines from) the traceback's innermost frame, whose
        message matched no pattern; `path` is the record's filePath the frame's path ends
        with."""
        cfg = self.config
        # Only records with a line are raise-site candidates (the scan never offers others).
        delta = abs(frame.line - (record.line_number or 0))
        if delta == 0:
            base = cfg.raise_site_exact
        else:
            base = cfg.raise_site_near - cfg.raise_site_step * delta
        evidence = [f"frame:{path}:{frame.line}"]
        weights: list[float] = []
        if exception is not None and record.error_class:
            if exception[0].rpartition(".")[2] == record.error_class:
                weights.append(cfg.class_on_line)
                evidence.append("error-class")
            else:
                base *= cfg.class_conflict
        score = noisy_or(base, weights)
        return Candidate(record, min(score, cfg.max_score), "frame", evidence, hit)

    def score_near_miss(
        self,
        record: Record,
        hit: Hit,
        aligned: Alignment,
        printed_class: str,
        tb: Traceback | None,
        builtin: bool,
    ) -> Candidate | None:
        """A reworded message read as `record`: `aligned` says how its text lines up with the
        record's template; `printed_class` is the exception class on the line ("" if none);
        `builtin` whether the line is a message Python raises everywhere."""
        cfg = self.config
        agrees = bool(record.error_class) and printed_class.rpartition(".")[2] == record.error_class
        raised = self.traceback_evidence(record, tb)
        if raised.raiser is Raiser.USER_CODE or (builtin and not raised.supports):
            return None  # the user's own raise, or Python's message (see score_hit)
        # Placeholders count as free (gap) only where other evidence agrees: a line with
        # nothing but its words must read almost the same as the template. Partial agreement
        # (a sentence added or dropped) counts only with a frame at the raise site, or the class.
        value = aligned.gap if agrees or raised.supports else aligned.plain
        at_site = raised.raiser is Raiser.RECORD_FUNCTION or (
            raised.raiser is Raiser.RECORD_FILE and raised.weight >= cfg.frame_near
        )
        if at_site:
            value = max(value, cfg.partial_with_frame * aligned.partial)
        elif agrees:
            long_enough = [
                covered
                for covered, chars in (
                    (aligned.query_covered, aligned.query_chars),
                    (aligned.template_covered, aligned.template_chars),
                )
                if chars >= cfg.partial_min_chars
            ]
            value = max([value, *(cfg.partial_with_class * c for c in long_enough)])
        agreeing = value * min(aligned.query_chars, aligned.template_chars)
        span = max(1, cfg.fuzzy_long_chars - cfg.fuzzy_short_chars)
        length = min(1.0, max(0.0, (agreeing - cfg.fuzzy_short_chars) / span))
        if at_site:
            cutoff = cfg.fuzzy_site_cutoff
        elif printed_class or raised.supports:
            cutoff = cfg.fuzzy_cutoff - (cfg.fuzzy_cutoff - cfg.fuzzy_long_cutoff) * length
        else:
            drop = cfg.fuzzy_classless_cutoff - cfg.fuzzy_classless_long_cutoff
            cutoff = cfg.fuzzy_classless_cutoff - drop * length
        if aligned.margin >= cfg.fuzzy_distinct_margin:
            cutoff -= cfg.fuzzy_distinct_bonus  # no other wording comes close
        if value * 100 < cutoff:
            return None
        scale = cfg.fuzzy_scale + cfg.fuzzy_long_bonus * length
        base = scale * value * (1.0 - cfg.fuzzy_unseen * (1.0 - aligned.shown))
        weights: list[float] = []
        evidence = [f"fuzzy:{value:.2f}"]
        if aligned.shown < 1.0:
            evidence.append(f"cut:{aligned.shown:.2f}")
        if agrees:
            weights.append(cfg.fuzzy_class)
            evidence.append("error-class")
        if raised.label is not None:
            weights.append(raised.weight)
            evidence.append(raised.label)
        score = noisy_or(base, weights)
        if printed_class and record.error_class and not agrees and not raised.supports:
            score *= cfg.class_conflict  # another class printed: likely another error
        if raised.raiser is Raiser.OTHER_MODULE:
            score *= cfg.other_module
        elif raised.raiser is Raiser.FOREIGN_LIBRARY:
            score *= cfg.foreign_library
        phrase = aligned.template_chars < cfg.phrase_literal_chars
        return Candidate(
            record,
            min(score, cfg.fuzzy_max),
            "fuzzy",
            evidence,
            hit,
            phrase=phrase,
            agreeing=agreeing,
        )
