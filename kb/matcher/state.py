"""What one match call keeps between the blocks of a log: the window of lines, what the rows
read so far hold (frames, exception lines, hits waiting for the lines below them), what was
tried and claimed, the matches and the unexplained lines. The loop over the blocks
(kb.matcher.scan) works on it; the near-miss and unexplained-line passes (kb.matcher.nearmiss,
kb.matcher.unexplained) read and add to it without knowing the loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from kb.matcher.cache import CacheReader
from kb.matcher.evidence import calibrated, uncalibrated
from kb.matcher.prefilter import Prefilter
from kb.matcher.rank import Matches, Unmatched
from kb.matcher.scorer import Scorer
from kb.matcher.tracebacks import SeenFrame
from kb.matcher.trials import Trials
from kb.matcher.verify import Hit, Verifier
from kb.matcher.window import Window

if TYPE_CHECKING:
    from kb.matcher.fuzzy import NearMiss, NearMissSearch
    from kb.matcher.prescan import Prescanned


class Seen(NamedTuple):
    """One unexplained line as found (kb.matcher.unexplained): its line, the class it names,
    its message, the library frame of its traceback, and its text ("" until wanted)."""

    line: int
    named_class: str | None
    message: str
    frame: str | None
    text: str


class ScanState:
    """The state of one match call over a stream of blocks."""

    def __init__(
        self,
        *,
        reader: CacheReader,
        prefilter: Prefilter,
        verifier: Verifier,
        scorer: Scorer,
        near_misses: Callable[[], NearMissSearch],
        top: int,
        min_score: float,
        deadline: float | None = None,
    ) -> None:
        self.reader = reader
        self.deadline = deadline  # time.monotonic() past which the scan stops reading
        self.stopped: str | None = None  # "timeout" when it did
        self.prefilter = prefilter
        self.verifier = verifier
        self.scorer = scorer
        self.near_misses = near_misses
        self.top = top
        # min_score is a calibrated score (the share of answers right); scores are compared
        # raw inside, and calibrated when they are reported
        knots = scorer.config.calibration
        self.min_score = uncalibrated(min_score, knots)
        self.calibrate: Callable[[float], float] = lambda raw: calibrated(raw, knots)
        self.window = Window()
        self.trials = Trials(reader, verifier, self.window)  # the patterns tried on lines
        # what the rows read so far hold
        self.frames: dict[int, SeenFrame] = {}
        self.errors: dict[int, tuple[str, str]] = {}  # exception lines: (class, message)
        self.hits: list[Hit] = []  # verified, not yet scored
        self.claimed: set[int] = set()  # rows a match explains
        self.tracebacks_tried: set[int] = set()  # rows of tracebacks tried by raise site
        self.near_miss_rows: set[int] = set()  # rows tried as near misses
        self.level_rows: set[int] = set()  # ERROR / FATAL lines that name no exception class
        self.explained: set[int] = set()  # rows a match was reported on
        self.unmatched: list[Unmatched] = []  # in log order
        self.unmatched_by_key: dict[tuple[str | None, str], Unmatched] = {}
        self.unmatched_from = 0  # rows above this are settled and looked at
        # a short paste's lines (or paragraphs: text, last row) near a known message
        self.resembling: dict[int, tuple[str, int]] = {}
        # the records the last near-miss look-up aligned well enough (None: none was made)
        self.aligned: set[int] | None = None
        self.aligned_best = 0.0  # ... and how well the best of them lines up
        self.near_miss_found: dict[tuple[str, bool, tuple[int, ...]], list[NearMiss]] = {}
        self.matches = Matches()
        # every unexplained line as found, when this scan is one part of a log (kb.matcher.split)
        self.unmatched_log: list[Seen] | None = None
        # figures for the report (and self.trials's)
        self.lines_total = 0
        self.near_miss_queries = 0
        # the log's lines this scan reports on, from (inclusive) and to (exclusive), when it is
        # one part of a log, and how many of the lines read are theirs
        self.owned: tuple[int, int] | None = None
        self.owned_total = 0
        # the whole file's prefilter hits, and where this scan's stream starts in the file,
        # when a helper scanned it (kb.matcher.prescan; a part of a big log file only)
        self.prescanned: tuple[Prescanned, int] | None = None
        # (offset, data, lines) of the last blocks worked on while the hits are a helper's
        # (scan._remember)
        self.recent_blocks: list[tuple[int | None, bytes | None, int]] = []
