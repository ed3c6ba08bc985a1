"""Every number of the scoring in one frozen value, each with its reason: pass another
ScoringConfig to score with other settings (`ScoringConfig(min_score=0.6)`, or
`DEFAULT_SCORING._replace(min_score=0.6)`).

A NamedTuple, not a dataclass, as are the other small frozen values a cold `kb match` defines
on its way (kb.logline.Frame, kb.matcher.verify.Hit, ...): a dataclass compiles its generated
methods when its class is made, 0.4-0.9 ms each and 2.3 ms for this one, 13 ms for the 19 a
match of big.log made, all before the match's work begins; a NamedTuple's class costs 0.1 ms
(0.6 for this one) and its values are quicker to make (2026-12-05).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, NamedTuple


class ScoringConfig(NamedTuple):
    """Every weight, factor, cap and cut-off of the scoring, with the reason for each."""

    # -- what is reported
    # Reported scores are calibrated (`calibration` below): an answer is reported when it is
    # more likely right than wrong. On the development sets that is exactly where the raw
    # scores step from none right (0.40-0.50: 0 of 20) to 9 in 10 (0.50 and up): a clean log
    # (noise hitting generic patterns only) comes back empty; one specific pattern on its own
    # or a generic one with a frame clears it.
    min_score: float = 0.5
    # Scores never claim certainty: 1.0 is reserved.
    max_score: float = 0.99
    # How often an answer is right at each raw score, measured on the development sets (the
    # drift set's dev half, both real-log sets, paste.log and big.log: 608 answers, tables in
    # benchmarks/CALIBRATION.md): (raw score, share right) knots, joined by straight lines,
    # strictly increasing so the order of answers is kept. Raw below 0.5: 0 of 60 right;
    # 0.5-0.9: 225 of 249; 0.9-1.0: 296 of 299.
    calibration: tuple[tuple[float, float], ...] = (
        (0.0, 0.0),
        (0.4, 0.02),
        (0.45, 0.1),
        (0.49, 0.2),
        (0.5, 0.87),
        (0.8, 0.91),
        (0.9, 0.93),
        (0.95, 0.98),
        (0.99, 0.99),
        (1.0, 1.0),
    )

    # -- what the words alone are worth (the base score)
    # A pattern with no literal text to speak of matches noise as readily as errors...
    generic_pattern_base: float = 0.3
    # ... a specific one from this, up by specific_bonus as its literal text grows to
    # specific_literal_chars: the more of a line the words fix, the less is left to chance.
    pattern_base: float = 0.45
    specific_bonus: float = 0.35
    specific_literal_chars: int = 40
    # An error code found on a line: a long code with digits or "_" (ERR_BAD_RESPONSE, E0425)
    # is rarely anything else; a short word-like one (EPERM) more often is.
    code_base: float = 0.45
    distinctive_code_base: float = 0.6
    distinctive_code_chars: int = 5

    # -- evidence for a record, combined as independent signals (noisy_or)
    # The record's exception class printed before the message.
    class_on_line: float = 0.35
    # ... before a line with the record's error code (the code says most of it already).
    class_with_code: float = 0.2
    # A frame at the record's filePath:lineNumber: the raise site itself.
    frame_exact: float = 0.7
    # ... within frame_near_lines of it (versions move lines a little).
    frame_near: float = 0.55
    frame_near_lines: int = 3
    # ... in the same file, within frame_file_lines; further away, half that.
    frame_file: float = 0.3
    frame_file_lines: int = 40
    frame_far: float = 0.15
    # ... in the same file and in the record's function, however far: another version of the
    # library, whose lines moved (the function is what stays).
    frame_function: float = 0.55
    # A frame in the record's package, in a function of the record's function's name but in
    # another file: the function moved to another module between versions.
    moved_function: float = 0.35
    # The record's package in the traceback's paths, or named by a dotted exception class.
    package: float = 0.15
    # The pattern covers the whole message, not a piece of a longer one.
    whole_message: float = 0.25

    # -- what speaks against a record (factors on the score)
    # Another exception class (or another known package's class) printed before the message.
    class_conflict: float = 0.8
    # Raised inside another known library, the record's file nowhere in the traceback.
    foreign_library: float = 0.55
    # Raised inside the record's own library, its frames shown down to the raise, and none of
    # them in the record's file or function: another raise of the library said it (a
    # same-worded message of another module, or one raised from compiled code).
    other_module: float = 0.45
    # A generic pattern without a frame or package behind it stays below min_score.
    generic_cap: float = 0.45
    # A template with less literal text than this is one common phrase ("{func} not
    # implemented", "{0} is not supported", "Permission denied"): alone, without a class, a
    # frame or its package, it is capped at generic_cap; and a specific template reading the
    # same text (a near miss too) ranks above it.
    phrase_literal_chars: int = 24
    # Without a class or a frame: a message on an INFO/DEBUG (WARN) line is more likely
    # chatter quoting it than the error, and so is one inside a longer sentence...
    level_factors: Mapping[str, float] = MappingProxyType(
        {"TRACE": 0.7, "DEBUG": 0.7, "INFO": 0.7, "NOTICE": 0.7, "WARN": 0.85}
    )
    partial_message: float = 0.85
    # ... unless the line's level says an error happened.
    error_levels: frozenset[str] = frozenset({"ERROR", "CRITICAL", "FATAL", "PANIC"})
    # A pattern with fewer literal characters than thin_literal_chars, matched with no class
    # and no frame, is "thin" when its literal text is under thin_share of the text it matched
    # (the rest being captured values): "Could not find {a}.{b}" on pip's "Could not find a
    # version that satisfies ..." Thin matches are discounted below the default min_score.
    thin_literal_chars: int = 30
    thin_share: float = 0.35
    thin_factor: float = 0.7

    # -- a record found by its raise site alone (the message matched no pattern)
    # A frame exactly at its filePath:lineNumber: a little above min_score...
    raise_site_exact: float = 0.55
    # ... a few lines off, below it unless the exception class agrees.
    raise_site_near: float = 0.42
    raise_site_step: float = 0.03  # less for each line further off
    # ... and this much of itself when the exception's message was read and is nothing like
    # the record's (the drift set's variable messages: a neighbouring raise of the function
    # claimed "Your setup doesn't support bf16/gpu" at 0.565).
    message_disagrees: float = 0.6

    # -- near misses (reworded messages, found by rapidfuzz and by their words)
    # The base is this times the similarity: a near miss alone never looks certain.
    fuzzy_scale: float = 0.62
    fuzzy_class: float = 0.2  # the exception class agrees
    # A message cut short shows only part of its template: the base loses this much of itself
    # for all of the template unseen (a third seen keeps about 83 %). Little: what is shown
    # agrees, and how much agrees already weighs (the cut-offs and fuzzy_long_bonus).
    fuzzy_unseen: float = 0.25
    fuzzy_max: float = 0.9  # a reworded message is never as sure as one that matched
    # Similarity (0-100) a near miss needs: below ~86 only the class on the line lifts it
    # over min_score, so a line without a class needs that much on its own.
    fuzzy_cutoff: float = 78.0
    fuzzy_classless_cutoff: float = 86.0
    # The cut-offs come down as the text that agrees grows from fuzzy_short_chars to
    # fuzzy_long_chars: 80 characters of a specific message agreeing at 0.75 are no accident,
    # 20 at 0.8 may be. The base grows with it by up to fuzzy_long_bonus.
    fuzzy_long_cutoff: float = 72.0
    fuzzy_classless_long_cutoff: float = 78.0
    fuzzy_short_chars: int = 30
    fuzzy_long_chars: int = 90
    fuzzy_long_bonus: float = 0.1
    # A template that reads the line this much better (Alignment.rank) than any other wording
    # is distinct, not one of several near guesses: its cut-off is fuzzy_distinct_bonus lower
    # (the drift set's pairing rule asks the same of a rewording: best by a margin).
    fuzzy_distinct_margin: float = 0.08
    fuzzy_distinct_bonus: float = 6.0
    # With a frame at the record's raise site (its line, or its function, also moved), the
    # message need only resemble the template this much: the frame says where, the words which
    # of the few raises there.
    fuzzy_site_cutoff: float = 60.0
    # A template found whole in the line, or the line whole in the template (a sentence added
    # or dropped), counts as this much similarity when a frame is at the raise site, and as
    # this much when only the class agrees (then the side found whole must be
    # partial_min_chars long: a short message is inside many long templates).
    partial_with_frame: float = 0.9
    partial_with_class: float = 0.85
    partial_min_chars: int = 30
    # Templates rescored with their placeholders free (a wide shortlist by plain similarity,
    # another by bm25 over the words, then the best few kept).
    fuzzy_shortlist: int = 12
    fuzzy_shortlist_cutoff: float = 55.0
    fuzzy_word_shortlist: int = 12
    fuzzy_kept: int = 5
    # Alignments below this similarity (0-100) are not kept at all.
    fuzzy_align_cutoff: float = 60.0


DEFAULT_SCORING: Final = ScoringConfig()
